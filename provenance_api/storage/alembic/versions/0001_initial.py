"""Initial schema: API keys, stored turns, quotes, trace jobs, trace results.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _tenant_user() -> list[sa.Column[str]]:
    return [
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("user", sa.String(128), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(16), nullable=False),
        *_tenant_user(),
        sa.Column("admin", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_api_keys_tenant", "api_keys", ["tenant"])

    op.create_table(
        "stored_turns",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("turn_id", sa.String(256), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("model", sa.String(256), nullable=True),
        sa.Column("agent", sa.String(256), nullable=True),
        sa.Column("turn_created_at", sa.DateTime(), nullable=True),
        sa.Column("stored_at", sa.DateTime(), nullable=False),
        sa.Column("stored_by", sa.String(128), nullable=False),
        sa.UniqueConstraint("tenant", "turn_id", name="uq_stored_turns_tenant_turn"),
    )

    op.create_table(
        "quotes",
        sa.Column("id", sa.String(40), primary_key=True),
        *_tenant_user(),
        sa.Column("turn_id", sa.String(256), nullable=False),
        sa.Column("sentence", sa.Text(), nullable=False),
        sa.Column("claim", sa.Text(), nullable=False),
        sa.Column("segment_id", sa.String(64), nullable=True),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("probe", sa.Boolean(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("quote", sa.JSON(), nullable=False),
        sa.Column("planned_calls", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("refused", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("used_by", sa.String(40), nullable=True),
    )
    op.create_index("ix_quotes_tenant", "quotes", ["tenant"])

    op.create_table(
        "trace_jobs",
        sa.Column("id", sa.String(40), primary_key=True),
        *_tenant_user(),
        sa.Column("turn_id", sa.String(256), nullable=False),
        sa.Column("quote_id", sa.String(40), nullable=False),
        sa.Column("claim", sa.Text(), nullable=False),
        sa.Column("segment_id", sa.String(64), nullable=True),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("calls_planned", sa.Integer(), nullable=False),
        sa.Column("calls_made", sa.Integer(), nullable=False),
        sa.Column("calls_billed", sa.Integer(), nullable=False),
        sa.Column("round", sa.String(16), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("layer_scores", sa.JSON(), nullable=False),
        sa.Column("quoted_cost_usd", sa.Float(), nullable=True),
        sa.Column("max_cost_usd", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_trace_jobs_status", "trace_jobs", ["status"])
    op.create_index("ix_trace_jobs_tenant", "trace_jobs", ["tenant"])

    op.create_table(
        "trace_results",
        sa.Column("id", SEQ, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(40), sa.ForeignKey("trace_jobs.id"), nullable=False, unique=True),
        *_tenant_user(),
        sa.Column("turn_id", sa.String(256), nullable=False),
        sa.Column("turn_digest", sa.String(64), nullable=False),
        sa.Column("claim_digest", sa.String(64), nullable=False),
        sa.Column("query_digest", sa.String(64), nullable=False),
        sa.Column("corpus_digest", sa.String(64), nullable=False),
        sa.Column("prompt_versions", sa.JSON(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("calls_planned", sa.Integer(), nullable=False),
        sa.Column("calls_made", sa.Integer(), nullable=False),
        sa.Column("calls_billed", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_trace_results_tenant", "trace_results", ["tenant"])


def downgrade() -> None:
    for table in ("trace_results", "trace_jobs", "quotes", "stored_turns", "api_keys"):
        op.drop_table(table)
