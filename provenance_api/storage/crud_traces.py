"""Quotes, trace jobs and their results.

A quote is single-use: starting a trace consumes it in the same transaction that creates the
job. A job moves queued → running → succeeded | failed | interrupted; progress (calls made and
billed, the round, partial layer scores) is written as it happens, so a killed process leaves an
accurate record. A result row is written, with the job's ``succeeded``, in one transaction — a
job that is not ``succeeded`` never has a result to serve.

Deleting a turn and writing a quote or a job of it are serialised on the turn (``hold_turns``): each
transaction takes the turn first — a row lock on PostgreSQL (shared to write a quote or a job,
exclusive to delete), SQLite's one write lock — and reads only after. So a start that commits first
is seen by the delete (which refuses while the job is queued or running), and one that comes after
finds no turn (RecordMissing): no job of a deleted turn is ever created.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import ColumnElement, delete, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from provenance_api.core.schemas import JobStatus
from provenance_api.storage import custody_log
from provenance_api.storage.errors import RecordConflict, RecordExpired, RecordMissing
from provenance_api.storage.models import (
    ERASE_TURN_RESULTS,
    ModelCallRow,
    QuoteRow,
    StoredTurnRow,
    TraceJobRow,
    TraceResultRow,
    utcnow,
)
from provenance_api.storage.quotes import ADDED, StoredQuote
from provenance_api.storage.session import Database

JobKind = Literal["trace", "probe"]
JobSource = Literal["api", "cli"]
_PREFIX: dict[str, str] = {"trace": "tr", "probe": "pr"}
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "interrupted"})


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"


async def hold_turns(
    session: AsyncSession, tenant: str, where: ColumnElement[bool], *, exclusive: bool = False
) -> list[tuple[int, str]]:
    """Lock the tenant's turns matching ``where`` until the caller's transaction ends, as its first statement,
    and return their (seq, turn_id) in storage order. ``exclusive`` (deleting them) waits for, and excludes,
    every transaction holding one of them; a shared hold (writing a quote or a job of one) excludes only a
    delete, which then sees what it wrote. PostgreSQL: ``FOR UPDATE`` / ``FOR KEY SHARE`` row locks, a turn
    deleted while waiting is not returned. SQLite locks the database, not rows: a write (the turns' digest
    set to itself) as the first statement takes its one write lock before anything is read."""
    mine = (StoredTurnRow.tenant == tenant, where)
    if session.get_bind().dialect.name == "sqlite":
        await session.execute(
            update(StoredTurnRow).where(*mine).values(digest=StoredTurnRow.digest),
            execution_options={"synchronize_session": False},
        )
    query = (
        select(StoredTurnRow.seq, StoredTurnRow.turn_id)
        .where(*mine)
        .order_by(StoredTurnRow.seq)
        .with_for_update(read=not exclusive, key_share=not exclusive)
    )
    return [(int(seq), str(turn_id)) for seq, turn_id in (await session.execute(query)).all()]


async def _hold_turn(session: AsyncSession, tenant: str, turn_id: str) -> None:
    """A shared hold on the tenant's turn ``turn_id`` (``hold_turns``); RecordMissing when it is not stored
    (never stored, or deleted — perhaps by the delete this transaction waited for)."""
    if not await hold_turns(session, tenant, StoredTurnRow.turn_id == turn_id):
        raise RecordMissing(f"no stored turn {turn_id!r}", record="turn", field="turn_id")


_QUOTE_COLUMNS = (
    "id",
    "tenant",
    "user",
    "turn_id",
    "sentence",
    "claim",
    "segment_id",
    "model",
    "probe",
    "params",
    "estimator",
    "planned_calls",
    "cost_usd",
    "refused",
    "created_at",
    "expires_at",
    "used_by",
)


def _quote(row: QuoteRow) -> StoredQuote:
    """A stored quote from its row: the columns, and the ``quote`` JSON split into the estimator's quote and
    the service's additions (an ``estimator`` key of a quote stored before migration 0015 is ignored: the
    migration moved it to the column)."""
    document = dict(row.quote)
    added = {key: document[key] for key in ADDED if document.get(key) is not None}
    columns = {name: getattr(row, name) for name in _QUOTE_COLUMNS}
    return StoredQuote.model_validate({**columns, "priced": document, **added})


async def purge_expired_quotes(db: Database, ttl_seconds: int) -> None:
    """Quotes are not kept past their use: one that expired more than a TTL ago is deleted when nobody used
    it, and emptied of its sentence and claim when a job used it (the job keeps the claim it traced). The
    extra TTL keeps a just-expired quote readable, so starting a trace with it says 'expired', not 'unknown'."""
    cutoff = utcnow() - timedelta(seconds=ttl_seconds)
    async with db.transaction() as session:
        await session.execute(delete(QuoteRow).where(QuoteRow.expires_at < cutoff, QuoteRow.used_by.is_(None)))
        await session.execute(
            update(QuoteRow)
            .where(QuoteRow.expires_at < cutoff, QuoteRow.used_by.is_not(None), QuoteRow.claim != "")
            .values(sentence="", claim="")
        )


async def create_quote(db: Database, quote: StoredQuote, ttl_seconds: int) -> StoredQuote:
    """Store ``quote`` (its times from ``quotes.quote_times(ttl_seconds)``), after purging the expired ones."""
    await purge_expired_quotes(db, ttl_seconds)
    columns = {name: getattr(quote, name) for name in _QUOTE_COLUMNS}
    row = QuoteRow(**columns, quote=quote.document())
    async with db.transaction() as session:
        await _hold_turn(session, quote.tenant, quote.turn_id)  # a turn being deleted gets no new quote
        session.add(row)
    return _quote(row)


async def get_quote(db: Database, tenant: str, quote_id: str) -> StoredQuote:
    async with db.session() as session:
        row = (
            await session.execute(select(QuoteRow).where(QuoteRow.id == quote_id, QuoteRow.tenant == tenant))
        ).scalar_one_or_none()
    if row is None:
        raise RecordMissing(f"no quote {quote_id!r}", record="quote", field="quote_id")
    return _quote(row)


@dataclass(frozen=True)
class JobRecord:
    id: str
    tenant: str
    user: str
    turn_id: str
    quote_id: str
    claim: str
    segment_id: str | None
    model: str
    params: dict[str, Any]
    status: JobStatus
    reason: str | None
    calls_planned: int
    calls_made: int
    calls_billed: int
    round: str | None
    message: str | None
    layer_scores: dict[str, Any]
    quoted_cost_usd: float | None
    max_cost_usd: float | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result: dict[str, Any] | None = field(default=None)
    kind: JobKind = "trace"
    source_id: str | None = None
    calls_cached: int = 0  # answered from the judgement cache: not sent, not billed
    calls_failed: int = 0  # sent, and failed
    source: JobSource = "api"  # 'cli': a trace ``provenance trace`` ran and stored

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def _job(row: TraceJobRow, result: dict[str, Any] | None = None) -> JobRecord:
    status: Any = row.status
    return JobRecord(
        id=row.id,
        tenant=row.tenant,
        user=row.user,
        turn_id=row.turn_id,
        quote_id=row.quote_id,
        claim=row.claim,
        segment_id=row.segment_id,
        model=row.model,
        params=dict(row.params),
        status=status,
        reason=row.reason,
        calls_planned=row.calls_planned,
        calls_made=row.calls_made,
        calls_billed=row.calls_billed,
        round=row.round,
        message=row.message,
        layer_scores=dict(row.layer_scores),
        quoted_cost_usd=row.quoted_cost_usd,
        max_cost_usd=row.max_cost_usd,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        result=result,
        kind="probe" if row.kind == "probe" else "trace",
        source_id=row.source_id,
        calls_cached=row.calls_cached,
        calls_failed=row.calls_failed,
        source="cli" if row.source == "cli" else "api",
    )


async def create_job(
    db: Database,
    quote: StoredQuote,
    *,
    max_cost_usd: float | None,
    kind: JobKind = "trace",
    source_id: str | None = None,
    reservation: dict[str, Any] | None = None,
    source: JobSource = "api",
) -> JobRecord:
    """Consume ``quote`` and create its job (a trace, or a probe of ``source_id``), atomically, keeping the
    budget ``reservation`` it holds (settled at startup if the job is found interrupted). RecordMissing
    (record ``turn``) when the quote's turn is no longer stored — deleted, perhaps while this waited for the
    delete to commit; RecordConflict if the quote was already used. ``source``: ``cli`` for a trace the
    command line ran (and records here)."""
    now = utcnow()
    if quote.expires_at <= now:
        raise RecordExpired(
            f"quote {quote.id!r} expired at {quote.expires_at.isoformat()}", record="quote", field="quote_id"
        )
    job_id = new_id(_PREFIX[kind])
    async with db.transaction() as session:
        await _hold_turn(session, quote.tenant, quote.turn_id)  # serialised with deleting the turn
        taken = await session.execute(
            update(QuoteRow)
            .where(QuoteRow.id == quote.id, QuoteRow.tenant == quote.tenant, QuoteRow.used_by.is_(None))
            .values(used_by=job_id)
        )
        if getattr(taken, "rowcount", 0) != 1:
            raise RecordConflict(
                f"quote {quote.id!r} was already used to start a trace", record="quote", field="quote_id"
            )
        row = TraceJobRow(
            id=job_id,
            kind=kind,
            source_id=source_id,
            tenant=quote.tenant,
            user=quote.user,
            turn_id=quote.turn_id,
            quote_id=quote.id,
            claim=quote.claim,
            segment_id=quote.segment_id,
            model=quote.model,
            params=quote.params,
            status="queued",
            reason=None,
            calls_planned=quote.planned_calls,
            calls_made=0,
            calls_billed=0,
            calls_cached=0,
            calls_failed=0,
            source=source,
            round=None,
            message=None,
            layer_scores={},
            quoted_cost_usd=quote.cost_usd,
            max_cost_usd=max_cost_usd,
            reservation=reservation,
            created_at=now,
            started_at=None,
            finished_at=None,
            updated_at=now,
        )
        session.add(row)
    return _job(row)


async def get_job(db: Database, tenant: str | None, job_id: str, kind: JobKind | None = None) -> JobRecord:
    """The job (scoped to ``tenant`` unless None, for the runner, and to ``kind`` when given), with
    its result when it succeeded."""
    query = select(TraceJobRow).where(TraceJobRow.id == job_id)
    if tenant is not None:
        query = query.where(TraceJobRow.tenant == tenant)
    if kind is not None:
        query = query.where(TraceJobRow.kind == kind)
    async with db.session() as session:
        row = (await session.execute(query)).scalar_one_or_none()
        if row is None:
            what = kind or "trace"
            raise RecordMissing(f"no {what} {job_id!r}", record=what, field=f"{what}_id")
        result: dict[str, Any] | None = None
        if row.status == "succeeded":
            result = (
                await session.execute(select(TraceResultRow.result).where(TraceResultRow.job_id == job_id))
            ).scalar_one()
    return _job(row, result)


async def mark_running(db: Database, job_id: str) -> bool:
    now = utcnow()
    async with db.transaction() as session:
        done = await session.execute(
            update(TraceJobRow)
            .where(TraceJobRow.id == job_id, TraceJobRow.status == "queued")
            .values(status="running", started_at=now, updated_at=now)
        )
    return getattr(done, "rowcount", 0) == 1


@dataclass(frozen=True)
class Progress:
    calls_made: int
    calls_billed: int
    round: str | None = None
    message: str | None = None
    layer_scores: dict[str, Any] = field(default_factory=dict)
    calls_cached: int = 0
    calls_failed: int = 0

    def counts(self) -> dict[str, int]:
        """The job row's call counts, as one set (made, billed, cached, failed)."""
        return {
            "calls_made": self.calls_made,
            "calls_billed": self.calls_billed,
            "calls_cached": self.calls_cached,
            "calls_failed": self.calls_failed,
        }


