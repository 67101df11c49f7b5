"""The model calls of a job, kept with it: what each call sent and got back, size-capped, tenant-scoped.

A job's calls are written as they are sent (``record_calls``: a call ``sending``, with the tokens its request
was counted at, before it leaves; again before each repeated request, and when it ends), and once more, whole,
when the job ends (``keep_calls``, one transaction replacing whatever was written before — so a repeated write
changes nothing). A process killed mid-trace leaves the calls it had sent: at restart
``settle_interrupted`` ends each call still ``sending`` as ``failed_billed`` at its counted (``estimated``)
cost — the provider may have answered it — and the job's billed calls and USD are read from its call log.

Caps: a call's prompt keeps at most ``PROMPT_CAP_CHARS`` characters over all its messages (short messages
whole, the longest cut in the middle with a marker saying how much is missing, and ``prompt_truncated``
set); a reply at most ``REPLY_CAP_CHARS``; an error at most ``ERROR_CAP_CHARS``; a job at most
``MAX_CALLS_KEPT`` calls, the first ones sent (``total`` says how many there were). The calls go with
their turn (``erase_for_turns``, inside ``crud_turns.delete_turns``'s transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from estimator.ledger import CallRecord
from provenance_api.core.observability import redact
from provenance_api.storage.crud_traces import JobRecord
from provenance_api.storage.models import ModelCallRow, TraceJobRow
from provenance_api.storage.session import Database

__all__ = [
    "ERROR_CAP_CHARS",
    "IN_FLIGHT_ERROR",
    "MAX_CALLS_KEPT",
    "PROMPT_CAP_CHARS",
    "REPLY_CAP_CHARS",
    "KeptCall",
    "KeptCalls",
    "calls_of",
    "cap_prompt",
    "erase_for_turns",
    "keep_calls",
    "record_calls",
    "settle_interrupted",
]

PROMPT_CAP_CHARS = 16_384
REPLY_CAP_CHARS = 4_096
ERROR_CAP_CHARS = 1_000
MAX_CALLS_KEPT = 200
IN_FLIGHT_ERROR = "no answer: the trace stopped while this call was in flight"
IN_FLIGHT_BILLED = (
    "no answer recorded: the service stopped while this call was in flight; counted as billed at its "
    "estimated cost (the request's counted tokens and its answer's cap), since the provider may have answered"
)
_MARKER_ROOM = 64  # the cut marker's length, at most


@dataclass(frozen=True)
class KeptCall:
    """One kept call as read back (``index`` is its order sent, from 0)."""

    index: int
    stage: str
    mask: str
    kind: str
    outcome: str
    prompt: list[tuple[str, str]]
    prompt_truncated: bool
    reply: str | None
    parsed: float | None
    started_at: datetime
    seconds: float
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    error: str | None
    attempts: int = 1
    estimated: bool = False


@dataclass(frozen=True)
class KeptCalls:
    """A job's kept calls in the order sent; ``kept`` < ``total`` when the per-job cap dropped some."""

    total: int
    calls: list[KeptCall]

    @property
    def kept(self) -> int:
        return len(self.calls)


