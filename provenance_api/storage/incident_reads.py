"""The two reads an incident export needs beyond a turn and a job: the latest finished trace of one target of a turn,
and the custody log's latest record of a stored turn. Read-only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from provenance_api.storage.crud_traces import TERMINAL
from provenance_api.storage.custody_log import TURN_STORED
from provenance_api.storage.models import CustodyRecordRow, StoredTurnRow, TraceJobRow
from provenance_api.storage.session import Database

__all__ = ["TurnRecordEntry", "latest_finished_trace", "newest_turn_ids", "turn_record"]


@dataclass(frozen=True)
class TurnRecordEntry:
    """A ``turn_stored`` record of the custody log."""

    seq: int
    kind: str
    hash: str
    content_digest: str
    created_at: datetime


async def latest_finished_trace(db: Database, tenant: str, turn_id: str, target_id: str) -> str | None:
    """The id of the tenant's trace of ``target_id`` (an action or sentence id) in ``turn_id`` that ended last
    (succeeded, failed or interrupted); None when no trace of it has ended."""
    query = (
        select(TraceJobRow.id)
        .where(
            TraceJobRow.tenant == tenant,
            TraceJobRow.turn_id == turn_id,
            TraceJobRow.kind == "trace",
            TraceJobRow.segment_id == target_id,
            TraceJobRow.status.in_(sorted(TERMINAL)),
        )
        .order_by(TraceJobRow.finished_at.desc(), TraceJobRow.created_at.desc(), TraceJobRow.id.desc())
        .limit(1)
    )
    async with db.session() as session:
        found: str | None = (await session.execute(query)).scalar_one_or_none()
    return found


async def turn_record(db: Database, tenant: str, turn_id: str) -> TurnRecordEntry | None:
    """The latest ``turn_stored`` record of ``turn_id`` in the tenant's custody log; None when the turn was stored
    before the log began."""
    query = (
        select(CustodyRecordRow)
        .where(
            CustodyRecordRow.tenant == tenant,
            CustodyRecordRow.subject == turn_id,
            CustodyRecordRow.kind == TURN_STORED,
        )
        .order_by(CustodyRecordRow.seq.desc())
        .limit(1)
    )
    async with db.session() as session:
        row = (await session.execute(query)).scalar_one_or_none()
        if row is None:
            return None
        return TurnRecordEntry(
            seq=row.seq, kind=row.kind, hash=row.hash, content_digest=row.content_digest, created_at=row.created_at
        )


async def newest_turn_ids(db: Database, tenant: str, limit: int) -> list[str]:
    """The ids of the tenant's ``limit`` most recently stored turns, newest first (to name when one is missing)."""
    query = (
        select(StoredTurnRow.turn_id)
        .where(StoredTurnRow.tenant == tenant)
        .order_by(StoredTurnRow.seq.desc())
        .limit(limit)
    )
    async with db.session() as session:
        return [str(turn_id) for turn_id in (await session.execute(query)).scalars()]