async def record_progress(db: Database, job_id: str, progress: Progress) -> bool:
    """Write a running job's progress. False when the job is gone — deleted with its turn — so its runner
    stops before any further model call (a job no longer ``running`` but still stored is True: unchanged)."""
    async with db.transaction() as session:
        done = await session.execute(
            update(TraceJobRow)
            .where(TraceJobRow.id == job_id, TraceJobRow.status == "running")
            .values(
                **progress.counts(),
                round=progress.round,
                message=progress.message,
                layer_scores=progress.layer_scores,
                updated_at=utcnow(),
            )
        )
        if getattr(done, "rowcount", 0) == 1:
            return True
        return (await session.execute(select(TraceJobRow.id).where(TraceJobRow.id == job_id))).first() is not None


@dataclass(frozen=True)
class ResultAudit:
    """Everything the audit record keeps about one finished trace."""

    turn_digest: str
    claim_digest: str
    query_digest: str
    corpus_digest: str
    prompt_versions: dict[str, Any]
    params: dict[str, Any]
    model: str
    result: dict[str, Any]
    calls_planned: int
    calls_made: int
    calls_billed: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


async def finish_succeeded(db: Database, job: JobRecord, audit: ResultAudit, progress: Progress) -> None:
    """Append the result and mark the job succeeded, in one transaction. RecordMissing, and nothing written,
    when the job or its turn is no longer stored (deleted with its turn): a deleted turn gets no result."""
    now = utcnow()
    async with db.transaction() as session:
        await _hold_turn(session, job.tenant, job.turn_id)
        marked = await session.execute(
            update(TraceJobRow)
            .where(TraceJobRow.id == job.id)
            .values(
                status="succeeded",
                reason=None,
                **progress.counts(),
                round=progress.round,
                message=progress.message,
                layer_scores=progress.layer_scores,
                finished_at=now,
                updated_at=now,
            )
        )
        if getattr(marked, "rowcount", 0) != 1:
            raise RecordMissing(f"no {job.kind} {job.id!r}", record=job.kind, field=f"{job.kind}_id")
        stored = TraceResultRow(
            job_id=job.id,
            tenant=job.tenant,
            user=job.user,
            turn_id=job.turn_id,
            created_at=now,
            **audit.__dict__,
        )
        session.add(stored)
        await session.flush()
        await custody_log.append(session, job.tenant, [custody_log.result_entry(stored)])  # chained with it


