"""Stored turns: idempotent put on (tenant, turn_id), tenant-scoped reads.

A turn is stored once and never overwritten. Its identity is the digest of its canonical JSON:
the validated model serialised in field order, nested objects in the order they were sent
(the order is part of the text the estimator reads). So the same content sent twice — with its
top-level fields in any order, with or without default-valued fields — is the same turn;
different content under the same id is a conflict that names the fields that differ.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from estimator.turn import StoredTurn
from provenance_api.storage import search_index
from provenance_api.storage.errors import RecordConflict, RecordInvalid, RecordMissing
from provenance_api.storage.models import StoredTurnRow, utcnow
from provenance_api.storage.session import Database


@dataclass(frozen=True)
class TurnRecord:
    """A stored turn as read back: the turn, its digest and when it was stored."""

    turn: StoredTurn
    digest: str
    stored_at: datetime
    seq: int

    @property
    def turn_id(self) -> str:
        return self.turn.turn_id


def canonical(turn: StoredTurn) -> tuple[str, str]:
    """(canonical JSON, sha256 digest) of a turn."""
    body = json.dumps(turn.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False)
    try:
        encoded = body.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a JSON "\ud800" escape) is not text: it cannot be stored
        raise RecordInvalid(
            "the turn contains a lone UTF-16 surrogate (e.g. a JSON \\ud800 escape without its pair), which is "
            "not valid Unicode text",
            record="turn",
            field="turn",
        ) from None
    return body, hashlib.sha256(encoded).hexdigest()


def _record(row: StoredTurnRow) -> TurnRecord:
    return TurnRecord(
        turn=StoredTurn.model_validate_json(row.body), digest=row.digest, stored_at=row.stored_at, seq=row.seq
    )


def _differing_fields(stored: str, incoming: str) -> list[str]:
    a: dict[str, Any] = json.loads(stored)
    b: dict[str, Any] = json.loads(incoming)
    return sorted(k for k in set(a) | set(b) if json.dumps(a.get(k)) != json.dumps(b.get(k)))


async def _find(session: AsyncSession, tenant: str, turn_id: str) -> StoredTurnRow | None:
    found = await session.execute(
        select(StoredTurnRow).where(StoredTurnRow.tenant == tenant, StoredTurnRow.turn_id == turn_id)
    )
    return found.scalar_one_or_none()


def _conflict(row: StoredTurnRow, body: str, digest: str) -> RecordConflict:
    fields = _differing_fields(row.body, body)
    return RecordConflict(
        f"turn {row.turn_id!r} is already stored with different content (stored digest {row.digest[:12]}…, "
        f"this request {digest[:12]}…); fields that differ: {', '.join(fields) or '(none at top level)'}. "
        "A stored turn is never overwritten.",
        record="turn",
        field="turn_id",
        extra={"conflicting_fields": fields, "stored_digest": row.digest, "request_digest": digest},
    )


async def put_turn(db: Database, tenant: str, user: str, turn: StoredTurn) -> tuple[TurnRecord, bool]:
    """Store ``turn`` for ``tenant``. Returns (record, created). Raises RecordConflict on different content."""
    body, digest = canonical(turn)
    async with db.session() as session:
        existing = await _find(session, tenant, turn.turn_id)
        if existing is not None:
            if existing.digest != digest:
                raise _conflict(existing, body, digest)
            return _record(existing), False
        row = StoredTurnRow(
            tenant=tenant,
            turn_id=turn.turn_id,
            digest=digest,
            body=body,
            model=turn.model,
            agent=turn.agent,
            turn_created_at=turn.created_at,
            stored_at=utcnow(),
            stored_by=user,
        )
        session.add(row)
        try:
            await session.flush()  # assigns seq; the search row goes in the same transaction
            await search_index.index_turn(session, seq=row.seq, tenant=tenant, turn=turn)
            await session.commit()
        except IntegrityError:  # a concurrent put of the same id won the race
            await session.rollback()
            raced = await _find(session, tenant, turn.turn_id)
            if raced is None:
                raise
            if raced.digest != digest:
                raise _conflict(raced, body, digest) from None
            return _record(raced), False
        return TurnRecord(turn=turn, digest=digest, stored_at=row.stored_at, seq=row.seq), True


async def get_turn(db: Database, tenant: str, turn_id: str) -> TurnRecord:
    """The tenant's turn ``turn_id``; another tenant's turn is RecordMissing like a missing one."""
    async with db.session() as session:
        row = await _find(session, tenant, turn_id)
    if row is None:
        raise RecordMissing(f"no stored turn {turn_id!r}", record="turn", field="turn_id")
    return _record(row)


@dataclass(frozen=True)
class TurnSummary:
    turn_id: str
    digest: str
    model: str | None
    agent: str | None
    created_at: datetime | None
    stored_at: datetime
    seq: int


async def list_turns(db: Database, tenant: str, *, limit: int, after: int | None,
                     seqs: list[int] | None = None) -> list[TurnSummary]:
    """The tenant's turns in storage order, ``limit`` at most, after sequence number ``after`` (only those
    in ``seqs`` when given, e.g. a search's matches)."""
    query = select(
        StoredTurnRow.turn_id,
        StoredTurnRow.digest,
        StoredTurnRow.model,
        StoredTurnRow.agent,
        StoredTurnRow.turn_created_at,
        StoredTurnRow.stored_at,
        StoredTurnRow.seq,
    ).where(StoredTurnRow.tenant == tenant)
    if after is not None:
        query = query.where(StoredTurnRow.seq > after)
    if seqs is not None:
        query = query.where(StoredTurnRow.seq.in_(seqs))
    async with db.session() as session:
        rows = (await session.execute(query.order_by(StoredTurnRow.seq).limit(limit))).all()
    return [
        TurnSummary(
            turn_id=r[0], digest=r[1], model=r[2], agent=r[3], created_at=r[4], stored_at=r[5], seq=r[6]
        )
        for r in rows
    ]


