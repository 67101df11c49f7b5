"""Stored turns: idempotent put on (tenant, turn_id), tenant-scoped reads.

A turn is stored once and never overwritten. Its identity is the digest of its canonical JSON:
the validated model serialised in field order, nested objects in the order they were sent
(the order is part of the text the estimator reads). So the same content sent twice — with its
top-level fields in any order, with or without default-valued fields — is the same turn;
different content under the same id is a conflict that names the fields that differ.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from estimator.corpus.turn import StoredTurn
from provenance_api.storage import crud_calls, crud_traces, custody_log, search_index
from provenance_api.storage.errors import (
    RecordConflict,
    RecordInvalid,
    RecordMissing,
    RecordUnreadable,
    StorageError,
)
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


def unreadable_reason(exc: BaseException) -> str:
    """Why a stored body no longer reads as a turn, in one line."""
    if isinstance(exc, RecursionError):
        return "it nests too deeply to read"
    text = str(exc)
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        text = f"{'.'.join(str(p) for p in first.get('loc', ())) or 'turn'}: {first.get('msg', '')}"
    return text[:400] + ("…" if len(text) > 400 else "")


def _unreadable(turn_id: str, exc: BaseException) -> RecordUnreadable:
    return RecordUnreadable(
        f"turn {turn_id!r} is stored but cannot be read ({unreadable_reason(exc)}); it was stored before "
        "today's limits (at most 64 levels of nesting) and no read of it can succeed: delete it and store "
        "it again within the limits",
        record="turn",
        field="turn_id",
        extra={"turn_id": turn_id},
    )


def _record(row: StoredTurnRow) -> TurnRecord:
    try:
        turn = StoredTurn.model_validate_json(row.body)
    except (ValueError, RecursionError) as exc:  # a row an older version stored beyond today's limits
        raise _unreadable(row.turn_id, exc) from None
    return TurnRecord(turn=turn, digest=row.digest, stored_at=row.stored_at, seq=row.seq)


def _differing_fields(stored: str, incoming: str) -> list[str]:
    a: dict[str, Any] = json.loads(stored)
    b: dict[str, Any] = json.loads(incoming)
    return sorted(k for k in set(a) | set(b) if json.dumps(a.get(k)) != json.dumps(b.get(k)))


RECORDED_KEYS = frozenset({"timestamp", "created_at", "made_at", "observed_at", "provenance"})
"""What an importer keeps of when and where a message, call or return was recorded (evidence envelopes). A turn
stored before its importer kept them is the same turn as the one imported again with them."""


def _without_new_records(incoming: Any, stored: Any) -> Any:
    """``incoming`` without the recorded-time and origin keys that ``stored`` lacks at the same place."""
    if isinstance(incoming, dict) and isinstance(stored, dict):
        return {
            k: _without_new_records(v, stored.get(k))
            for k, v in incoming.items()
            if k in stored or k not in RECORDED_KEYS
        }
    if isinstance(incoming, list) and isinstance(stored, list) and len(incoming) == len(stored):
        return [_without_new_records(a, b) for a, b in zip(incoming, stored, strict=True)]
    return incoming


def same_turn(stored_body: str, incoming_body: str) -> bool:
    """Whether a turn imported again is the stored one: the same content, or the same but for what the importer
    now records of when and where (a turn stored before that is kept as stored, never a conflict)."""
    stored = json.loads(stored_body)
    return bool(_without_new_records(json.loads(incoming_body), stored) == stored)


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


def _too_large(turn: StoredTurn, size: int, max_bytes: int) -> RecordInvalid:
    return RecordInvalid(
        f"turn {turn.turn_id!r} is {size:,} bytes as stored, over this server's limit of {max_bytes:,} bytes",
        record="turn_body",
        field="turn",
        extra={"turn_id": turn.turn_id, "bytes": size, "max_bytes": max_bytes},
    )


def _new_row(
    tenant: str, user: str, turn: StoredTurn, body: str, digest: str, batch: str | None, traceable: int | None = None
) -> StoredTurnRow:
    return StoredTurnRow(
        tenant=tenant,
        turn_id=turn.turn_id,
        digest=digest,
        body=body,
        model=turn.model,
        agent=turn.agent,
        turn_created_at=turn.created_at,
        stored_at=utcnow(),
        stored_by=user,
        import_batch=batch,
        traceable=traceable,
    )


async def put_turn(
    db: Database,
    tenant: str,
    user: str,
    turn: StoredTurn,
    *,
    batch: str | None = None,
    max_bytes: int | None = None,
    traceable: int | None = None,
) -> tuple[TurnRecord, bool]:
    """Store ``turn`` for ``tenant``. Returns (record, created). Raises RecordConflict on different content,
    RecordInvalid (record ``turn_body``) for a turn whose stored form is over ``max_bytes``. ``batch``: the
    import that stores it (kept on the row when this call creates it). ``traceable``: the free tier's count of
    its traceable sentences (None: counted when its tenant's turns are next listed)."""
    body, digest = canonical(turn)
    size = len(body.encode("utf-8"))
    if max_bytes is not None and size > max_bytes:
        raise _too_large(turn, size, max_bytes)
    async with db.session() as session:
        existing = await _find(session, tenant, turn.turn_id)
        if existing is not None:
            if existing.digest != digest and not same_turn(existing.body, body):
                raise _conflict(existing, body, digest)
            return _record(existing), False
        row = _new_row(tenant, user, turn, body, digest, batch, traceable)
        # off the event loop, before the write (no lock is held while the sources are digested)
        entry = await asyncio.to_thread(custody_log.turn_entry, turn, digest)
        session.add(row)
        try:
            await session.flush()  # assigns seq; the search row and the custody record go in the same transaction
            await search_index.index_turn(session, seq=row.seq, tenant=tenant, turn=turn)
            await custody_log.append(session, tenant, [entry])
            await session.commit()
        except IntegrityError:  # a concurrent put of the same id won the race
            await session.rollback()
            raced = await _find(session, tenant, turn.turn_id)
            if raced is None:
                raise
            if raced.digest != digest and not same_turn(raced.body, body):
                raise _conflict(raced, body, digest) from None
            return _record(raced), False
        return TurnRecord(turn=turn, digest=digest, stored_at=row.stored_at, seq=row.seq), True


@dataclass(frozen=True)
class PutOutcome:
    """What ``put_turns`` did with one turn: ``created``, else found stored with the same content (``problem``
    None), or not stored: ``problem`` is the RecordConflict or RecordInvalid ``put_turn`` would have raised."""

    turn_id: str
    created: bool = False
    problem: StorageError | None = None


IN_BATCH = 500  # ids per ``IN (…)`` lookup


async def put_turns(
    db: Database,
    tenant: str,
    user: str,
    turns: Sequence[StoredTurn],
    *,
    batch: str | None = None,
    max_bytes: int | None = None,
) -> list[PutOutcome]:
    """``put_turn`` for many turns in one transaction, in order: one lookup of the ids already stored, one
    multi-row insert, one insert into the search index, one commit (a bulk import pays one round trip and
    one sync of the disk per batch, not several per turn). Each turn's outcome is what ``put_turn`` gives
    it alone: a turn over ``max_bytes`` or of other content under a stored id (or under an id earlier in
    ``turns``) is not stored and named, the others are. Should another writer store one of the ids meanwhile,
    the batch is rolled back and put one turn at a time."""
    outcomes: list[PutOutcome | None] = [None] * len(turns)
    prepared: list[tuple[int, StoredTurn, str, str]] = []
    for index, turn in enumerate(turns):
        try:
            body, digest = canonical(turn)
        except RecordInvalid as exc:
            outcomes[index] = PutOutcome(turn.turn_id, problem=exc)
            continue
        size = len(body.encode("utf-8"))
        if max_bytes is not None and size > max_bytes:
            outcomes[index] = PutOutcome(turn.turn_id, problem=_too_large(turn, size, max_bytes))
            continue
        prepared.append((index, turn, body, digest))
    if prepared:
        try:
            await _insert_new(db, tenant, user, prepared, batch, outcomes)
        except IntegrityError:  # a concurrent writer stored one of them first: each on its own
            for index, turn, _, _ in prepared:
                try:
                    _, created = await put_turn(db, tenant, user, turn, batch=batch, max_bytes=max_bytes)
                    outcomes[index] = PutOutcome(turn.turn_id, created=created)
                except (RecordConflict, RecordInvalid) as exc:
                    outcomes[index] = PutOutcome(turn.turn_id, problem=exc)
    return [o if o is not None else PutOutcome(turns[i].turn_id) for i, o in enumerate(outcomes)]


async def _insert_new(
    db: Database,
    tenant: str,
    user: str,
    prepared: list[tuple[int, StoredTurn, str, str]],
    batch: str | None,
    outcomes: list[PutOutcome | None],
) -> None:
    ids = list(dict.fromkeys(turn.turn_id for _, turn, _, _ in prepared))
    async with db.session() as session:
        stored: dict[str, StoredTurnRow] = {}
        for start in range(0, len(ids), IN_BATCH):
            query = select(StoredTurnRow).where(
                StoredTurnRow.tenant == tenant, StoredTurnRow.turn_id.in_(ids[start : start + IN_BATCH])
            )
            stored.update((row.turn_id, row) for row in (await session.execute(query)).scalars().all())
        new: list[tuple[int, StoredTurn, StoredTurnRow]] = []
        for index, turn, body, digest in prepared:
            row = stored.get(turn.turn_id)
            if row is not None:
                same = row.digest == digest or same_turn(row.body, body)
                outcomes[index] = PutOutcome(turn.turn_id, problem=None if same else _conflict(row, body, digest))
                continue
            row = _new_row(tenant, user, turn, body, digest, batch)
            stored[turn.turn_id] = row  # a later turn of the same id is compared with this one
            new.append((index, turn, row))
        if not new:
            return
        entries = await asyncio.to_thread(lambda: [custody_log.turn_entry(t, row.digest) for _, t, row in new])
        session.add_all([row for _, _, row in new])
        await session.flush()  # assigns every seq; the search rows and custody records go in the same transaction
        await search_index.index_turns(session, tenant, [(row.seq, turn) for _, turn, row in new])
        await custody_log.append(session, tenant, entries)
        await session.commit()
    for index, turn, _ in new:
        outcomes[index] = PutOutcome(turn.turn_id, created=True)


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
    traceable: int | None = None  # None until counted (``lists.uncounted_turns``)


async def list_turns(
    db: Database, tenant: str, *, limit: int, after: int | None, seqs: list[int] | None = None
) -> list[TurnSummary]:
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
        TurnSummary(turn_id=r[0], digest=r[1], model=r[2], agent=r[3], created_at=r[4], stored_at=r[5], seq=r[6])
        for r in rows
    ]