async def forget_calls_if_deleted(db: Database, tenant: str, job_id: str) -> int:
    """Remove the model-call rows of job ``job_id`` if the job itself is no longer stored (deleted with its
    turn while its runner still wrote): what a deleted turn's job wrote late is not kept. How many went."""
    async with db.transaction() as session:
        gone = await session.execute(
            delete(ModelCallRow).where(
                ModelCallRow.tenant == tenant,
                ModelCallRow.trace_id == job_id,
                ~exists().where(TraceJobRow.id == job_id),
            ),
            execution_options={"synchronize_session": False},
        )
    return int(getattr(gone, "rowcount", 0) or 0)


async def finish_unsuccessful(
    db: Database, job_id: str, status: Literal["failed", "interrupted"], reason: str, progress: Progress
) -> None:
    now = utcnow()
    async with db.transaction() as session:
        await session.execute(
            update(TraceJobRow)
            .where(TraceJobRow.id == job_id, TraceJobRow.status.in_(("queued", "running")))
            .values(
                status=status,
                reason=reason,
                **progress.counts(),
                round=progress.round,
                message=progress.message,
                finished_at=now,
                updated_at=now,
            )
        )


@dataclass(frozen=True)
class Unfinished:
    """A job a dead process left queued or running: its calls made and the reservation it held."""

    id: str
    calls_made: int
    reservation: dict[str, Any] | None


