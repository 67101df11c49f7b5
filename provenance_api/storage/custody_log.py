"""The custody log: per tenant, a hash-chained, append-only record of what was stored and deleted.

Each record attests one event in the same transaction as the event itself: a stored turn (``turn_stored``: the
turn's digest and each source's id, layer and text digest), a stored trace result (``result_stored``: the
result JSON's digest with the digests its row keeps), a deleted turn (``turn_deleted``: its digest and the
results that went with it). A record carries its ``kind``, so later kinds (a gateway's record, an envelope) are
chained in the same log without a schema change; the walk (``custody_verify``) passes over kinds it does not know.

A record's ``content_digest`` is the sha-256 of the canonical JSON of ``attested`` (keys sorted, no spaces); its
``hash`` is the sha-256 of the canonical JSON of (previous hash, tenant, seq, kind, subject, content digest,
created_at). The first record of a tenant's log is ``log_started``: it chains from 64 zeros and attests how far
the tenant's turns (``seq``) and results (``id``) reached before it, so rows stored before the log are counted
as such and never taken for a break.

Writers are serialised per tenant: on PostgreSQL by a transaction-scoped advisory lock on the tenant, taken just
before the head is read; on SQLite by its one write lock, which every caller already holds (it has written the
turn, result or deletion the record attests before appending). Two concurrent writers therefore never read the
same head, and the unique ``(tenant, seq)`` refuses a fork should they ever try.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from provenance_api.core.redaction import REDACTED_KEY
from provenance_api.storage.models import CustodyRecordRow, StoredTurnRow, TraceResultRow, utcnow

GENESIS = "0" * 64
"""The previous hash of a tenant's first record."""

LOCK_CLASS = 0x70726F76  # the advisory-lock class of custody writers (``pg_advisory_xact_lock(class, tenant)``)

TURN_STORED = "turn_stored"
RESULT_STORED = "result_stored"
TURN_DELETED = "turn_deleted"
LOG_STARTED = "log_started"


def canonical_json(value: Any) -> str:
    """The one serialisation every digest of the log is over: keys sorted, no spaces, UTF-8 text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest_of(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8", "surrogatepass")).hexdigest()


def chain_hash(
    prev_hash: str, tenant: str, seq: int, kind: str, subject: str, content_digest: str, created_at: datetime
) -> str:
    """A record's hash: it covers the previous record's hash, so it depends on every record before it."""
    fields = {
        "prev_hash": prev_hash,
        "tenant": tenant,
        "seq": seq,
        "kind": kind,
        "subject": subject,
        "content_digest": content_digest,
        "created_at": created_at.isoformat(),
    }
    return digest_of(fields)


@dataclass(frozen=True)
class Entry:
    """One record to append: what it is about and the document it attests."""

    kind: str
    subject: str
    attested: dict[str, Any]


def source_digests(turn: StoredTurn) -> list[dict[str, str]]:
    """Each source of the turn's corpus (the default parameters'): its id, layer and the digest of its text."""
    corpus = build_corpus(turn)
    return [{"id": u.id, "layer": u.layer.value, "digest": u.evidence.digest} for u in corpus.units]


def turn_attestation(turn: StoredTurn, turn_digest: str) -> dict[str, Any]:
    """What a ``turn_stored`` record attests: the turn's digest (of its stored canonical JSON), each source's
    digest, and how many values redaction replaced in which source (never the values)."""
    attested: dict[str, Any] = {"turn_id": turn.turn_id, "turn_digest": turn_digest}
    try:
        attested["sources"] = source_digests(turn)
    except Exception:  # a turn the corpus cannot be built from is still attested by its digest
        attested["sources"] = []
    redacted = turn.metadata.get(REDACTED_KEY)
    if isinstance(redacted, dict) and redacted:
        attested["redacted"] = redacted
    return attested


def turn_entry(turn: StoredTurn, turn_digest: str) -> Entry:
    return Entry(TURN_STORED, turn.turn_id, turn_attestation(turn, turn_digest))


RESULT_FIELDS = ("job_id", "turn_id", "turn_digest", "claim_digest", "query_digest", "corpus_digest", "model")


def result_attestation(row: TraceResultRow) -> dict[str, Any]:
    """What a ``result_stored`` record attests: the digests the result row keeps and the digest of its result JSON
    (as stored: the JSON read back)."""
    attested: dict[str, Any] = {name: getattr(row, name) for name in RESULT_FIELDS}
    attested["result_digest"] = digest_of(json.loads(json.dumps(row.result)))
    return attested


def result_entry(row: TraceResultRow) -> Entry:
    return Entry(RESULT_STORED, row.job_id, result_attestation(row))


async def deletion_entries(session: AsyncSession, tenant: str, seqs: Sequence[int]) -> list[Entry]:
    """``turn_deleted`` records of the tenant's turns ``seqs`` (read before they go, in the deleting transaction):
    each turn's digest and the trace ids whose results go with it."""
    turns = (
        await session.execute(
            select(StoredTurnRow.turn_id, StoredTurnRow.digest)
            .where(StoredTurnRow.tenant == tenant, StoredTurnRow.seq.in_(list(seqs)))
            .order_by(StoredTurnRow.seq)
        )
    ).all()
    ids = [str(turn_id) for turn_id, _ in turns]
    results: dict[str, list[str]] = {turn_id: [] for turn_id in ids}
    found = await session.execute(
        select(TraceResultRow.turn_id, TraceResultRow.job_id)
        .where(TraceResultRow.tenant == tenant, TraceResultRow.turn_id.in_(ids))
        .order_by(TraceResultRow.id)
    )
    for turn_id, job_id in found.all():
        results[str(turn_id)].append(str(job_id))
    return [
        Entry(TURN_DELETED, str(turn_id), {"turn_id": str(turn_id), "turn_digest": digest, "results": results[turn_id]})
        for turn_id, digest in turns
    ]


