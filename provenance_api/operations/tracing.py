"""What the routes do, once: free-tier views of a stored turn, quotes, starting a trace, and
the response models built from stored records. Routes parse and authenticate, then call one
function here; CPU-bound estimator work runs in a worker thread, off the event loop."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import anyio.to_thread

from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.custody.ages import answer_time
from estimator.loo.logprob_cost import EstimatorChoice
from estimator.params import Params
from estimator.results.models import ProbeResultModel, trace_job_result
from provenance_api.core.errors import Conflict, InvalidInput, RateLimited
from provenance_api.core.observability import trace_id_var
from provenance_api.core.schemas import (
    CitationOut,
    ExcludedOut,
    GateSummaryOut,
    LayerOut,
    ProbeIn,
    ProbeOut,
    ProgressOut,
    QuoteOut,
    SegmentOut,
    SegmentsOut,
    SourceOut,
    SourcesOut,
    TraceCalls,
    TraceIn,
    TraceOut,
)
from provenance_api.jobs.runner import run_trace_job
from provenance_api.operations import trace_plan
from provenance_api.operations.auth import Principal
from provenance_api.operations.custody import bound_sources
from provenance_api.operations.model_policy import ModelChoice
from provenance_api.operations.request_params import request_params
from provenance_api.operations.services import Services
from provenance_api.providers import free_tier
from provenance_api.storage import crud_traces, crud_turns
from provenance_api.storage.crud_traces import JobKind, JobRecord
from provenance_api.storage.limits import Reservation
from provenance_api.storage.quotes import StoredQuote


def trace_surface(services: Services, tenant: str, *, digest: str | None = None) -> trace_plan.TraceSurface:
    """This service as ``trace_plan.decide`` sees it: the operator's model policy for ``tenant``, its configured
    endpoints; with ``digest`` (the stored turn's), the quote views shared by the tenant's quotes of that turn."""
    if digest is None:
        return trace_plan.service_surface(services.settings, tenant, local_model=services.local_model)

    def view(turn: StoredTurn, params: Params) -> free_tier.QuoteView:
        return free_tier.quote_view(turn, params, tenant=tenant, digest=digest)

    return trace_plan.service_surface(services.settings, tenant, local_model=services.local_model, view=view)


def judge_model(turn: StoredTurn, explicit: str | None, services: Services, tenant: str) -> ModelChoice:
    """The operator's policy (``model_policy``): an explicit model only if allowed for ``tenant`` (else 422),
    else the turn's own model if allowed, else the default; refused (422) when it names a host or has no price."""
    return trace_plan.choose_judge(turn, explicit, trace_surface(services, tenant))


# --------------------------------------------------------------------------- free tier


def sources_out(turn_id: str, corpus: Corpus, params: Params) -> SourcesOut:
    layers = []
    for layer in corpus.layers_present():
        layers.append(
            LayerOut(
                layer=layer.value,
                sources=[
                    SourceOut(
                        id=u.id,
                        layer=u.layer.value,
                        kind=u.kind,
                        tool=u.tool,
                        label=u.label,
                        tokens=u.evidence.tokens,
                        truncated_for_ablation=u.evidence.tokens > params.source_token_cap,
                        truncated_for_span_check=u.evidence.tokens > params.support_token_cap,
                        transformations=list(u.evidence.transformations),
                        digest=u.evidence.digest,
                        unversioned=u.unversioned,
                        turns_ago=u.turns_ago,
                    )
                    for u in corpus.in_layer(layer)
                ],
            )
        )
    return SourcesOut(
        turn_id=turn_id,
        corpus_digest=corpus.digest,
        path=corpus.path,
        source_count=len(corpus),
        layers=layers,
        unversioned=corpus.unversioned,
        unscorable=list(corpus.unscorable),
        excluded=[ExcludedOut(tool=e.tool, label=e.label, reason=e.reason) for e in corpus.excluded],
    )


async def turn_sources(services: Services, caller: Principal, turn_id: str) -> SourcesOut:
    record = await crud_turns.get_turn(services.db, caller.tenant, turn_id)
    params = services.settings.base_params
    corpus = await anyio.to_thread.run_sync(free_tier.corpus_for, record.turn, params)
    return sources_out(turn_id, corpus, params)


async def turn_segments(
    services: Services,
    caller: Principal,
    turn_id: str,
    client: Sequence[tuple[str | None, str]] | None = None,
    overrides: dict[str, Any] | None = None,
) -> SegmentsOut:
    record = await crud_turns.get_turn(services.db, caller.tenant, turn_id)
    params = request_params(services.settings.base_params, overrides)
    view = await anyio.to_thread.run_sync(free_tier.gate_view, record.turn, params, client)
    report = view.report
    return SegmentsOut(
        turn_id=turn_id,
        corpus_digest=view.corpus.digest,
        summary=GateSummaryOut(**report.summary.to_dict()),
        segments=[
            SegmentOut(
                id=g.segment.id,
                text=g.segment.text,
                start=g.segment.start,
                end=g.segment.end,
                status=g.status.value,
                klass=g.klass.value,
                anchors=list(g.anchors),
                citations=[CitationOut(**c.to_dict()) for c in g.citations],
            )
            for g in report.segments
        ],
        answered_at=answer_time(record.turn),
        sources=await bound_sources(  # the MCP gateway's custody on each tool return
            services.db, caller.tenant, free_tier.source_outs(record.turn, view.corpus), view.corpus
        ),
    )


# --------------------------------------------------------------------------- quotes


async def make_quote(
    services: Services,
    caller: Principal,
    turn_id: str,
    sentence: str,
    *,
    model: str | None,
    probe: bool,
    overrides: dict[str, Any] | None,
    estimator: EstimatorChoice = "judged",
) -> StoredQuote:
    """Quote a trace (or, with ``probe``, the probe alone) of ``sentence``: ``trace_plan.decide`` gates it,
    chooses the judge under the operator's policy, prices it and checks the estimator (422 naming the field
    when it cannot run). A cost-gate refusal is kept on the stored quote; starting a trace from it is refused.
    CPU-bound: runs in a worker thread."""
    trace_plan.check_probe(estimator, probe, trace_plan.SERVICE_WORDS)  # the request's shape, before any read
    record = await crud_turns.get_turn(services.db, caller.tenant, turn_id)
    params = request_params(services.settings.base_params, overrides)
    decide = functools.partial(
        trace_plan.decide,
        record.turn,
        sentence,
        estimator,
        model,
        surface=trace_surface(services, caller.tenant, digest=record.digest),
        params=params,
        probe=probe,
    )
    decision = await anyio.to_thread.run_sync(decide)
    decision.require()
    quote = decision.stored_quote(
        tenant=caller.tenant,
        user=caller.user,
        turn_id=turn_id,
        sentence=sentence,
        params=params,
        ttl_seconds=services.settings.quote_ttl_seconds,
    )
    return await crud_traces.create_quote(services.db, quote, services.settings.quote_ttl_seconds)


def quote_out(q: StoredQuote) -> QuoteOut:
    priced = q.priced  # the estimator's quote; planned_calls and cost_usd are the service's
    return QuoteOut(
        quote_id=q.id,
        expires_at=q.expires_at,
        turn_id=q.turn_id,
        claim=q.claim,
        segment_id=q.segment_id,
        model=q.model,
        model_reason=q.model_reason,
        sources=priced.sources,
        planned_calls=q.planned_calls,
        calls=priced.calls,
        input_tokens=priced.input_tokens,
        output_tokens=priced.output_tokens,
        untruncated_corpus_tokens=priced.untruncated_corpus_tokens,
        cost_usd=q.cost_usd,
        warnings=list(priced.warnings),
        truncated_sources=list(priced.truncated_sources),
        refused=q.refused,
        estimator=q.estimator,
        scoring=q.scoring,
        expected_digit=q.expected_digit,
        proxy=q.proxy,
    )


# --------------------------------------------------------------------------- traces


async def start_trace(services: Services, caller: Principal, body: TraceIn) -> JobRecord:
    """Resolve the quote (or quote inline), reserve its calls from the caller's budget, create the
    job and hand it to the runner. Nothing is reserved unless everything else is in order."""
    return await start_job(services, caller, body, kind="trace")


async def start_probe(services: Services, caller: Principal, body: ProbeIn) -> JobRecord:
    """A probe of ``body.source_id`` as a job: quoted (the probe alone, 2k calls), budgeted and run
    exactly as a trace is."""
    return await start_job(services, caller, body.as_trace(), kind="probe", source_id=body.source_id)


async def start_job(
    services: Services, caller: Principal, body: TraceIn, *, kind: JobKind, source_id: str | None = None
) -> JobRecord:
    probe = kind == "probe"
    if body.by_quote():
        assert body.quote_id is not None
        quote = await crud_traces.get_quote(services.db, caller.tenant, body.quote_id)
        field = "quote_id"
    else:
        assert body.turn_id is not None and body.max_cost_usd is not None
        quote = await make_quote(
            services,
            caller,
            body.turn_id,
            body.selected(),
            model=body.model,
            probe=probe or body.probe,
            overrides=body.overrides(),
            estimator=body.estimator or "judged",
        )
        field = "target" if body.target is not None else "sentence"
        trace_plan.check_max_cost(quote.refused, quote.cost_usd, quote.model, body.max_cost_usd, what=kind)
    if quote.probe != probe:
        raise InvalidInput(
            f"quote {quote.id!r} prices a {'probe' if quote.probe else 'trace'}, not a {kind}",
            field="probe" if field in ("sentence", "target") else field,
            fix="start a probe with POST /v1/probes from a quote made with probe: true, and a trace "
            "with POST /v1/traces from a quote without it",
        )
    if source_id is not None:
        await _require_source(services, caller, quote.turn_id, source_id)
    if quote.refused is not None:
        raise trace_plan.cost_refusal(trace_plan.SERVICE_WORDS, quote.refused, field=field).error()
    if quote.used_by is not None:
        raise Conflict(
            f"quote {quote.id!r} was already used to start {quote.used_by!r}",
            field="quote_id",
            fix="request a new quote with POST /v1/quotes",
        )
    reservation = await reserve(services, caller, quote.planned_calls, quote.cost_usd or 0.0)
    return await launch(services, quote, reservation, max_cost_usd=body.max_cost_usd, kind=kind, source_id=source_id)


async def _require_source(services: Services, caller: Principal, turn_id: str, source_id: str) -> None:
    record = await crud_turns.get_turn(services.db, caller.tenant, turn_id)
    corpus = await anyio.to_thread.run_sync(free_tier.corpus_for, record.turn, services.settings.base_params)
    if source_id not in {u.id for u in corpus.units}:
        raise InvalidInput(
            f"{source_id!r} is not a source of turn {turn_id!r}",
            field="source_id",
            fix=f"list the turn's sources with GET /v1/turns/{turn_id}/sources",
        )


async def reserve(services: Services, caller: Principal, calls: int, cost_usd: float = 0.0) -> Reservation:
    """Reserve ``calls`` and the quote's ``cost_usd`` from the caller's budgets — calls and USD per user, USD
    per tenant (429 naming the budget when they do not fit)."""
    try:
        return await services.limiter.reserve(caller.budget_key, calls, cost_usd)
    except RateLimited:
        services.metrics.budget_refusals.inc()
        raise


async def launch(
    services: Services,
    quote: StoredQuote,
    reservation: Reservation,
    *,
    max_cost_usd: float | None,
    kind: JobKind = "trace",
    source_id: str | None = None,
) -> JobRecord:
    """Consume ``quote``, create its job and hand it to the runner, which settles ``reservation``
    when the job ends (released at once if the job cannot be created)."""
    try:
        job = await crud_traces.create_job(
            services.db,
            quote,
            max_cost_usd=max_cost_usd,
            kind=kind,
            source_id=source_id,
            reservation=dataclasses.asdict(reservation),
        )
    except BaseException:
        await services.limiter.settle(reservation, 0)
        raise
    trace_id_var.set(job.id)  # the request's log lines name the job it started
    ctx = services.trace_context
    await services.runner.enqueue(job.id, reservation, lambda: run_trace_job(ctx, job.id, reservation))
    return job


def job_calls(job: JobRecord) -> TraceCalls:
    """A job's calls in the five words every place uses: planned, made, cached, billed, failed."""
    return TraceCalls(
        planned=job.calls_planned,
        made=job.calls_made,
        cached=job.calls_cached,
        billed=job.calls_billed,
        failed=job.calls_failed,
    )


def trace_out(job: JobRecord) -> TraceOut:
    return TraceOut(
        trace_id=job.id,
        status=job.status,
        turn_id=job.turn_id,
        quote_id=job.quote_id,
        claim=job.claim,
        segment_id=job.segment_id,
        model=job.model,
        calls=job_calls(job),
        round=job.round,
        message=job.message,
        layer_scores=dict(job.layer_scores),
        reason=job.reason,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        result=trace_job_result(job.result) if job.status == "succeeded" and job.result else None,
    )


def progress_out(job: JobRecord, services: Services) -> ProgressOut:
    """The job's progress: the live snapshot while it runs in this process, else the stored row."""
    live = services.hub.live.get(job.id) if not job.terminal else None
    made, billed, cached, failed = (
        (live.calls_made, live.calls_billed, live.calls_cached, live.calls_failed)
        if live
        else (job.calls_made, job.calls_billed, job.calls_cached, job.calls_failed)
    )
    return ProgressOut(
        trace_id=job.id,
        status=job.status,
        calls=TraceCalls(planned=job.calls_planned, made=made, cached=cached, billed=billed, failed=failed),
        round=live.round if live else job.round,
        message=live.message if live else job.message,
        layer_scores=dict(live.layer_scores if live else job.layer_scores),
    )


def probe_out(job: JobRecord) -> ProbeOut:
    return ProbeOut(
        probe_id=job.id,
        status=job.status,
        turn_id=job.turn_id,
        quote_id=job.quote_id,
        claim=job.claim,
        segment_id=job.segment_id,
        source_id=job.source_id or "",
        model=job.model,
        calls=job_calls(job),
        message=job.message,
        reason=job.reason,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        result=ProbeResultModel.model_validate(job.result) if job.status == "succeeded" and job.result else None,
    )