async def search_turns(db: Database, tenant: str, query: str, *, limit: int, after: int | None) -> list[TurnSummary]:
    """The tenant's turns whose id, agent, model, query or response contain ``query`` (case and spacing
    ignored), in storage order, from the search index."""
    seqs = await search_index.search(db, tenant, query, after=after, limit=limit)
    return await list_turns(db, tenant, limit=limit, after=after, seqs=seqs) if seqs else []


async def turns_under(db: Database, tenant: str, prefixes: list[str]) -> list[TurnRecord]:
    """The tenant's turns whose id starts with one of ``prefixes`` (a conversation's turns: ``<id>:``), in storage
    order; each prefix is an index range on ``(tenant, turn_id)``, compared byte-wise (``C`` on PostgreSQL, so a
    locale's collation cannot reorder the punctuation). Rows that no longer read as turns are left out."""
    found: dict[int, TurnRecord] = {}
    postgres = db.engine.dialect.name == "postgresql"
    async with db.session() as session:
        for prefix in dict.fromkeys(p for p in prefixes if p):
            upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
            column = StoredTurnRow.turn_id.collate("C") if postgres else StoredTurnRow.turn_id
            query = select(StoredTurnRow).where(StoredTurnRow.tenant == tenant, column >= prefix, column < upper)
            for row in (await session.execute(query)).scalars().all():
                if row.turn_id.startswith(prefix) and row.seq not in found:
                    try:
                        found[row.seq] = _record(row)
                    except RecordUnreadable:
                        continue
    return [found[seq] for seq in sorted(found)]


