"""The turn search index: one row of normalised searchable text per stored turn.

SQLite: an FTS5 table with the trigram tokenizer whose rowid is the turn's ``seq``. PostgreSQL: a table keyed by
``seq`` (deleted with its turn) with a ``pg_trgm`` GIN index when the extension can be created; without it the
table still answers, by scanning text rather than parsing turns. Existing turns are indexed at startup.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        op.execute("CREATE VIRTUAL TABLE turn_search USING fts5(text, tenant UNINDEXED, tokenize='trigram')")
        return
    op.create_table(
        "turn_search",
        sa.Column("seq", sa.BigInteger(), sa.ForeignKey("stored_turns.seq", ondelete="CASCADE"), primary_key=True),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
    )
    op.create_index("ix_turn_search_tenant_seq", "turn_search", ["tenant", "seq"])
    nested = bind.begin_nested()
    try:
        bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
        bind.execute(sa.text("CREATE INDEX ix_turn_search_text_trgm ON turn_search USING gin (text gin_trgm_ops)"))
        nested.commit()
    except sa.exc.DBAPIError:  # no pg_trgm here: search still works, by scanning the index table
        nested.rollback()


def downgrade() -> None:
    op.drop_table("turn_search")
