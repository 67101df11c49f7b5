"""Jobs: the runner protocol, the in-process runner, and one job's execution — a trace (with its
declared-attribution audit) or a probe, chosen by the job's ``kind``.

A trace runs as a job. Every model call — judge, span check, scorer, probe — goes through the
trace's one ``CallLedger`` (the estimator's meter: its only counter and concurrency cap, priced at the
judge's price), whose hook writes the call (``crud_calls.record_calls``) and the counts to the job's row
before each HTTP request leaves (retries included) and *before* the estimator sees the answer — so a
process killed mid-run leaves a record of exactly what was sent, and the budget is settled from the
same count.
Progress events (round, the latest message, partial layer scores) are kept live for the event
stream and written with the next call. On startup, jobs left ``queued``/``running`` by a dead
process become ``interrupted``, settled from their call log: a call in flight when the process died
counts as billed at its counted cost (``crud_calls.settle_interrupted``). Only a finished trace writes a
result; a failed or interrupted job never has one. A trace that measured nothing ends ``failed`` by the one rule
every estimator shares (``estimator.trace_failure``; the scorer's calls are counted by its ``ScoringTally``), its
reason the cause and the setting to fix (``failed_reason``).

``JobRunner`` is the protocol; ``InProcessJobRunner`` runs jobs as tasks of the service's event
loop, at most ``max_running`` at once (a distributed runner can stand behind the same protocol).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import anyio

from estimator.actions.trace import trace_action
from estimator.audit.declared import audit_trace
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.cost import Pricing, request_tokens
from estimator.custody.freshness import FreshnessPolicy
from estimator.ledger import CallEvent, CallLedger
from estimator.loo.logprob_cost import EstimatorChoice
from estimator.params import Params
from estimator.probe import probe_source
from estimator.results.models import DeclaredAuditModel, ProbeResultModel, TraceJobResult
from estimator.results.trace import ProgressEvent
from estimator.seams.llm import LLM, LLMRequest, Usage
from estimator.seams.scorer import Scorer
from estimator.trace import TraceOutcome, needs_scorer, run_trace
from estimator.trace_failure import ScoringTally, TraceFailure, failed_trace
from provenance_api.core.errors import ProvenanceError, ProviderError
from provenance_api.core.observability import Metrics, log_fields, redact, trace_id_var
from provenance_api.core.settings import OtlpTarget
from provenance_api.providers import free_tier
from provenance_api.providers.llm_cache import CachingLLM
from provenance_api.storage import crud_calls, crud_traces, crud_turns
from provenance_api.storage.crud_traces import JobRecord, Progress
from provenance_api.storage.limits import Limiter, Reservation
from provenance_api.storage.session import Database

log = logging.getLogger("provenance_api.jobs.runner")

LLMFactory = Callable[[str, str | None], LLM]
ScorerFactory = Callable[[str], Scorer]  # judge model → its scorer (estimator logprob / both)
INTERRUPTED_ON_START = "the service stopped while this trace was queued or running; calls already billed are kept"
INTERRUPTED_ON_STOP = "the service shut down while this trace was running; calls already billed are kept"
TURN_DELETED = "the trace's turn was deleted while it ran: it stopped, and nothing of it is kept"


class JobRunner(Protocol):
    def submit(self, job_id: str, work: Callable[[], Awaitable[None]]) -> None: ...

    async def enqueue(self, job_id: str, reservation: Reservation, work: Callable[[], Awaitable[None]]) -> None:
        """Hand a created job over: run ``work`` here, or queue the job for a worker process
        (``job_queue.ArqJobRunner``), which settles ``reservation`` when it ends."""
        ...

    async def stop(self) -> None: ...


class InProcessJobRunner:
    """Jobs as asyncio tasks, ``max_running`` at a time; the rest wait as ``queued``."""

    def __init__(self, max_running: int) -> None:
        self._slots = asyncio.Semaphore(max_running)
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def submit(self, job_id: str, work: Callable[[], Awaitable[None]]) -> None:
        async def run() -> None:
            async with self._slots:
                await work()

        task = asyncio.get_running_loop().create_task(run(), name=f"trace {job_id}")
        self._tasks[job_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(job_id, None))

    async def enqueue(self, job_id: str, reservation: Reservation, work: Callable[[], Awaitable[None]]) -> None:
        self.submit(job_id, work)

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class ProgressHub:
    """Live progress of the jobs running in this process, and wake-ups for their event streams."""

    def __init__(self) -> None:
        self.live: dict[str, Progress] = {}
        self._events: dict[str, asyncio.Event] = {}

    def publish(self, job_id: str, progress: Progress | None) -> None:
        if progress is None:
            self.live.pop(job_id, None)
        else:
            self.live[job_id] = progress
        event = self._events.pop(job_id, None)
        if event is not None:
            event.set()

    async def wait(self, job_id: str, timeout: float) -> None:
        event = self._events.setdefault(job_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)


@dataclass
class _Meter:
    """The job's ledger (once created) and its latest progress snapshot."""

    ledger: CallLedger | None = None
    progress: Progress = field(default_factory=lambda: Progress(0, 0))
    price: tuple[float, float] | None = None  # the judge's USD per input / output token, when known
    job: JobRecord | None = None  # the job, once read (its model calls are kept with it when it ends)

    @property
    def made(self) -> int:
        return self.ledger.made if self.ledger is not None else 0

    @property
    def billed(self) -> int:
        return self.ledger.billed if self.ledger is not None else 0

    def snapshot(self) -> Progress:
        """The latest progress with the ledger's counts: made, billed, cached and failed, as the result reports them."""
        ledger = self.ledger
        if ledger is None:
            return replace(self.progress, calls_made=0, calls_billed=0)
        return replace(
            self.progress,
            calls_made=ledger.made,
            calls_billed=ledger.billed,
            calls_cached=ledger.cached,
            calls_failed=ledger.failed,
        )

    def billed_usd(self, reservation: Reservation) -> float | None:
        """What the job's billed calls cost — the ledger's cost, which is the result's: the tokens (reported, or
        counted when the provider reported none) at the judge's price (the operator's, else litellm's map), plus —
        for billed calls whose tokens are unknown — the quote's price per call; the provider-reported cost when
        the judge has no price; None when unknown."""
        ledger = self.ledger
        if ledger is None or ledger.billed == 0:
            return 0.0
        per_call = reservation.cost_usd / reservation.calls if reservation.calls else 0.0
        if self.price is not None:
            return ledger.known_cost_usd + ledger.unpriced_billed * per_call
        return ledger.cost_usd


