"""Budget entries: the embedded mode's per-user call budget, kept in the database so a restart remembers it.

One row per live reservation: the user's budget key, when it was made (wall-clock seconds) and the calls it
holds (the reserved calls until settled, then the calls used).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "budget_entries",
        sa.Column("id", SEQ, primary_key=True, autoincrement=True),
        sa.Column("user_key", sa.String(260), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
    )
    op.create_index("ix_budget_entries_user_at", "budget_entries", ["user_key", "at"])


def downgrade() -> None:
    op.drop_table("budget_entries")
