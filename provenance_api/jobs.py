"""Jobs: the runner protocol, the in-process runner, and one job's execution — a trace (with its
declared-attribution audit) or a probe, chosen by the job's ``kind``.

A trace runs as a job. Every model call goes through ``MeteredLLM``, which counts calls made
and billed and writes them to the job's row *before* the estimator sees the answer — so a
process killed mid-run leaves a record of exactly what was spent. Progress events (round, the
latest message, partial layer scores) are kept live for the event stream and written with the
next call. On startup, jobs left ``queued``/``running`` by a dead process become ``interrupted``
with the calls they had billed. Only a finished trace writes a result; a failed or interrupted
job never has one.

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

from estimator.agreement import agreement
from estimator.attribution import ProgressEvent, trace_claim
from estimator.declared import audit_trace
from estimator.llm import LLM, LLMError, LLMRequest, LLMResponse, Usage
from estimator.logprob import trace_logprob
from estimator.params import Params
from estimator.probe import probe_source
from estimator.scorer import Scorer
from estimator.units import Corpus

from . import free_tier
from .db import crud_traces, crud_turns
from .db.crud_traces import JobRecord, Progress
from .db.session import Database
from .errors import ProvenanceError
from .limits import Limiter, Reservation
from .observability import Metrics, log_fields, redact, trace_id_var

log = logging.getLogger("provenance_api.jobs")

LLMFactory = Callable[[str, str | None], LLM]
ScorerFactory = Callable[[str], Scorer]  # judge model → its scorer (estimator logprob / both)
INTERRUPTED_ON_START = "the service stopped while this trace was queued or running; calls already billed are kept"
INTERRUPTED_ON_STOP = "the service shut down while this trace was running; calls already billed are kept"


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
    made: int = 0
    answered: int = 0
    billed: int = 0
    cached: int = 0
    last_error: str | None = None
    progress: Progress = field(default_factory=lambda: Progress(0, 0))


class MeteredLLM:
    """Wraps the judge: caps calls in flight, counts them, and persists the counts after each call."""

    def __init__(
        self, inner: LLM, *, concurrency: int, on_call: Callable[[], Awaitable[None]], metrics: Metrics
    ) -> None:
        self.inner = inner
        self.meter = _Meter()
        self._cap = anyio.CapacityLimiter(concurrency)
        self._on_call = on_call
        self._metrics = metrics

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def billed(self) -> int:
        counted = getattr(self.inner, "calls_billed", None)
        return counted if isinstance(counted, int) else self.meter.billed

    async def complete(self, request: LLMRequest) -> LLMResponse:
        async with self._cap:
            self.meter.made += 1
            try:
                response = await self.inner.complete(request)
            except LLMError as exc:
                self.meter.billed += 1 if exc.billed else 0
                self.meter.last_error = redact(str(exc))[:300]
                self._metrics.model_calls.labels("failed_billed" if exc.billed else "failed").inc()
                await self._on_call()
                raise
            self.meter.answered += 1
            if response.cached:  # answered by the judgement cache: not a model call, not billed
                self.meter.made -= 1
                self.meter.cached += 1
                self._metrics.cache_hits.labels("judgement").inc()
                await self._on_call()
                return response
            self.meter.billed += 1
            self._metrics.model_calls.labels("answered").inc()
            self._metrics.observe_usage(response.usage, cached=response.cached)
            await self._on_call()
            return response


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


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def run_trace_job(ctx: TraceContext, job_id: str, reservation: Reservation) -> None:
    """Run one queued trace job to a terminal state, then settle its call reservation."""
    trace_id_var.set(job_id)
    held: list[MeteredLLM] = []
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
            outcome = await _execute(ctx, job, held)
        finally:
            ctx.metrics.traces_running.dec()
    except asyncio.CancelledError:
        outcome = "interrupted"
        with anyio.CancelScope(shield=True):
            await _finish_unsuccessful(ctx, job_id, held, "interrupted", INTERRUPTED_ON_STOP)
        raise
    except Exception as exc:
        reason = exc.detail if isinstance(exc, ProvenanceError) else f"internal error ({type(exc).__name__})"
        log_fields(log, logging.ERROR, "trace job failed", error=type(exc).__name__)
        with anyio.CancelScope(shield=True):
            await _finish_unsuccessful(ctx, job_id, held, "failed", reason)
    finally:
        ctx.metrics.traces.labels(outcome).inc()
        used = held[0].meter.made if held else 0
        with anyio.CancelScope(shield=True):
            await ctx.limiter.settle(reservation, used)
        ctx.hub.publish(job_id, None)
        log_fields(
            log,
            logging.INFO,
            f"trace {outcome}",
            outcome=outcome,
            calls_made=used,
            calls_reserved=reservation.calls,
        )


async def _finish_unsuccessful(
    ctx: TraceContext, job_id: str, held: list[MeteredLLM], status: Any, reason: str
) -> None:
    progress = (
        Progress(0, 0)
        if not held
        else replace(held[0].meter.progress, calls_made=held[0].meter.made, calls_billed=held[0].billed)
    )
    await crud_traces.finish_unsuccessful(ctx.db, job_id, status, reason, progress)


async def _execute(ctx: TraceContext, job: JobRecord, held: list[MeteredLLM]) -> str:
    record = await crud_turns.get_turn(ctx.db, job.tenant, job.turn_id)
    params = Params.model_validate(job.params)
    corpus = await anyio.to_thread.run_sync(free_tier.corpus_for, record.turn, params)
    query = record.turn.effective_query()
    write_lock = anyio.Lock()

    async def persist() -> None:
        meter = metered.meter
        meter.progress = replace(meter.progress, calls_made=meter.made, calls_billed=metered.billed)
        ctx.hub.publish(job.id, meter.progress)
        async with write_lock:
            await crud_traces.record_progress(ctx.db, job.id, meter.progress)

    metered = MeteredLLM(
        ctx.llm_factory(job.model, ctx.api_base),
        concurrency=params.concurrency,
        on_call=persist,
        metrics=ctx.metrics,
    )
    held.append(metered)

    def on_progress(event: ProgressEvent) -> None:
        meter = metered.meter
        meter.progress = Progress(
            calls_made=meter.made,
            calls_billed=metered.billed,
            round=event.round,
            message=event.message,
            layer_scores=dict(event.layer_scores),
        )
        ctx.hub.publish(job.id, meter.progress)

    estimator, scorer = "judged", None
    if job.kind == "trace":
        estimator = (await crud_traces.get_quote(ctx.db, job.tenant, job.quote_id)).quote.get("estimator", "judged")
        if estimator != "judged":
            if ctx.scorer_factory is None:
                raise ProvenanceError(f"estimator {estimator!r} needs a scorer and this service has none")
            scorer = ctx.scorer_factory(job.model)
    work = _KINDS[job.kind]
    done = await work(_Run(job, metered, corpus, query, params, on_progress, estimator, scorer))
    meter = metered.meter
    final = replace(meter.progress, calls_made=meter.made, calls_billed=metered.billed)
    if meter.made and not meter.answered:
        reason = f"every model call failed ({meter.made} calls); last error: {meter.last_error or 'unknown'}"
        await crud_traces.finish_unsuccessful(ctx.db, job.id, "failed", reason, final)
        return "failed"
    ctx.metrics.cache_hits.labels("memo").inc(done.saved)
    audit = crud_traces.ResultAudit(
        turn_digest=record.digest,
        claim_digest=_digest(job.claim),
        query_digest=_digest(query),
        corpus_digest=corpus.digest,
        prompt_versions=done.prompt_versions,
        params=done.params,
        model=metered.model,
        result=done.result,
        calls_planned=job.calls_planned,
        calls_made=meter.made,
        calls_billed=metered.billed,
        input_tokens=done.usage.input_tokens,
        output_tokens=done.usage.output_tokens,
        cost_usd=done.cost_usd,
    )
    await crud_traces.finish_succeeded(ctx.db, job, audit, final)
    return "succeeded"


@dataclass(frozen=True)
class _Run:
    """What one kind of job is given: the job, the metered judge, the turn's corpus and query."""

    job: JobRecord
    llm: MeteredLLM
    corpus: Corpus
    query: str
    params: Params
    on_progress: Callable[[ProgressEvent], None]
    estimator: str = "judged"
    scorer: Scorer | None = None


