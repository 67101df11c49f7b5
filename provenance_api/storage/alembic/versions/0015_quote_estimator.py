"""The estimator a quote was made for is its own column of ``quotes``, no longer a key of the ``quote`` JSON.

Existing rows: the column is read from the JSON's ``estimator`` key, and is ``judged`` where the key is absent
or null (quotes made before there was a choice of estimator were judged); the key is then removed from the
JSON, so the column is the one place it is kept. Downgrading writes it back into the JSON first.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BACKFILL = {
    "sqlite": (
        "UPDATE quotes SET estimator = COALESCE(json_extract(quote, '$.estimator'), 'judged'), "
        "quote = json_remove(quote, '$.estimator') "
        "WHERE json_type(quote, '$.estimator') IS NOT NULL"
    ),
    "postgresql": (
        "UPDATE quotes SET estimator = COALESCE(quote::json ->> 'estimator', 'judged'), "
        "quote = (quote::jsonb - 'estimator')::json "
        "WHERE (quote::jsonb) ? 'estimator'"
    ),
}

_RESTORE = {
    "sqlite": "UPDATE quotes SET quote = json_set(quote, '$.estimator', estimator)",
    "postgresql": "UPDATE quotes SET quote = (quote::jsonb || jsonb_build_object('estimator', estimator))::json",
}


def upgrade() -> None:
    with op.batch_alter_table("quotes") as batch:
        batch.add_column(sa.Column("estimator", sa.String(16), nullable=False, server_default="judged"))
    backfill = _BACKFILL.get(op.get_bind().dialect.name)
    if backfill is not None:
        op.execute(backfill)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    restore = _RESTORE.get(dialect)
    if restore is not None:
        op.execute(restore)
    if dialect == "sqlite":
        op.execute("ALTER TABLE quotes DROP COLUMN estimator")  # in place, as 0012 drops its columns
        return
    with op.batch_alter_table("quotes") as batch:
        batch.drop_column("estimator")