NO_FRESHNESS_RULES = FreshnessPolicy()


@dataclass(frozen=True)
class TraceContext:
    """What a trace job needs from the service."""

    db: Database
    limiter: Limiter
    metrics: Metrics
    hub: ProgressHub
    llm_factory: LLMFactory
    api_base: str | None
    scorer_factory: ScorerFactory | None = None
    pricing: Pricing | None = None  # the judge's price, for settling the money budget at the billed cost
    otlp: OtlpTarget | None = None  # where a finished job's OpenTelemetry spans go (jobs.trace_spans); None: nowhere
    freshness: FreshnessPolicy = NO_FRESHNESS_RULES  # the operator's freshness rules, checked on a traced action


SCORER_FIX = (
    "use estimator judged, or have the operator point PROVENANCE_SCORER_API_BASE at a server whose "
    "/v1/completions echoes log-probabilities (llama.cpp's server, vLLM), or run serve --local-model"
)
JUDGE_FIXES = {
    "key": "the judge's provider refused the operator's key: the operator sets PROVENANCE_JUDGE_API_KEY (or the "
    "provider's variable)",
    "endpoint": "the judge's provider did not answer: retry later, or have the operator check "
    "PROVENANCE_JUDGE_API_BASE (or the provider's variable)",
}
JUDGE_FIX = "retry later, or choose another model; the error above is the provider's own"
UNVALUED_FIX = (
    "choose a judge model whose server returns what the estimator reads (top log-probabilities under expected: "
    "OpenAI-compatible chat with logprobs), or use estimator judged"
)


