"""Import cursors: per tenant and history source, the position its last import reached.

The cursor moves only after an import ran to its end, so an import cut short (the source went away, the
process was stopped) is read again next time; turns already stored then come back ``unchanged``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import IntegrityError

from provenance_api.storage.models import ImportCursorRow, utcnow
from provenance_api.storage.session import Database


@dataclass(frozen=True)
class ImportCursor:
    tenant: str
    source: str
    position: str
    conversations: int
    updated_at: datetime


async def get_cursor(db: Database, tenant: str, source: str) -> ImportCursor | None:
    async with db.session() as session:
        row = await session.get(ImportCursorRow, (tenant, source))
        if row is None:
            return None
        return ImportCursor(row.tenant, row.source, row.position, row.conversations, row.updated_at)


async def put_cursor(db: Database, tenant: str, source: str, position: str, conversations: int) -> ImportCursor:
    """Set the tenant's cursor on ``source`` (created on first use)."""
    now = utcnow()
    for _ in range(2):  # a concurrent first import may create the row between our read and insert
        async with db.session() as session:
            row = await session.get(ImportCursorRow, (tenant, source))
            if row is None:
                session.add(
                    ImportCursorRow(
                        tenant=tenant, source=source, position=position, conversations=conversations, updated_at=now
                    )
                )
            else:
                row.position, row.conversations, row.updated_at = position, conversations, now
            try:
                await session.commit()
            except IntegrityError:
                await session.rollback()
                continue
        break
    return ImportCursor(tenant, source, position, conversations, now)
