"""A kept model call's HTTP requests (``attempts``: retries and fallbacks included) and whether its tokens were
counted by the service rather than reported by the provider (``estimated``).

Calls are now kept as they are sent, so an interrupted trace's call log holds what was sent; existing rows were
kept when their job ended, one request each as far as anyone recorded, with reported usage.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("model_calls") as batch:
        batch.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("estimated", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("model_calls") as batch:
        batch.drop_column("estimated")
        batch.drop_column("attempts")
