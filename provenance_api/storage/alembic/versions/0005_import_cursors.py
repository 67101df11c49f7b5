"""Import cursors: how far each tenant has read each history source, so the next import reads what is new.

One row per (tenant, source): the source key (name, format and URL without its password), the position
reached (the highest session-item id or checkpoint id read), the conversations seen, and when.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "import_cursors",
        sa.Column("tenant", sa.String(128), primary_key=True),
        sa.Column("source", sa.String(512), primary_key=True),
        sa.Column("position", sa.String(128), nullable=False),
        sa.Column("conversations", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("import_cursors")