@dataclass(frozen=True)
class _Done:
    """What one kind of job produced: the result to store and its audit fields."""

    result: dict[str, Any]
    prompt_versions: dict[str, Any]
    params: dict[str, Any]
    usage: Usage
    cost_usd: float | None
    saved: int = 0


async def _trace(run: _Run) -> _Done:
    """A trace, with the declared-attribution audit of the sentence attached as ``declared``. The
    quote's estimator picks the scalar: ``judged``, ``logprob``, or ``both`` (the judged result with the
    log-probability one as ``logprob`` and their ``agreement``; the span checks are shared)."""
    tok = free_tier.tokenizer()
    judged = None
    if run.estimator in ("judged", "both"):
        judged = await trace_claim(run.llm, run.job.claim, run.query, run.corpus, params=run.params,
                                   tokenizer=tok, on_progress=run.on_progress)
    logprob = None
    if run.estimator in ("logprob", "both"):
        assert run.scorer is not None
        supports = None if judged is None else {
            s.source_id: s.support for s in judged.sources if s.support is not None}
        logprob = await trace_logprob(run.scorer, None if supports else run.llm, run.job.claim, run.query,
                                      run.corpus, params=run.params, tokenizer=tok, on_progress=run.on_progress,
                                      supports=supports)
    result = judged or logprob
    assert result is not None
    out = result.to_dict()
    out["declared"] = audit_trace(run.job.claim, run.corpus, result).to_dict()
    if judged is not None and logprob is not None:
        out["logprob"] = logprob.to_dict()
        out["agreement"] = agreement(judged, logprob).to_dict()
    return _Done(out, dict(result.prompt_versions), dict(result.params), result.usage, result.cost_usd,
                 result.calls.saved)


async def _probe(run: _Run) -> _Done:
    """Algorithm 6 on ``job.source_id``: sampled regenerations, never memoised or cached."""
    assert run.job.source_id is not None
    run.llm.meter.progress = Progress(0, 0, round="probe",
                                      message=f"regenerating with and without {run.job.source_id}")
    result = await probe_source(run.llm, run.job.claim, run.query, run.corpus, run.job.source_id,
                                params=run.params, tokenizer=free_tier.tokenizer())
    return _Done(result.to_dict(), {"probe_regenerate": result.prompt_version}, run.params.model_dump(),
                 result.usage, result.cost_usd)


_KINDS: dict[str, Callable[[_Run], Awaitable[_Done]]] = {"trace": _trace, "probe": _probe}


async def recover_interrupted(db: Database) -> list[str]:
    """At startup: jobs a dead process left queued or running become ``interrupted``."""
    ids = await crud_traces.interrupt_unfinished(db, INTERRUPTED_ON_START)
    if ids:
        log_fields(log, logging.WARNING, f"{len(ids)} trace job(s) interrupted by a restart", jobs=ids)
    return ids