def failed_reason(failure: TraceFailure) -> str:
    """A failed trace's reason as a tenant reads it: the cause (scrubbed of secrets, the last error shortened)
    and the setting to fix, by whose calls failed — the scorer's, or the judge's by its error's type."""
    fixes: list[str] = []
    if failure.scorer:
        fixes.append(SCORER_FIX)
    if failure.unvalued:
        fixes.append(UNVALUED_FIX)
    elif failure.judge or not failure.scorer:
        setting = failure.error.setting if isinstance(failure.error, ProviderError) else None
        fixes.append(JUDGE_FIXES.get(setting or "", JUDGE_FIX))
    fix = " — fix: " + "; ".join(fixes)
    return redact(failure.reason)[: 800 - len(fix)] + fix


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def run_trace_job(ctx: TraceContext, job_id: str, reservation: Reservation) -> None:
    """Run one queued trace job to a terminal state, then settle its reservation: the calls made and the
    USD billed (whatever the outcome)."""
    trace_id_var.set(job_id)
    meter = _Meter()
    outcome = "failed"
    if not await crud_traces.mark_running(ctx.db, job_id):
        # not queued any more: another delivery runs it, or it already ended — its reservation is theirs
        log_fields(log, logging.WARNING, "trace not started: the job is no longer queued")
        return
    try:
        ctx.metrics.traces_running.inc()
        log_fields(log, logging.INFO, "trace started", calls_reserved=reservation.calls)
        try:
            job = await crud_traces.get_job(ctx.db, None, job_id)
            outcome = await _execute(ctx, job, meter)
        finally:
            ctx.metrics.traces_running.dec()
    except asyncio.CancelledError:
        outcome = "interrupted"
        with anyio.CancelScope(shield=True):
            await _finish_unsuccessful(ctx, job_id, meter, "interrupted", INTERRUPTED_ON_STOP)
        raise
    except Exception as exc:
        reason = exc.detail if isinstance(exc, ProvenanceError) else f"internal error ({type(exc).__name__})"
        log_fields(log, logging.ERROR, "trace job failed", error=type(exc).__name__)
        with anyio.CancelScope(shield=True):
            await _finish_unsuccessful(ctx, job_id, meter, "failed", reason)
    finally:
        ctx.metrics.traces.labels(outcome).inc()
        used = meter.made
        billed_usd = meter.billed_usd(reservation)
        with anyio.CancelScope(shield=True):
            await ctx.limiter.settle(reservation, used, billed_usd)
        ctx.hub.publish(job_id, None)
        if meter.job is not None:  # a job deleted with its turn while it ran keeps none of the calls it wrote
            with anyio.CancelScope(shield=True):
                try:
                    await crud_traces.forget_calls_if_deleted(ctx.db, meter.job.tenant, job_id)
                except Exception as exc:
                    log_fields(log, logging.WARNING, "a deleted trace's calls stay", error=type(exc).__name__)
        log_fields(
            log,
            logging.INFO,
            f"trace {outcome}",
            outcome=outcome,
            calls_made=used,
            calls_reserved=reservation.calls,
            usd_billed=billed_usd,
            usd_reserved=reservation.cost_usd,
        )
        if ctx.otlp is not None:  # the exporter is imported only when an endpoint is configured
            from provenance_api.jobs.trace_spans import export_finished_job

            await export_finished_job(
                ctx.db, ctx.otlp, job_id, meter.ledger.calls() if meter.ledger else [], billed_usd
            )


async def _finish_unsuccessful(ctx: TraceContext, job_id: str, meter: _Meter, status: Any, reason: str) -> None:
    await _keep_calls(ctx, meter)
    await crud_traces.finish_unsuccessful(ctx.db, job_id, status, reason, meter.snapshot())


async def _keep_calls(ctx: TraceContext, meter: _Meter) -> None:
    """Keep the job's model calls (``crud_calls``) before its end is written, so a reader who sees the end
    finds them; whatever the outcome, a failed trace's calls are the evidence of why. Keeping them never
    fails the job: a write that fails is logged."""
    if meter.ledger is None or meter.job is None:
        return
    try:
        await crud_calls.keep_calls(ctx.db, meter.job, meter.ledger.calls(), price=meter.price)
    except Exception as exc:
        log_fields(log, logging.WARNING, "the trace's model calls were not kept", error=type(exc).__name__)