async def holds_any(db: Database, tenant: str, prefix: str) -> bool:
    """Whether the tenant holds any turn whose id starts with ``prefix`` (one index range, as ``turns_under``)."""
    if not prefix:
        return await _exists(db, StoredTurnRow.tenant == tenant)
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    column = StoredTurnRow.turn_id.collate("C") if db.engine.dialect.name == "postgresql" else StoredTurnRow.turn_id
    return await _exists(db, StoredTurnRow.tenant == tenant, column >= prefix, column < upper)


async def _exists(db: Database, *where: Any) -> bool:
    async with db.session() as session:
        found = await session.execute(select(StoredTurnRow.seq).where(*where).limit(1))
        return found.first() is not None


async def iter_turns(
    db: Database, tenant: str, *, batch: int = 200, on_unreadable: Callable[[RecordUnreadable], None] | None = None
) -> AsyncIterator[TurnRecord]:
    """Every turn of ``tenant`` in storage order, read ``batch`` rows at a time. A row that no longer reads
    as a turn raises RecordUnreadable, or with ``on_unreadable`` is passed there and skipped."""
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
            try:
                record = _record(row)
            except RecordUnreadable as exc:
                if on_unreadable is None:
                    raise
                on_unreadable(exc)
                continue
            yield record
        after = rows[-1].seq


