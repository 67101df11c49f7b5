"""What the turn list and the trace list filter and sort on.

``stored_turns.traceable``: how many sentences of the response the free tier marks traceable. The count needs the
free tier (the service's tokenizer and the operator's parameters), which lives above storage, so this migration
adds the column empty: a turn stored from now on is counted as it is stored, and a turn stored before (or by an
import) is counted, by the same code, the next time its tenant's turns are listed. A turn that can no longer be
read counts 0 and stays listed. Indexes: each sort key of the turn list with ``turn_id`` (its tie-breaker), the
agent filter, the trace list's newest-first order per tenant, and a turn's traces.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TURN_INDEXES = {
    "ix_stored_turns_tenant_stored": ["tenant", "stored_at", "turn_id"],
    "ix_stored_turns_tenant_created": ["tenant", "turn_created_at", "turn_id"],
    "ix_stored_turns_tenant_model": ["tenant", "model", "turn_id"],
    "ix_stored_turns_tenant_traceable": ["tenant", "traceable", "turn_id"],
    "ix_stored_turns_tenant_agent": ["tenant", "agent"],
}
_JOB_INDEXES = {
    "ix_trace_jobs_tenant_kind_created": ["tenant", "kind", "created_at", "id"],
    "ix_trace_jobs_tenant_turn": ["tenant", "turn_id"],
}


def upgrade() -> None:
    op.add_column("stored_turns", sa.Column("traceable", sa.Integer(), nullable=True))
    for name, columns in _TURN_INDEXES.items():
        op.create_index(name, "stored_turns", columns)
    for name, columns in _JOB_INDEXES.items():
        op.create_index(name, "trace_jobs", columns)


def downgrade() -> None:
    for name in _JOB_INDEXES:
        op.drop_index(name, table_name="trace_jobs")
    for name in _TURN_INDEXES:
        op.drop_index(name, table_name="stored_turns")
    with op.batch_alter_table("stored_turns") as batch:
        batch.drop_column("traceable")