async def _execute(ctx: TraceContext, job: JobRecord, meter: _Meter) -> str:
    record = await crud_turns.get_turn(ctx.db, job.tenant, job.turn_id)
    params = Params.stored(job.params)
    corpus = await anyio.to_thread.run_sync(free_tier.corpus_for, record.turn, params)
    query = record.turn.effective_query()
    write_lock = anyio.Lock()
    events = written = 0  # ledger events seen; of them, how many the job row already holds
    pending: dict[int, Any] = {}  # calls changed since the last write (index → record)
    counted: dict[str, int] = {"answered": 0, "failed": 0, "failed_billed": 0}  # what the metrics hold
    price = ctx.pricing.price(job.model) if ctx.pricing is not None else None
    tok = free_tier.tokenizer()

    def sent_estimate(record: Any) -> Any:
        """A call in flight, with the tokens its request was counted at and its answer's cap: what it costs if
        the provider answers and the process dies before hearing it."""
        if record.kind != "chat":
            return record
        counted_in = request_tokens(LLMRequest(messages=record.messages), tok)
        return replace(
            record, usage=Usage(input_tokens=counted_in, output_tokens=record.max_tokens or 0, estimated=True)
        )

    async def on_call(ledger: CallLedger, event: CallEvent) -> None:
        """The ledger's hook: metrics, then the counts persisted before the estimator sees the answer.

        Writes are group-committed: calls that end (or leave) together queue on the lock, and the first
        of them to get it writes the latest counts, which hold every event seen so far; the others find
        their event already written and return without a write. Each call still returns only once a
        committed write holds it, with one write per batch instead of one per call on the trace's path."""
        nonlocal events, written
        if event.outcome == "cached":  # answered by the judgement cache: not a model call, not billed
            ctx.metrics.cache_hits.labels("judgement").inc()
        now = {
            "answered": ledger.billed - ledger.failed_billed,
            "failed": ledger.failed - ledger.failed_billed,  # every failed HTTP request, retried ones included
            "failed_billed": ledger.failed_billed,
        }
        for outcome, value in now.items():
            if value > counted[outcome]:
                ctx.metrics.model_calls.labels(outcome).inc(value - counted[outcome])
                counted[outcome] = value
        if event.outcome in ("answered", "failed_billed"):
            ctx.metrics.observe_usage(event.usage, cached=False)
        if event.record is not None and event.outcome != "refused":
            record = event.record
            pending[record.index] = sent_estimate(record) if record.outcome == "sending" else record
        meter.progress = meter.snapshot()
        ctx.hub.publish(job.id, meter.progress)
        events += 1
        mine = events
        async with write_lock:
            if written >= mine:  # a write that began after this event committed it
                return
            covered = events
            calls = list(pending.values())
            pending.clear()
            try:  # the calls first: the log never holds less than the counts
                await crud_calls.record_calls(ctx.db, job, calls, price=price)
            except Exception as exc:
                log_fields(log, logging.WARNING, "a model call was not recorded", error=type(exc).__name__)
            if not await crud_traces.record_progress(ctx.db, job.id, meter.progress):
                raise ProvenanceError(TURN_DELETED)  # deleted with its turn: no further call is sent
            written = covered

    ledger = CallLedger(planned=job.calls_planned, concurrency=params.concurrency, on_call=on_call, price=price)
    meter.ledger = ledger
    meter.job = job
    meter.price = price

    def on_progress(event: ProgressEvent) -> None:
        meter.progress = Progress(
            calls_made=ledger.made,
            calls_billed=ledger.billed,
            round=event.round,
            message=event.message,
            layer_scores=dict(event.layer_scores),
            calls_cached=ledger.cached,
            calls_failed=ledger.failed,
        )
        ctx.hub.publish(job.id, meter.progress)

    estimator: EstimatorChoice = "judged"
    scorer = None
    if job.kind == "trace":
        estimator = (await crud_traces.get_quote(ctx.db, job.tenant, job.quote_id)).estimator
        if needs_scorer(estimator):
            if ctx.scorer_factory is None:
                raise ProvenanceError(f"estimator {estimator!r} needs a scorer and this service has none")
            scorer = ScoringTally(ctx.scorer_factory(job.model))  # what its calls gave: the failure rule reads it
    llm = ctx.llm_factory(job.model, ctx.api_base)
    if isinstance(llm, CachingLLM):  # cached judgements answer this tenant only (unless the operator shares them)
        llm = llm.for_tenant(job.tenant, job.turn_id)
    work = _KINDS[job.kind]
    done = await work(
        _Run(job, llm, ledger, corpus, query, params, on_progress, estimator, scorer, record.turn, ctx.freshness)
    )
    final = meter.snapshot()
    await _keep_calls(ctx, meter)
    failure = failed_trace(ledger, scorer)  # the one rule (every estimator): a trace that measured nothing failed
    if failure is not None:
        await crud_traces.finish_unsuccessful(ctx.db, job.id, "failed", failed_reason(failure), final)
        return "failed"
    ctx.metrics.cache_hits.labels("memo").inc(ledger.saved)
    audit = crud_traces.ResultAudit(
        turn_digest=record.digest,
        claim_digest=_digest(job.claim),
        query_digest=_digest(query),
        corpus_digest=corpus.digest,
        prompt_versions=done.prompt_versions,
        params=done.params,
        model=llm.model,
        result=done.result.model_dump(mode="json"),
        calls_planned=job.calls_planned,
        calls_made=ledger.made,
        calls_billed=ledger.billed,
        input_tokens=done.usage.input_tokens,
        output_tokens=done.usage.output_tokens,
        cost_usd=done.cost_usd,
    )
    await crud_traces.finish_succeeded(ctx.db, job, audit, final)
    return "succeeded"


