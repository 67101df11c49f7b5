"""Evidence records: every ``tools/call`` result the MCP gateway relayed, and the gaps it could not record
(``storage/evidence_records.py``). Append-only; looked up by (tenant, digest) when a turn's tool returns are bound
to the gateway's records.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "evidence_records",
        sa.Column("id", SEQ, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("principal", sa.String(256), nullable=False),
        sa.Column("server", sa.String(256), nullable=False),
        sa.Column("transport", sa.String(16), nullable=False),
        sa.Column("tool", sa.String(256), nullable=False),
        sa.Column("request_id", sa.String(256), nullable=False),
        sa.Column("arguments_digest", sa.String(64), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("is_error", sa.Boolean(), nullable=False),
        sa.Column("observed_at", sa.DateTime(), nullable=False),
        sa.Column("missed", sa.Integer(), nullable=False),
        sa.Column("cause", sa.Text(), nullable=False),
    )
    op.create_index("ix_evidence_records_tenant_digest", "evidence_records", ["tenant", "digest"])


def downgrade() -> None:
    op.drop_index("ix_evidence_records_tenant_digest", table_name="evidence_records")
    op.drop_table("evidence_records")
