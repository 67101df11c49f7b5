"""Budgets in money as well as calls: each budget entry holds its tenant and the USD it reserved (then billed),
so the per-user and per-tenant money budgets survive a restart like the call budget.

Entries written before this step have no tenant (they count for their user only) and cost 0; they leave the
window within one rate window.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("budget_entries") as batch:
        batch.add_column(sa.Column("tenant_key", sa.String(260), nullable=True))
        batch.add_column(sa.Column("cost_usd", sa.Float(), nullable=False, server_default="0"))
    op.create_index("ix_budget_entries_tenant_at", "budget_entries", ["tenant_key", "at"])


def downgrade() -> None:
    op.drop_index("ix_budget_entries_tenant_at", table_name="budget_entries")
    with op.batch_alter_table("budget_entries") as batch:
        batch.drop_column("cost_usd")
        batch.drop_column("tenant_key")