@dataclass(frozen=True)
class _Run:
    """What one kind of job is given: the job, the judge, the trace's ledger, the turn's corpus and query."""

    job: JobRecord
    llm: LLM
    ledger: CallLedger
    corpus: Corpus
    query: str
    params: Params
    on_progress: Callable[[ProgressEvent], None]
    estimator: EstimatorChoice = "judged"
    scorer: Scorer | None = None
    turn: StoredTurn | None = None
    freshness: FreshnessPolicy = NO_FRESHNESS_RULES


@dataclass(frozen=True)
class _Done:
    """What one kind of job produced: the typed result (stored as its ``model_dump``) and its audit fields."""

    result: TraceJobResult | ProbeResultModel
    prompt_versions: dict[str, Any]
    params: dict[str, Any]
    usage: Usage
    cost_usd: float | None
    saved: int = 0


async def _trace(run: _Run) -> _Done:
    """A trace (``estimator.trace.run_trace`` for the quote's estimator), with the declared-attribution
    audit of the sentence attached as ``declared``; of an action (its id, a0, a1, …, as the quote's segment),
    ``estimator.actions.trace.trace_action`` over what the agent had seen when it made the call."""
    action = run.job.segment_id if run.job.segment_id and free_tier.ACTION_ID.fullmatch(run.job.segment_id) else None
    if action is not None and run.turn is not None:
        outcome = await trace_action(
            run.estimator,
            run.turn,
            run.corpus,
            action,
            llm=run.llm,
            scorer=run.scorer,
            params=run.params,
            tokenizer=free_tier.tokenizer(),
            on_progress=run.on_progress,
            ledger=run.ledger,
        )
        outcome = free_tier.with_freshness(outcome, run.turn, run.corpus, action, run.freshness)
        return _done(run, outcome, declared=None)
    outcome = await run_trace(
        run.estimator,
        run.job.claim,
        run.query,
        run.corpus,
        llm=run.llm,
        scorer=run.scorer,
        params=run.params,
        tokenizer=free_tier.tokenizer(),
        on_progress=run.on_progress,
        ledger=run.ledger,
    )
    return _done(run, outcome, declared=audit_trace(run.job.claim, run.corpus, outcome.result))


def _done(run: _Run, outcome: TraceOutcome, *, declared: DeclaredAuditModel | None) -> _Done:
    result = outcome.result
    out = outcome.to_model(declared=declared)
    return _Done(
        out,
        dict(result.prompt_versions),
        dict(result.params),
        run.ledger.usage,
        run.ledger.cost_usd,
        result.calls.saved,
    )


async def _probe(run: _Run) -> _Done:
    """Algorithm 6 on ``job.source_id``: sampled regenerations, never memoised or cached."""
    assert run.job.source_id is not None
    run.on_progress(
        ProgressEvent(0, run.job.calls_planned, "probe", f"regenerating with and without {run.job.source_id}")
    )
    result = await probe_source(
        run.llm,
        run.job.claim,
        run.query,
        run.corpus,
        run.job.source_id,
        params=run.params,
        tokenizer=free_tier.tokenizer(),
        ledger=run.ledger,
    )
    return _Done(
        result,
        {"probe_regenerate": result.prompt_version},
        run.params.model_dump(),
        run.ledger.usage,
        run.ledger.cost_usd,
    )


_KINDS: dict[str, Callable[[_Run], Awaitable[_Done]]] = {"trace": _trace, "probe": _probe}


async def recover_interrupted(db: Database, limiter: Limiter | None = None) -> list[str]:
    """At startup: jobs a dead process left queued or running become ``interrupted``, settled from their call
    log (a call in flight when it died is billed at its counted cost); with ``limiter`` (the budget kept in the
    database), each one's reservation is settled to the calls it made and the USD its log bills (the reserved
    price when some billed call's cost is unknown), so the budget keeps what was spent and releases what was
    only reserved."""
    found = await crud_traces.interrupt_unfinished(db, INTERRUPTED_ON_START)
    for job in found:
        settled = await crud_calls.settle_interrupted(db, job.id)
        if limiter is not None and job.reservation is not None:
            await limiter.settle(Reservation(**job.reservation), job.calls_made, settled.usd if settled.billed else 0.0)
    ids = [job.id for job in found]
    if ids:
        log_fields(log, logging.WARNING, f"{len(ids)} trace job(s) interrupted by a restart", jobs=ids)
    return ids