def _cut(text: str, limit: int) -> str:
    """``text`` in at most about ``limit`` characters: its head and tail around a marker of what is missing."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - _MARKER_ROOM)
    head, tail = keep - keep // 2, keep // 2
    marker = f"\n[… {len(text) - keep:,} characters not kept …]\n"
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def cap_prompt(messages: Sequence[tuple[str, str]], cap: int = PROMPT_CAP_CHARS) -> tuple[list[tuple[str, str]], bool]:
    """(the messages within ``cap`` characters in all, whether any was cut). Each message gets an even share
    of what the shorter ones leave, so a short system message stays whole and the long one is cut."""
    sizes = [len(content) for _, content in messages]
    if sum(sizes) <= cap:
        return [(role, content) for role, content in messages], False
    allowance = [0] * len(messages)
    left = cap
    for position, i in enumerate(sorted(range(len(messages)), key=sizes.__getitem__)):
        allowance[i] = min(sizes[i], left // (len(messages) - position))
        left -= allowance[i]
    return [(role, _cut(content, allowance[i])) for i, (role, content) in enumerate(messages)], True


def _capped(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit:,} more characters not kept]"


def _cost(record: CallRecord, price: tuple[float, float] | None, *, final: bool = True) -> float | None:
    """What the call cost: $0 unless the provider answered it (cached, refused and unbilled failures cost
    nothing); a billed chat call's tokens (reported, or ``estimated``) at the judge's ``price`` when known (as
    the job's budget is settled), else what the provider reported; a call in flight (``final`` False) at its
    counted tokens; unknown (None) for a failure billed at an unreported price, or a call cut off in flight."""
    usage = record.usage
    counted = usage.input_tokens + usage.output_tokens > 0
    if record.outcome == "answered" or (record.outcome in ("failed_billed", "sending") and counted):
        if record.outcome == "sending" and final:
            return None
        if record.kind == "chat" and price is not None:
            return usage.input_tokens * price[0] + usage.output_tokens * price[1]
        return usage.cost_usd
    if record.outcome in ("failed_billed", "sending"):
        return None
    return 0.0


def _row(
    job: JobRecord, record: CallRecord, total: int, price: tuple[float, float] | None, *, final: bool = True
) -> ModelCallRow:
    prompt, truncated = cap_prompt([(m.role, m.content) for m in record.prompt])
    in_flight = record.outcome == "sending" and final  # the job ended with it in flight
    error = IN_FLIGHT_ERROR if in_flight else record.error
    return ModelCallRow(
        tenant=job.tenant,
        trace_id=job.id,
        turn_id=job.turn_id,
        call_index=record.index,
        trace_calls=total,
        stage=record.stage,
        mask=record.mask[:500],
        kind=record.kind,
        outcome="failed" if in_flight else record.outcome,
        attempts=record.attempts,
        estimated=record.usage.estimated,
        prompt=[list(message) for message in prompt],
        prompt_truncated=truncated,
        reply=_capped(record.reply, REPLY_CAP_CHARS),
        parsed=record.parsed,
        started_at=record.started_at,
        seconds=record.seconds,
        input_tokens=0 if in_flight else record.usage.input_tokens,
        output_tokens=0 if in_flight else record.usage.output_tokens,
        cost_usd=_cost(record, price, final=final),
        error=None if error is None else _capped(redact(error), ERROR_CAP_CHARS),
    )


async def record_calls(
    db: Database, job: JobRecord, records: Sequence[CallRecord], *, price: tuple[float, float] | None = None
) -> None:
    """Write ``records`` of ``job`` as they stand now (a call ``sending`` keeps the tokens it was counted at,
    marked ``estimated``), replacing the same calls' earlier rows, in one transaction; calls past
    ``MAX_CALLS_KEPT`` are not written."""
    rows = [_row(job, r, r.index + 1, price, final=False) for r in records if r.index < MAX_CALLS_KEPT]
    if not rows:
        return
    async with db.transaction() as session:
        await session.execute(
            delete(ModelCallRow).where(
                ModelCallRow.tenant == job.tenant,
                ModelCallRow.trace_id == job.id,
                ModelCallRow.call_index.in_([row.call_index for row in rows]),
            )
        )
        await session.flush()
        session.add_all(rows)


@dataclass(frozen=True)
class SettledCalls:
    """An interrupted job's spend as its call log holds it."""

    billed: int
    failed: int
    usd: float | None  # None when some billed call's cost is unknown


async def settle_interrupted(db: Database, trace_id: str) -> SettledCalls:
    """At restart, for a job its process left unfinished: each call still ``sending`` (in flight when the process
    died) becomes ``failed_billed`` at its counted cost, and the job's billed and failed calls become what its call
    log holds (never fewer than its row recorded). Returns the log's billed calls and USD."""
    async with db.transaction() as session:
        sending = (ModelCallRow.trace_id == trace_id, ModelCallRow.outcome == "sending")
        in_flight = int((await session.execute(select(func.count()).where(*sending))).scalar_one())
        await session.execute(
            update(ModelCallRow)
            .where(*sending)
            .values(outcome="failed_billed", estimated=True, error=IN_FLIGHT_BILLED)
            .execution_options(synchronize_session=False)
        )
        rows = (
            await session.execute(
                select(ModelCallRow.outcome, ModelCallRow.cost_usd).where(ModelCallRow.trace_id == trace_id)
            )
        ).all()
        billed_rows: list[float | None] = [cost for outcome, cost in rows if outcome in ("answered", "failed_billed")]
        usd = None if any(cost is None for cost in billed_rows) else sum(float(cost or 0.0) for cost in billed_rows)
        job = (
            await session.execute(
                select(TraceJobRow.calls_billed, TraceJobRow.calls_failed).where(TraceJobRow.id == trace_id)
            )
        ).one_or_none()
        billed, failed = (0, 0) if job is None else (int(job[0]), int(job[1]))
        billed, failed = max(billed, len(billed_rows)), failed + in_flight
        await session.execute(
            update(TraceJobRow)
            .where(TraceJobRow.id == trace_id)
            .values(calls_billed=billed, calls_failed=failed)
            .execution_options(synchronize_session=False)
        )
    return SettledCalls(billed=billed, failed=failed, usd=usd)


async def keep_calls(
    db: Database,
    job: JobRecord,
    records: Sequence[CallRecord],
    *,
    price: tuple[float, float] | None = None,
    max_kept: int | None = None,
) -> int:
    """Keep ``job``'s calls (the first ``max_kept``, default ``MAX_CALLS_KEPT``, of them in the order sent),
    replacing any kept before, in one transaction; returns how many were kept. ``price``: the judge's USD per
    input and output token, when known."""
    cap = MAX_CALLS_KEPT if max_kept is None else max_kept
    ordered = sorted(records, key=lambda r: r.index)
    rows = [_row(job, record, len(ordered), price) for record in ordered[:cap]]
    async with db.transaction() as session:
        await session.execute(
            delete(ModelCallRow).where(ModelCallRow.tenant == job.tenant, ModelCallRow.trace_id == job.id)
        )
        session.add_all(rows)
    return len(rows)


def _kept(row: ModelCallRow) -> KeptCall:
    prompt: list[Any] = list(row.prompt)
    return KeptCall(
        index=row.call_index,
        stage=row.stage,
        mask=row.mask,
        kind=row.kind,
        outcome=row.outcome,
        prompt=[(str(role), str(content)) for role, content in prompt],
        prompt_truncated=row.prompt_truncated,
        reply=row.reply,
        parsed=row.parsed,
        started_at=row.started_at,
        seconds=row.seconds,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cost_usd=row.cost_usd,
        error=row.error,
        attempts=row.attempts,
        estimated=row.estimated,
    )


async def calls_of(db: Database, tenant: str, trace_id: str) -> KeptCalls:
    """The tenant's kept calls of job ``trace_id`` in the order sent (none for another tenant's job; a running
    job's calls as sent so far, those in flight ``sending``)."""
    query = (
        select(ModelCallRow)
        .where(ModelCallRow.tenant == tenant, ModelCallRow.trace_id == trace_id)
        .order_by(ModelCallRow.call_index)
    )
    async with db.session() as session:
        rows = list((await session.execute(query)).scalars())
    return KeptCalls(total=max((row.trace_calls for row in rows), default=0), calls=[_kept(row) for row in rows])


async def erase_for_turns(session: AsyncSession, tenant: str, turn_ids: list[str]) -> None:
    """Remove the tenant's kept calls of every job of ``turn_ids``, inside the caller's transaction."""
    await session.execute(
        delete(ModelCallRow).where(ModelCallRow.tenant == tenant, ModelCallRow.turn_id.in_(turn_ids)),
        execution_options={"synchronize_session": False},
    )