def encode_cursor(turn_id: str) -> str:
    """A page cursor: the last listed turn's id, opaque to clients. It says nothing about other tenants
    (a global sequence number would show how much they store)."""
    return base64.urlsafe_b64encode(turn_id.encode("utf-8")).decode("ascii").rstrip("=")


async def search_turns(db: Database, tenant: str, query: str, *, limit: int,
                       after: int | None) -> list[TurnSummary]:
    """The tenant's turns whose id, agent, model, query or response contain ``query`` (case and spacing
    ignored), in storage order, from the search index."""
    seqs = await search_index.search(db, tenant, query, after=after, limit=limit)
    return await list_turns(db, tenant, limit=limit, after=after, seqs=seqs) if seqs else []


async def find_turns(db: Database, tenant: str, query: str, *, limit: int, after: int | None) -> list[TurnSummary]:
    """A page of the tenant's turns: those matching ``query`` (from the search index) when it is not blank,
    else all of them, in storage order."""
    if query.strip():
        return await search_turns(db, tenant, query, limit=limit, after=after)
    return await list_turns(db, tenant, limit=limit, after=after)


async def cursor_position(db: Database, tenant: str, cursor: str | None) -> int | None:
    """The storage position a cursor stands for within ``tenant``; RecordInvalid for a cursor that is not one
    of this tenant's (or whose turn is gone)."""
    if not cursor:
        return None
    try:
        turn_id = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        turn_id = None
    if turn_id:
        async with db.session() as session:
            row = await _find(session, tenant, turn_id)
        if row is not None:
            return row.seq
    raise RecordInvalid("the cursor is not valid here", record="cursor", field="query.cursor")


async def iter_turns(db: Database, tenant: str, *, batch: int = 200) -> AsyncIterator[TurnRecord]:
    """Every turn of ``tenant`` in storage order, read ``batch`` rows at a time."""
    after = 0
    while True:
        query = (
            select(StoredTurnRow)
            .where(StoredTurnRow.tenant == tenant, StoredTurnRow.seq > after)
            .order_by(StoredTurnRow.seq)
            .limit(batch)
        )
        async with db.session() as session:
            rows = list((await session.execute(query)).scalars().all())
        if not rows:
            return
        for row in rows:
            yield _record(row)
        after = rows[-1].seq
