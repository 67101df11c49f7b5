"""What the routes do, once: free-tier views of a stored turn, quotes, starting a trace, and
the response models built from stored records. Routes parse and authenticate, then call one
function here; CPU-bound estimator work runs in a worker thread, off the event loop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio.to_thread

from estimator.params import Params
from estimator.turn import StoredTurn
from estimator.units import Corpus

from . import free_tier
from .auth import Principal
from .db import crud_traces, crud_turns
from .db.crud_traces import JobRecord, NewQuote, QuoteRecord
from .db.crud_turns import TurnRecord
from .deps import Services
from .errors import Conflict, CostRefused, RateLimited
from .jobs import run_trace_job
from .limits import request_params
from .observability import trace_id_var
from .schemas import (
    CitationOut,
    ExcludedOut,
    GateSummaryOut,
    LayerOut,
    PlannedCalls,
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


def judge_model(turn: StoredTurn, explicit: str | None, services: Services) -> str:
    """Explicit, else the turn's own model, else PROVENANCE_DEFAULT_MODEL (from settings)."""
    if explicit or turn.model or not services.settings.default_model:
        return free_tier.resolve_model(turn, explicit)
    return services.settings.default_model


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
    )


# --------------------------------------------------------------------------- quotes


def _price(
    record: TurnRecord, sentence: str, model: str, params: Params, probe: bool
) -> tuple[str, str | None, dict[str, Any]]:
    view = free_tier.gate_view(record.turn, params)
    selection = free_tier.require_selection(record.turn, view, sentence)
    quote = free_tier.cost_quote(record.turn, view.corpus, selection.text, model=model, params=params, probe=probe)
    return selection.text, selection.segment_id, quote.to_dict()


async def make_quote(
    services: Services,
    caller: Principal,
    turn_id: str,
    sentence: str,
    *,
    model: str | None,
    probe: bool,
    overrides: dict[str, Any] | None,
) -> QuoteRecord:
    record = await crud_turns.get_turn(services.db, caller.tenant, turn_id)
    params = request_params(services.settings.base_params, overrides)
    judge = judge_model(record.turn, model, services)
    claim, segment_id, quote = await anyio.to_thread.run_sync(_price, record, sentence, judge, params, probe)
    new = NewQuote(
        tenant=caller.tenant,
        user=caller.user,
        turn_id=turn_id,
        sentence=sentence,
        claim=claim,
        segment_id=segment_id,
        model=judge,
        probe=probe,
        params=params.model_dump(),
        quote=quote,
        planned_calls=int(quote["planned_calls"]),
        cost_usd=quote["cost_usd"],
        refused=quote["refused"],
    )
    return await crud_traces.create_quote(services.db, new, services.settings.quote_ttl_seconds)


def quote_out(q: QuoteRecord) -> QuoteOut:
    d = q.quote
    return QuoteOut(
        quote_id=q.id,
        expires_at=q.expires_at,
        turn_id=q.turn_id,
        claim=q.claim,
        segment_id=q.segment_id,
        model=q.model,
        sources=d["sources"],
        planned_calls=q.planned_calls,
        calls=PlannedCalls(**d["calls"]),
        input_tokens=d["input_tokens"],
        output_tokens=d["output_tokens"],
        untruncated_corpus_tokens=d["untruncated_corpus_tokens"],
        cost_usd=q.cost_usd,
        warnings=list(d["warnings"]),
        truncated_sources=list(d["truncated_sources"]),
        refused=q.refused,
    )


# --------------------------------------------------------------------------- traces


async def start_trace(services: Services, caller: Principal, body: TraceIn) -> JobRecord:
    """Resolve the quote (or quote inline), reserve its calls from the caller's budget, create the
    job and hand it to the runner. Nothing is reserved unless everything else is in order."""
    if body.by_quote():
        assert body.quote_id is not None
        quote = await crud_traces.get_quote(services.db, caller.tenant, body.quote_id)
        field = "quote_id"
    else:
        assert body.turn_id is not None and body.sentence is not None and body.max_cost_usd is not None
        quote = await make_quote(
            services,
            caller,
            body.turn_id,
            body.sentence,
            model=body.model,
            probe=body.probe,
            overrides=body.params,
        )
        field = "sentence"
        if quote.refused is None and quote.cost_usd is None:
            raise CostRefused(
                f"no price is known for model {quote.model!r}, so max_cost_usd cannot be guaranteed",
                field="max_cost_usd",
                fix="quote with POST /v1/quotes and start the trace by quote_id to accept an "
                "unpriced quote, or choose a model with a known price",
            )
        if quote.refused is None and quote.cost_usd is not None and quote.cost_usd > body.max_cost_usd:
            raise CostRefused(
                f"the quoted cost ${quote.cost_usd:.4f} is over max_cost_usd ${body.max_cost_usd:.4f}",
                field="max_cost_usd",
                fix="raise max_cost_usd, lower params.max_sources, or choose a cheaper model",
            )
    if quote.refused is not None:
        raise CostRefused(quote.refused, field=field, fix="narrow the turn's corpus or lower the request's params")
    if quote.used_by is not None:
        raise Conflict(
            f"quote {quote.id!r} was already used to start trace {quote.used_by!r}",
            field="quote_id",
            fix="request a new quote with POST /v1/quotes",
        )
    try:
        reservation = await services.limiter.reserve(caller.budget_key, quote.planned_calls)
    except RateLimited:
        services.metrics.budget_refusals.inc()
        raise
    try:
        job = await crud_traces.create_job(services.db, quote, max_cost_usd=body.max_cost_usd)
    except BaseException:
        await services.limiter.settle(reservation, 0)
        raise
    trace_id_var.set(job.id)  # the request's log lines name the trace it started
    ctx = services.trace_context
    services.runner.submit(job.id, lambda: run_trace_job(ctx, job.id, reservation))
    return job


def trace_out(job: JobRecord) -> TraceOut:
    return TraceOut(
        trace_id=job.id,
        status=job.status,
        turn_id=job.turn_id,
        quote_id=job.quote_id,
        claim=job.claim,
        segment_id=job.segment_id,
        model=job.model,
        calls=TraceCalls(planned=job.calls_planned, made=job.calls_made, billed=job.calls_billed),
        round=job.round,
        message=job.message,
        layer_scores=dict(job.layer_scores),
        reason=job.reason,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        result=job.result if job.status == "succeeded" else None,
    )


def progress_out(job: JobRecord, services: Services) -> ProgressOut:
    """The job's progress: the live snapshot while it runs in this process, else the stored row."""
    live = services.hub.live.get(job.id) if not job.terminal else None
    made, billed = (live.calls_made, live.calls_billed) if live else (job.calls_made, job.calls_billed)
    return ProgressOut(
        trace_id=job.id,
        status=job.status,
        calls_done=made,
        calls_planned=job.calls_planned,
        calls_billed=billed,
        round=live.round if live else job.round,
        message=live.message if live else job.message,
        layer_scores=dict(live.layer_scores if live else job.layer_scores),
    )