async def interrupt_unfinished(db: Database, reason: str) -> list[Unfinished]:
    """Mark every queued or running job interrupted (at startup: their process is gone). Their calls
    made and billed stay as last recorded."""
    now = utcnow()
    async with db.transaction() as session:
        found = [
            Unfinished(job_id, int(made), reservation)
            for job_id, made, reservation in (
                await session.execute(
                    select(TraceJobRow.id, TraceJobRow.calls_made, TraceJobRow.reservation).where(
                        TraceJobRow.status.in_(("queued", "running"))
                    )
                )
            ).all()
        ]
        ids = [job.id for job in found]
        if ids:
            await session.execute(
                update(TraceJobRow)
                .where(TraceJobRow.id.in_(ids))
                .values(status="interrupted", reason=reason, finished_at=now, updated_at=now)
            )
    return found


async def trace_ids_of_turn(db: Database, tenant: str, turn_id: str, limit: int) -> list[str]:
    """The ids of the tenant's traces of ``turn_id``, newest first."""
    query = (
        select(TraceJobRow.id)
        .where(TraceJobRow.tenant == tenant, TraceJobRow.turn_id == turn_id, TraceJobRow.kind == "trace")
        .order_by(TraceJobRow.created_at.desc(), TraceJobRow.id)
        .limit(limit)
    )
    async with db.session() as session:
        return list((await session.execute(query)).scalars())


async def recent_jobs(
    db: Database, tenant: str, *, source: JobSource | None, limit: int, kind: JobKind = "trace"
) -> list[JobRecord]:
    """The tenant's jobs of ``kind`` (those ``source`` ran, when given), newest first, each with its result
    when it succeeded (``provenance traces``)."""
    query = (
        select(TraceJobRow, TraceResultRow.result)
        .outerjoin(TraceResultRow, TraceResultRow.job_id == TraceJobRow.id)
        .where(TraceJobRow.tenant == tenant, TraceJobRow.kind == kind)
        .order_by(TraceJobRow.created_at.desc(), TraceJobRow.id.desc())
        .limit(limit)
    )
    if source is not None:
        query = query.where(TraceJobRow.source == source)
    async with db.session() as session:
        rows = (await session.execute(query)).all()
    return [_job(row, result if row.status == "succeeded" else None) for row, result in rows]


