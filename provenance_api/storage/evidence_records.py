"""The MCP gateway's evidence records (``evidence_records``): appended, listed, and looked up by digest.

Append-only: a record is inserted and never changed or removed (``models.EvidenceRow`` refuses both through the
ORM). ``custody_for`` is the binding of a turn's tool returns to the records: for each digest of a return's text,
the earliest result the gateway recorded with that digest for the tenant.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import select

from provenance_api.core.evidence import EvidenceRecord
from provenance_api.storage.models import EvidenceRow
from provenance_api.storage.session import Database

__all__ = ["append_evidence", "custody_for", "list_evidence"]

_LOOKUP_CHUNK = 500  # digests per query (bound parameters stay far below every engine's limit)


def _row(record: EvidenceRecord) -> EvidenceRow:
    return EvidenceRow(
        tenant=record.tenant,
        kind=record.kind,
        principal=record.principal,
        server=record.server,
        transport=record.transport,
        tool=record.tool,
        request_id=record.request_id,
        arguments_digest=record.arguments_digest,
        digest=record.digest,
        is_error=record.is_error,
        observed_at=record.observed_at,
        missed=record.missed,
        cause=record.cause,
    )


def _record(row: EvidenceRow) -> EvidenceRecord:
    return EvidenceRecord(
        id=row.id,
        kind="gap" if row.kind == "gap" else "result",
        tenant=row.tenant,
        principal=row.principal,
        server=row.server,
        transport="http" if row.transport == "http" else "stdio",
        tool=row.tool,
        request_id=row.request_id,
        arguments_digest=row.arguments_digest,
        digest=row.digest,
        is_error=row.is_error,
        observed_at=row.observed_at,
        missed=row.missed,
        cause=row.cause,
    )


async def append_evidence(db: Database, records: Sequence[EvidenceRecord]) -> None:
    """Insert ``records`` in one transaction (all or none). Raises what the store raises
    (``StorageUnavailable`` for a full, read-only or missing database)."""
    if not records:
        return
    async with db.transaction() as session:
        session.add_all([_row(r) for r in records])


async def list_evidence(db: Database, tenant: str, *, limit: int = 1000) -> list[EvidenceRecord]:
    """The tenant's newest ``limit`` records (results and gaps), oldest first."""
    async with db.session() as session:
        rows = (
            await session.scalars(
                select(EvidenceRow).where(EvidenceRow.tenant == tenant).order_by(EvidenceRow.id.desc()).limit(limit)
            )
        ).all()
    return [_record(r) for r in reversed(rows)]


async def custody_for(db: Database, tenant: str, digests: Iterable[str]) -> dict[str, EvidenceRecord]:
    """For each digest the tenant's gateway recorded a result with, that result's earliest record."""
    wanted = sorted({d for d in digests if d})
    found: dict[str, EvidenceRecord] = {}
    async with db.session() as session:
        for start in range(0, len(wanted), _LOOKUP_CHUNK):
            chunk = wanted[start : start + _LOOKUP_CHUNK]
            rows = await session.scalars(
                select(EvidenceRow)
                .where(EvidenceRow.tenant == tenant, EvidenceRow.kind == "result", EvidenceRow.digest.in_(chunk))
                .order_by(EvidenceRow.id)
            )
            for row in rows:
                found.setdefault(row.digest, _record(row))
    return found
