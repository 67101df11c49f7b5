"""The database's identity: a one-row table holding a random instance id, written by the service at its first start
(``Database.establish_identity``) and compared by every readiness probe, so a database replaced under a running
service is not mistaken for its own.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "service_instance",
        sa.Column("name", sa.String(16), primary_key=True),
        sa.Column("instance_id", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("service_instance")