async def running_jobs(db: Database) -> list[tuple[str, int, int]]:
    """(id, calls made, calls billed) of every job marked running, in any tenant (for the queue's reaper). A job
    the command line runs holds no lease and is not the queue's: it is left out."""
    async with db.session() as session:
        rows = await session.execute(
            select(TraceJobRow.id, TraceJobRow.calls_made, TraceJobRow.calls_billed).where(
                TraceJobRow.status == "running", TraceJobRow.source == "api"
            )
        )
        return [(job_id, int(made), int(billed)) for job_id, made, billed in rows.all()]


async def requeue_unbilled(db: Database, job_id: str) -> bool:
    """Put a running job that billed nothing back in the queue's state; False if it moved on meanwhile."""
    async with db.transaction() as session:
        moved = await session.execute(
            update(TraceJobRow)
            .where(TraceJobRow.id == job_id, TraceJobRow.status == "running", TraceJobRow.calls_billed == 0)
            .values(status="queued", started_at=None, calls_made=0, calls_cached=0, calls_failed=0, updated_at=utcnow())
        )
    return getattr(moved, "rowcount", 0) == 1


async def interrupt_running(db: Database, job_id: str, reason: str) -> bool:
    """Mark a running job interrupted with ``reason``; False if it was no longer running."""
    now = utcnow()
    async with db.transaction() as session:
        done = await session.execute(
            update(TraceJobRow)
            .where(TraceJobRow.id == job_id, TraceJobRow.status == "running")
            .values(status="interrupted", reason=reason, finished_at=now, updated_at=now)
        )
    return getattr(done, "rowcount", 0) == 1


async def erase_for_turns(session: AsyncSession, tenant: str, turn_ids: list[str]) -> tuple[int, int, int]:
    """Remove the tenant's quotes, jobs (traces and probes) and trace results of ``turn_ids`` inside the
    caller's transaction (deleting those turns): (quotes, jobs, results) removed. The results' delete is the one
    statement the append-only guard lets through. RecordConflict naming the job while one is queued or running."""
    busy = (
        await session.execute(
            select(TraceJobRow.id, TraceJobRow.kind, TraceJobRow.status, TraceJobRow.turn_id)
            .where(
                TraceJobRow.tenant == tenant,
                TraceJobRow.turn_id.in_(turn_ids),
                TraceJobRow.status.in_(("queued", "running")),
            )
            .order_by(TraceJobRow.created_at)
            .limit(1)
        )
    ).first()
    if busy is not None:
        job_id, kind, state, turn_id = busy
        raise RecordConflict(
            f"{kind} {job_id} of turn {turn_id!r} is {state}: a turn is not deleted while it is being traced",
            record=str(kind),
            field="turn_id",
            extra={"job_id": job_id, "job_status": state, "turn_id": turn_id},
        )
    job_ids = list(
        (
            await session.execute(
                select(TraceJobRow.id).where(TraceJobRow.tenant == tenant, TraceJobRow.turn_id.in_(turn_ids))
            )
        ).scalars()
    )
    results = 0
    if job_ids:
        results = int(
            (
                await session.execute(
                    select(func.count()).select_from(TraceResultRow).where(TraceResultRow.job_id.in_(job_ids))
                )
            ).scalar_one()
        )
        await session.execute(
            delete(TraceResultRow).where(TraceResultRow.job_id.in_(job_ids)),
            execution_options={ERASE_TURN_RESULTS: True, "synchronize_session": False},
        )
        await session.execute(
            delete(TraceJobRow).where(TraceJobRow.id.in_(job_ids)), execution_options={"synchronize_session": False}
        )
    quotes = int(
        (
            await session.execute(
                select(func.count())
                .select_from(QuoteRow)
                .where(QuoteRow.tenant == tenant, QuoteRow.turn_id.in_(turn_ids))
            )
        ).scalar_one()
    )
    await session.execute(
        delete(QuoteRow).where(QuoteRow.tenant == tenant, QuoteRow.turn_id.in_(turn_ids)),
        execution_options={"synchronize_session": False},
    )
    return quotes, len(job_ids), results
