"""Viewer sessions: the viewer's cookie holds a random session token, never an API key.

A row is one signed-in browser: the SHA-256 of its token, the key it was opened with (revoking the key
ends its sessions), when it expires and when its token was last rotated. Signing out deletes the row.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "viewer_sessions",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("key_id", sa.String(40), sa.ForeignKey("api_keys.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("rotated_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_viewer_sessions_key_id", "viewer_sessions", ["key_id"])
    op.create_index("ix_viewer_sessions_expires_at", "viewer_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_table("viewer_sessions")