def _lock_key(tenant: str) -> int:
    return zlib.crc32(tenant.encode("utf-8")) - 2**31  # a signed 32-bit int, as PostgreSQL's int4 wants


async def _serialise(session: AsyncSession, tenant: str) -> None:
    if session.get_bind().dialect.name == "postgresql":
        await session.execute(
            text("SELECT pg_advisory_xact_lock(:cls, :key)"), {"cls": LOCK_CLASS, "key": _lock_key(tenant)}
        )


async def _log_started(session: AsyncSession, tenant: str, entries: Sequence[Entry]) -> Entry:
    """The first record of a tenant's log: how far its turns and results reached before it (the rows this
    transaction writes itself left out)."""
    own_turns = [e.subject for e in entries if e.kind == TURN_STORED]
    own_results = [e.subject for e in entries if e.kind == RESULT_STORED]
    turns = select(func.max(StoredTurnRow.seq)).where(StoredTurnRow.tenant == tenant)
    if own_turns:
        turns = turns.where(StoredTurnRow.turn_id.not_in(own_turns))
    results = select(func.max(TraceResultRow.id)).where(TraceResultRow.tenant == tenant)
    if own_results:
        results = results.where(TraceResultRow.job_id.not_in(own_results))
    through_turn = (await session.execute(turns)).scalar_one_or_none() or 0
    through_result = (await session.execute(results)).scalar_one_or_none() or 0
    return Entry(
        LOG_STARTED, tenant, {"turns_through_seq": int(through_turn), "results_through_id": int(through_result)}
    )


async def append(session: AsyncSession, tenant: str, entries: Sequence[Entry]) -> list[CustodyRecordRow]:
    """Append ``entries`` to the tenant's log inside the caller's transaction, which has already written what
    they attest (on SQLite, that write holds the lock that serialises appends). The first append of a tenant
    starts its log with a ``log_started`` record."""
    if not entries:
        return []
    await _serialise(session, tenant)
    head = (
        await session.execute(
            select(CustodyRecordRow.seq, CustodyRecordRow.hash)
            .where(CustodyRecordRow.tenant == tenant)
            .order_by(CustodyRecordRow.seq.desc())
            .limit(1)
        )
    ).first()
    seq, prev = (int(head[0]), str(head[1])) if head is not None else (0, GENESIS)
    todo = list(entries) if head is not None else [await _log_started(session, tenant, entries), *entries]
    now = utcnow()
    rows: list[CustodyRecordRow] = []
    for entry in todo:
        seq += 1
        content = digest_of(entry.attested)
        record_hash = chain_hash(prev, tenant, seq, entry.kind, entry.subject, content, now)
        rows.append(
            CustodyRecordRow(
                tenant=tenant,
                seq=seq,
                kind=entry.kind,
                subject=entry.subject,
                attested=entry.attested,
                content_digest=content,
                prev_hash=prev,
                hash=record_hash,
                created_at=now,
            )
        )
        prev = record_hash
    session.add_all(rows)
    await session.flush()
    return rows
