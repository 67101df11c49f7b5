"""Each job keeps the budget reservation it holds, so a restart can settle an interrupted job's
reservation to the calls it made instead of leaving the whole reservation counted for the window.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("trace_jobs", sa.Column("reservation", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trace_jobs") as batch:
        batch.drop_column("reservation")
