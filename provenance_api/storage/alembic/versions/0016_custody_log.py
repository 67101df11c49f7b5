"""The custody log: per tenant, a hash-chained, append-only record of every stored turn, stored trace result and
deleted turn (``storage/custody_log.py``).

Nothing is backfilled: turns and results stored before this step have no record. The first record a tenant's log
gets is ``log_started``, which attests how far the tables reached then (the highest turn ``seq`` and result
``id``), so ``provenance audit verify`` counts the rows up to there as stored before the log, and names any row
after it that has no record.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "custody_log",
        sa.Column("id", SEQ, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("subject", sa.String(256), nullable=False),
        sa.Column("attested", sa.JSON(), nullable=False),
        sa.Column("content_digest", sa.String(64), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("tenant", "seq", name="uq_custody_log_tenant_seq"),
    )
    op.create_index("ix_custody_log_tenant_subject", "custody_log", ["tenant", "subject"])


def downgrade() -> None:
    op.drop_index("ix_custody_log_tenant_subject", table_name="custody_log")
    op.drop_table("custody_log")