@dataclass(frozen=True)
class Deleted:
    """What a delete removed: the turns' ids, and how many quotes, jobs (traces and probes) and results went
    with them."""

    turn_ids: list[str]
    quotes: int
    jobs: int
    results: int


DELETE_CHUNK = 500


async def delete_turns(db: Database, tenant: str, *, turn_id: str | None = None, batch: str | None = None) -> Deleted:
    """Delete the tenant's turn ``turn_id``, or every turn import ``batch`` created, with their quotes, traces,
    probes, trace results (the one deletion of those append-only records) and search-index rows, in one
    transaction. RecordMissing when the tenant has no such turn (or no turn of that batch); RecordConflict
    (record ``trace``/``probe``) while a trace or probe of one of them is queued or running — it is never
    cancelled behind its caller's back. Serialised with starting a trace (``crud_traces.hold_turns``): a job
    created before the delete is seen by it (so refused, or deleted once it ended); after it, none can be.
    Turns are read by id only, so an unreadable turn is deleted too."""
    if (turn_id is None) == (batch is None):
        raise ValueError("give exactly one of turn_id and batch")
    where = (StoredTurnRow.turn_id == turn_id) if turn_id is not None else (StoredTurnRow.import_batch == batch)
    async with db.transaction() as session:
        # the turns first, exclusively: a quote or job of one commits before this reads (and is seen) or waits
        # for it and then finds no turn — so no trace of a deleted turn starts, and none survives it
        rows = await crud_traces.hold_turns(session, tenant, where, exclusive=True)
        if not rows:
            if turn_id is not None:
                raise RecordMissing(f"no stored turn {turn_id!r}", record="turn", field="turn_id")
            raise RecordMissing(
                f"no stored turn was created by import batch {batch!r}", record="import_batch", field="batch_id"
            )
        quotes = jobs = results = 0
        records: list[custody_log.Entry] = []
        for start in range(0, len(rows), DELETE_CHUNK):
            chunk = rows[start : start + DELETE_CHUNK]
            records += await custody_log.deletion_entries(session, tenant, [int(r[0]) for r in chunk])
            ids = [str(r[1]) for r in chunk]
            erased = await crud_traces.erase_for_turns(session, tenant, ids)
            await crud_calls.erase_for_turns(session, tenant, ids)  # the traces' kept model calls
            quotes, jobs, results = quotes + erased[0], jobs + erased[1], results + erased[2]
            seqs = [int(r[0]) for r in chunk]
            await search_index.unindex(session, seqs)
            await session.execute(delete(StoredTurnRow).where(StoredTurnRow.seq.in_(seqs)))
        await custody_log.append(session, tenant, records)  # the deletion is itself a chained record
    return Deleted([str(r[1]) for r in rows], quotes, jobs, results)
