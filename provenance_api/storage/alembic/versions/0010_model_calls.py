"""Each model call of a trace (its mask, rendered prompt, reply, parsed value, timing, tokens, cost and cache
status), kept with the trace, size-capped and tenant-scoped.

One row per kept call: the tenant, the job (``trace_id``) and its turn (so deleting the turn deletes its
calls in the same transaction), the call's order (``call_index``), and how many calls the job made in all
(``trace_calls``: more than the rows kept when the per-trace cap dropped some). Traces run before this step
have no rows: nothing to backfill, their prompts were never kept.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "model_calls",
        sa.Column("id", SEQ, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("trace_id", sa.String(40), nullable=False),
        sa.Column("turn_id", sa.String(256), nullable=False),
        sa.Column("call_index", sa.Integer(), nullable=False),
        sa.Column("trace_calls", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(16), nullable=False),
        sa.Column("mask", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("prompt", sa.JSON(), nullable=False),
        sa.Column("prompt_truncated", sa.Boolean(), nullable=False),
        sa.Column("reply", sa.Text(), nullable=True),
        sa.Column("parsed", sa.Float(), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.UniqueConstraint("tenant", "trace_id", "call_index", name="uq_model_calls_trace_index"),
    )
    op.create_index("ix_model_calls_tenant_turn", "model_calls", ["tenant", "turn_id"])


def downgrade() -> None:
    op.drop_index("ix_model_calls_tenant_turn", table_name="model_calls")
    op.drop_table("model_calls")
