"""A job's calls answered from a judgement cache and its failed calls, beside made and billed, so that every
place reports one set of numbers.

Also where a job came from: ``source`` is ``api`` for a trace the service ran and ``cli`` for one that
``provenance trace`` ran and stored, so the trace list shows both.

Existing rows: a finished trace's counts are read back from its stored result (``calls.cached`` and
``calls.failed``, which every stored result carries); a job without a result (failed, interrupted,
or a probe) keeps 0, the counts it could not have recorded. Every existing job came from the API.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BACKFILL = {
    "sqlite": (
        "UPDATE trace_jobs SET "
        "calls_cached = COALESCE((SELECT CAST(json_extract(r.result, '$.calls.cached') AS INTEGER) "
        "FROM trace_results r WHERE r.job_id = trace_jobs.id), 0), "
        "calls_failed = COALESCE((SELECT CAST(json_extract(r.result, '$.calls.failed') AS INTEGER) "
        "FROM trace_results r WHERE r.job_id = trace_jobs.id), 0) "
        "WHERE status = 'succeeded'"
    ),
    "postgresql": (
        "UPDATE trace_jobs SET "
        "calls_cached = COALESCE((SELECT CAST(r.result::json -> 'calls' ->> 'cached' AS INTEGER) "
        "FROM trace_results r WHERE r.job_id = trace_jobs.id), 0), "
        "calls_failed = COALESCE((SELECT CAST(r.result::json -> 'calls' ->> 'failed' AS INTEGER) "
        "FROM trace_results r WHERE r.job_id = trace_jobs.id), 0) "
        "WHERE status = 'succeeded'"
    ),
}


def upgrade() -> None:
    with op.batch_alter_table("trace_jobs") as batch:
        batch.add_column(sa.Column("calls_cached", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("calls_failed", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("source", sa.Text(), nullable=False, server_default="api"))
    backfill = _BACKFILL.get(op.get_bind().dialect.name)
    if backfill is not None:
        op.execute(backfill)


def downgrade() -> None:
    columns = ("source", "calls_failed", "calls_cached")
    if op.get_bind().dialect.name == "sqlite":
        # SQLite 3.35+ drops a plain column in place; batch mode would recreate trace_jobs, and dropping the old
        # table fails while trace_results' foreign keys point at it
        for column in columns:
            op.execute(f"ALTER TABLE trace_jobs DROP COLUMN {column}")
        return
    with op.batch_alter_table("trace_jobs") as batch:
        for column in columns:
            batch.drop_column(column)
