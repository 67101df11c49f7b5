"""Walking a tenant's custody log (``custody_log``) and comparing it with the turns and results stored now.

In one read snapshot (``REPEATABLE READ`` on PostgreSQL, one read transaction on SQLite), the walk:

1. reads the records in ``seq`` order and checks each: its ``seq`` follows the one before (else records were
   removed: ``record_missing``), it names the previous record's hash (else ``chain_broken``: reordered, or a
   record put in), and its own fields still give its content digest and hash (else ``record_altered``);
2. replays them into what should be stored: the turns stored and not deleted since, with the digest each was
   attested with, and the results stored and not deleted with their turn;
3. compares every stored turn and result row with that: a row whose content no longer gives the attested digest
   (``content_differs``, naming the sources or fields that differ), an attested row that is gone without a
   ``turn_deleted`` record (``row_missing``), a row the log never recorded although it was stored after the log
   began (``row_unrecorded``), a deleted turn stored again with no new record (``row_after_deletion``).

The first break is the one with the lowest ``seq`` (rows no record covers come last). Rows stored before the log
began (at or below the bounds its ``log_started`` record attests) are counted as not chained, not as breaks.
Records of kinds this walk does not know are checked as links of the chain and otherwise passed over.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from estimator.corpus.turn import StoredTurn
from provenance_api.core.schemas_audit import AuditBreak, AuditCounts, AuditHead, AuditReport, BreakProblem
from provenance_api.storage import custody_log as log
from provenance_api.storage.models import CustodyRecordRow, StoredTurnRow, TraceResultRow
from provenance_api.storage.session import Database

BATCH = 500
TURN_BATCH = 50  # turn bodies read at once: each may be as large as the body limit


@dataclass
class _Attested:
    seq: int
    attested: dict[str, Any]


@dataclass
class _Walk:
    tenant: str
    records: int = 0
    head: AuditHead | None = None
    last_seq: int = 0
    last_hash: str = log.GENESIS
    turns_through: int | None = None  # the log_started bounds; None: no log (every row predates it)
    results_through: int | None = None
    turns: dict[str, _Attested] = field(default_factory=dict)
    results: dict[str, _Attested] = field(default_factory=dict)
    deleted_turns: dict[str, int] = field(default_factory=dict)
    deleted_results: dict[str, int] = field(default_factory=dict)
    breaks: list[AuditBreak] = field(default_factory=list)
    checked_turns: int = 0
    checked_results: int = 0
    unchained_turns: int = 0
    unchained_results: int = 0

    def fail(
        self, seq: int | None, kind: str, subject: str, problem: BreakProblem, detail: str, differs: list[str]
    ) -> None:
        self.breaks.append(
            AuditBreak(seq=seq, kind=kind, subject=subject, problem=problem, detail=detail, differs=differs)
        )

    def record(self, row: CustodyRecordRow) -> None:
        self.records += 1
        self._check_link(row)
        self.last_seq, self.last_hash = row.seq, row.hash
        self.head = AuditHead(seq=row.seq, hash=row.hash)
        self._replay(row)

    def _check_link(self, row: CustodyRecordRow) -> None:
        where = f"record {row.seq} ({row.kind} {row.subject!r})"
        if row.seq != self.last_seq + 1:
            first, last = self.last_seq + 1, row.seq - 1
            gone = f"record {first}" if first == last else f"records {first}–{last}"
            self.fail(
                row.seq,
                row.kind,
                row.subject,
                "record_missing",
                f"{gone} of the log are missing before {where}",
                ["seq"],
            )
            return
        if row.prev_hash != self.last_hash:
            self.fail(
                row.seq,
                row.kind,
                row.subject,
                "chain_broken",
                f"{where} does not name the hash of the record before it (prev_hash {row.prev_hash[:12]}…, "
                f"expected {self.last_hash[:12]}…): the log was reordered or a record was put in",
                ["prev_hash"],
            )
            return
        differs = []
        if log.digest_of(row.attested) != row.content_digest:
            differs.append("attested")
        recomputed = log.chain_hash(
            row.prev_hash, row.tenant, row.seq, row.kind, row.subject, row.content_digest, row.created_at
        )
        if recomputed != row.hash:
            differs.append("hash")
        if differs:
            what = (
                "what it attests no longer gives its digest"
                if "attested" in differs
                else "its fields no longer give its hash"
            )
            self.fail(row.seq, row.kind, row.subject, "record_altered", f"{where} was altered: {what}", differs)

    def _replay(self, row: CustodyRecordRow) -> None:
        attested = dict(row.attested)
        if row.kind == log.LOG_STARTED and row.seq == 1:
            self.turns_through = int(attested.get("turns_through_seq", 0))
            self.results_through = int(attested.get("results_through_id", 0))
        elif row.kind == log.TURN_STORED:
            self.turns[row.subject] = _Attested(row.seq, attested)
            self.deleted_turns.pop(row.subject, None)
        elif row.kind == log.RESULT_STORED:
            self.results[row.subject] = _Attested(row.seq, attested)
            self.deleted_results.pop(row.subject, None)
        elif row.kind == log.TURN_DELETED:
            self.turns.pop(row.subject, None)
            self.deleted_turns[row.subject] = row.seq
            for job_id in attested.get("results", []):
                self.results.pop(str(job_id), None)
                self.deleted_results[str(job_id)] = row.seq

    def _predates(self, through: int | None, position: int) -> bool:
        return through is None or position <= through

    def turn(self, seq: int, turn_id: str, digest: str, body: str) -> None:
        expected = self.turns.pop(turn_id, None)
        if expected is None:
            self._unrecorded("turn", turn_id, seq, self.turns_through, self.deleted_turns)
            return
        self.checked_turns += 1
        attested_digest = str(expected.attested.get("turn_digest"))
        actual = hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()
        if actual == attested_digest and digest == attested_digest:
            return
        differs = _differing_sources(expected.attested, body)
        if digest != attested_digest:
            differs.append("digest")
        if actual != attested_digest and not differs:
            differs.append("body")
        self.fail(
            expected.seq,
            log.TURN_STORED,
            turn_id,
            "content_differs",
            f"turn {turn_id!r} is not what record {expected.seq} attested: its stored content now has digest "
            f"{actual[:12]}…, attested {attested_digest[:12]}…; differs: {', '.join(differs)}",
            differs,
        )

    def result(self, row: TraceResultRow) -> None:
        expected = self.results.pop(row.job_id, None)
        if expected is None:
            self._unrecorded("result", row.job_id, row.id, self.results_through, self.deleted_results)
            return
        self.checked_results += 1
        now = log.result_attestation(row)
        differs = sorted(k for k in set(now) | set(expected.attested) if now.get(k) != expected.attested.get(k))
        if differs:
            self.fail(
                expected.seq,
                log.RESULT_STORED,
                row.job_id,
                "content_differs",
                f"the result of {row.job_id} is not what record {expected.seq} attested; differs: {', '.join(differs)}",
                differs,
            )

    def _unrecorded(self, what: str, subject: str, position: int, through: int | None, deleted: dict[str, int]) -> None:
        kind = log.TURN_STORED if what == "turn" else log.RESULT_STORED
        if subject in deleted:
            seq = deleted[subject]
            detail = f"{what} {subject!r} is stored although record {seq} says it was deleted"
            self.fail(seq, log.TURN_DELETED, subject, "row_after_deletion", detail, [what])
        elif self._predates(through, position):
            if what == "turn":
                self.unchained_turns += 1
            else:
                self.unchained_results += 1
        else:
            detail = f"{what} {subject!r} was stored after the log began but no record attests it"
            self.fail(None, kind, subject, "row_unrecorded", detail, [what])

    def report(self) -> AuditReport:
        for subject, expected in self.turns.items():
            detail = f"turn {subject!r} (record {expected.seq}) is no longer stored and no turn_deleted record says why"
            self.fail(expected.seq, log.TURN_STORED, subject, "row_missing", detail, ["turn"])
        for subject, expected in self.results.items():
            detail = (
                f"the result of {subject} (record {expected.seq}) is no longer stored and no turn_deleted record "
                "says why"
            )
            self.fail(expected.seq, log.RESULT_STORED, subject, "row_missing", detail, ["result"])
        ordered = sorted(self.breaks, key=lambda b: (b.seq is None, b.seq or 0))
        return AuditReport(
            tenant=self.tenant,
            intact=not ordered,
            records=self.records,
            head=self.head,
            broken=ordered[0] if ordered else None,
            problems=len(ordered),
            checked=AuditCounts(turns=self.checked_turns, results=self.checked_results),
            not_chained=AuditCounts(turns=self.unchained_turns, results=self.unchained_results),
        )


def _differing_sources(attested: dict[str, Any], body: str) -> list[str]:
    """The sources (``s3``) whose text digest differs from the attested one, read from the stored body now."""
    try:
        now = log.source_digests(StoredTurn.model_validate_json(body))
    except Exception:
        return ["body"]
    before = {str(s["id"]): s for s in attested.get("sources", [])}
    after = {s["id"]: s for s in now}
    return [
        f"{sid} ({(after.get(sid) or before[sid])['layer']})"
        for sid in sorted(set(before) | set(after), key=lambda s: (len(s), s))
        if (before.get(sid) or {}).get("digest") != (after.get(sid) or {}).get("digest")
    ]


async def _snapshot(session: AsyncSession) -> None:
    """Every read of the walk from one snapshot, so a write that commits meanwhile is wholly in or out."""
    if session.get_bind().dialect.name == "postgresql":
        await session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
    else:
        await session.execute(text("BEGIN"))  # the driver opens no transaction for reads; this one holds a snapshot


async def _batches(session: AsyncSession, query: Any, key: Any, size: int = BATCH) -> AsyncIterator[list[Any]]:
    after: Any = None
    while True:
        page = query if after is None else query.where(key > after)
        rows = list((await session.execute(page.order_by(key).limit(size))).all())
        if not rows:
            return
        yield rows
        after = rows[-1][-1]


async def verify(db: Database, tenant: str) -> AuditReport:
    """Walk the tenant's custody log and compare it with the stored turns and results (module docstring)."""
    walk = _Walk(tenant)
    async with db.session() as session:
        await _snapshot(session)
        records = select(CustodyRecordRow, CustodyRecordRow.seq).where(CustodyRecordRow.tenant == tenant)
        async for rows in _batches(session, records, CustodyRecordRow.seq):
            for row, _ in rows:
                walk.record(row)
            session.expunge_all()
        turns = select(StoredTurnRow.turn_id, StoredTurnRow.digest, StoredTurnRow.body, StoredTurnRow.seq).where(
            StoredTurnRow.tenant == tenant
        )
        async for rows in _batches(session, turns, StoredTurnRow.seq, TURN_BATCH):
            for turn_id, digest, body, seq in rows:
                walk.turn(int(seq), str(turn_id), str(digest), str(body))
        results = select(TraceResultRow, TraceResultRow.id).where(TraceResultRow.tenant == tenant)
        async for rows in _batches(session, results, TraceResultRow.id):
            for row, _ in rows:
                walk.result(row)
            session.expunge_all()
    return walk.report()
