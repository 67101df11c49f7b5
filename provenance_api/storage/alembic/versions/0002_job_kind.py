"""Job kinds: a trace job or a probe job share one table; a probe names the source it removes.

Existing rows are traces (``kind`` defaults to ``trace`` on the server side, so no row is
rewritten by hand and no data is lost).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-14
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("trace_jobs") as batch:
        batch.add_column(sa.Column("kind", sa.String(16), nullable=False, server_default="trace"))
        batch.add_column(sa.Column("source_id", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trace_jobs") as batch:
        batch.drop_column("source_id")
        batch.drop_column("kind")
