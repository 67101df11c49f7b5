"""Import batches: each stored turn remembers the import that created it, so a batch can be deleted whole.

``stored_turns.import_batch`` holds the batch id an import returned in its summary (``ib_…``); it is null for
turns stored one at a time (``POST /v1/turns``) and for turns stored before this step. Turn deletion needs no
schema change.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("stored_turns", sa.Column("import_batch", sa.String(40), nullable=True))
    op.create_index("ix_stored_turns_tenant_batch", "stored_turns", ["tenant", "import_batch"])


def downgrade() -> None:
    op.drop_index("ix_stored_turns_tenant_batch", table_name="stored_turns")
    with op.batch_alter_table("stored_turns") as batch:
        batch.drop_column("import_batch")
