"""What the routes do, once: free-tier views of a stored turn, quotes, starting a trace, and
the response models built from stored records. Routes parse and authenticate, then call one
function here; CPU-bound estimator work runs in a worker thread, off the event loop."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import anyio.to_thread

from estimator.cost import Pricing
from estimator.params import Params
from estimator.proxy_cost import proxy_capability, quote_proxy
from estimator.proxy_models import ProxyQuoteModel
from estimator.result_models import CostQuoteModel, ProbeResultModel, ScoringQuoteModel, TraceJobResultModel
from estimator.scoring_cost import EstimatorChoice, ScoringCapability, quote_scoring, scoring_capability
from estimator.trace import needs_scorer, planned_calls
from estimator.turn import StoredTurn
from estimator.units import Corpus
from provenance_api.core.errors import Conflict, CostRefused, InvalidInput, RateLimited
from provenance_api.core.observability import trace_id_var
from provenance_api.core.schemas import (
    CitationOut,
    ExcludedOut,
    ExpectedDigitOut,
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
from provenance_api.operations import model_policy
from provenance_api.operations.auth import Principal
from provenance_api.operations.model_policy import ModelChoice
from provenance_api.operations.request_params import request_params
from provenance_api.operations.services import Services
from provenance_api.providers import free_tier
from provenance_api.providers.capabilities import top_logprobs_capability
from provenance_api.storage import crud_traces, crud_turns
from provenance_api.storage.crud_traces import JobKind, JobRecord, NewQuote, QuoteRecord
from provenance_api.storage.crud_turns import TurnRecord
from provenance_api.storage.limits import Reservation


def judge_model(turn: StoredTurn, explicit: str | None, services: Services, tenant: str) -> ModelChoice:
    """The operator's policy (``model_policy``): an explicit model only if allowed for ``tenant`` (else 422),
    else the turn's own model if allowed, else the default; refused (422) when it names a host or has no price."""
    return model_policy.judge_for(
        services.settings, tenant, turn_model=turn.model, explicit=explicit, local_model=services.local_model
    )


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


def model_scoring(services: Services, model: str) -> ScoringCapability:
    """Whether ``model`` can score (log p of a supplied claim) on this service's configuration."""
    settings = services.settings
    return scoring_capability(
        model,
        local_model=services.local_model,
        scorer_api_base=settings.scorer_api_base,
        api_base=settings.judge_api_base,
    )


def _price(
    record: TurnRecord,
    sentence: str,
    model: str,
    params: Params,
    probe: bool,
    capability: ScoringCapability | None = None,
    estimator: EstimatorChoice = "judged",
    pricing: Pricing | None = None,
    tenant: str = "",
) -> tuple[str, str | None, dict[str, Any], int]:
    """The cost gate for a trace, or — with ``probe`` — for the probe alone (2k regenerations); with
    ``capability``, the scoring a logprob trace would add (``scoring``). Also the planned calls of the
    chosen estimator (``estimator.trace.planned_calls``; the probe's own plan with ``probe``). The turn's
    corpus, segments and token counts are shared by the tenant's quotes of it (``free_tier.quote_view``)."""
    view = free_tier.quote_view(record.turn, params, tenant=tenant, digest=record.digest)
    selection = free_tier.require_selection(record.turn, view, sentence)
    quote = free_tier.cost_quote(
        record.turn,
        view.corpus,
        selection.text,
        model=model,
        params=params,
        probe=probe,
        trace=not probe,
        pricing=pricing,
        tokens=view.tokenizer,
    )
    out = quote.to_dict()
    if capability is not None:
        out["scoring"] = quote_scoring(
            view.corpus,
            selection.text,
            capability,
            query=record.turn.effective_query(),
            params=params,
            tokenizer=view.tokenizer,
        ).to_dict()
    if estimator == "proxy" and capability is not None:  # both sides; the budget reserves the fallback's worst case
        from provenance_api.providers.llm_litellm import LiteLLMPricing  # the price cost_quote uses by default

        proxy = quote_proxy(
            view.corpus,
            selection.text,
            capability,
            quote,
            query=record.turn.effective_query(),
            params=params,
            tokenizer=view.tokenizer,
            pricing=pricing or LiteLLMPricing(),
        ).to_model()
        out["proxy"] = proxy.model_dump(mode="json")
        out["cost_usd"] = proxy.worst_case_cost_usd
    planned = quote.planned_calls if probe else planned_calls(estimator, view.corpus, params)
    return selection.text, selection.segment_id, out, planned


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
) -> QuoteRecord:
    if probe and estimator != "judged":
        raise InvalidInput(
            f"a probe regenerates answers: estimator {estimator!r} does not apply",
            field="estimator",
            fix="drop estimator, or quote a trace (probe: false)",
        )
    record = await crud_turns.get_turn(services.db, caller.tenant, turn_id)
    params = request_params(services.settings.base_params, overrides)
    choice = judge_model(record.turn, model, services, caller.tenant)
    judge = choice.model
    capability = None if probe else model_scoring(services, judge)
    if estimator == "proxy" and capability is not None:  # the hosted judge confirms; a separate scorer ranks
        capability = proxy_capability(
            local_model=services.local_model, scorer_api_base=services.settings.scorer_api_base
        )
        if not capability.can_score:
            raise InvalidInput(
                f"estimator 'proxy' needs a local scoring model to rank the sources: {capability.reason}",
                field="estimator",
                fix="set PROVENANCE_SCORER_API_BASE (and PROVENANCE_SCORER_MODEL) to a scoring endpoint with "
                "/v1/completions echo, such as a llama.cpp server, or start the service with serve --local-model "
                "FILE.gguf; or use estimator judged",
            )
    if capability is not None and needs_scorer(estimator) and not capability.can_score:
        raise InvalidInput(
            f"estimator {estimator!r} needs a scoring-capable model: {capability.reason}",
            field="estimator",
            fix="use estimator judged, or run the service with a scoring model (serve --local-model, or "
            "PROVENANCE_SCORER_API_BASE naming a self-hosted /v1/completions server with echo)",
        )
    expected = (
        None
        if probe
        else top_logprobs_capability(judge, local_model=services.local_model, api_base=services.settings.judge_api_base)
    )
    if expected is not None and estimator == "expected" and not expected.offered:
        raise InvalidInput(
            f"estimator 'expected' needs a judge that returns top log-probabilities: {expected.reason}",
            field="estimator",
            fix="use estimator judged, or a judge model that offers top log-probabilities (OpenAI or Azure chat "
            "completions, vLLM, a llama.cpp server, the local model)",
        )
    claim, segment_id, quote, planned = await anyio.to_thread.run_sync(
        _price,
        record,
        sentence,
        judge,
        params,
        probe,
        capability,
        estimator,
        model_policy.pricing(services.settings),
        caller.tenant,
    )
    quote["estimator"] = estimator
    quote["model_reason"] = choice.reason
    quote["model_source"] = choice.source
    if expected is not None:
        quote["expected_digit"] = expected.to_dict()
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
        planned_calls=planned,
        cost_usd=quote["cost_usd"],
        refused=quote["refused"],
    )
    return await crud_traces.create_quote(services.db, new, services.settings.quote_ttl_seconds)


def quote_out(q: QuoteRecord) -> QuoteOut:
    d = q.quote
    priced = CostQuoteModel.model_validate(d)  # the estimator's quote; the service's additions are read below
    return QuoteOut(
        quote_id=q.id,
        expires_at=q.expires_at,
        turn_id=q.turn_id,
        claim=q.claim,
        segment_id=q.segment_id,
        model=q.model,
        model_reason=d.get("model_reason"),
        sources=priced.sources,
        planned_calls=q.planned_calls,
        calls=priced.calls,
        input_tokens=priced.input_tokens,
        output_tokens=priced.output_tokens,
        untruncated_corpus_tokens=priced.untruncated_corpus_tokens,
        cost_usd=q.cost_usd,
        warnings=priced.warnings,
        truncated_sources=priced.truncated_sources,
        refused=q.refused,
        estimator=d.get("estimator", "judged"),
        scoring=ScoringQuoteModel.model_validate(d["scoring"]) if d.get("scoring") else None,
        expected_digit=ExpectedDigitOut(**d["expected_digit"]) if d.get("expected_digit") else None,
        proxy=ProxyQuoteModel.model_validate(d["proxy"]) if d.get("proxy") else None,
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


def check_max_cost(quote: QuoteRecord, max_cost_usd: float, *, what: str = "trace") -> None:
    """Refuse (422 naming max_cost_usd) a quote that is unpriced or over ``max_cost_usd``."""
    if quote.refused is None and quote.cost_usd is None:
        raise CostRefused(
            f"no price is known for model {quote.model!r}, so max_cost_usd cannot be guaranteed",
            field="max_cost_usd",
            fix=f"quote with POST /v1/quotes and start the {what} by quote_id to accept an "
            "unpriced quote, or choose a model with a known price",
        )
    if quote.refused is None and quote.cost_usd is not None and quote.cost_usd > max_cost_usd:
        raise CostRefused(
            f"the quoted cost ${quote.cost_usd:.4f} is over max_cost_usd ${max_cost_usd:.4f}",
            field="max_cost_usd",
            fix="raise max_cost_usd, lower params.max_sources, or choose a cheaper model",
        )


async def start_job(
    services: Services, caller: Principal, body: TraceIn, *, kind: JobKind, source_id: str | None = None
) -> JobRecord:
    probe = kind == "probe"
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
            probe=probe or body.probe,
            overrides=body.params,
            estimator=body.estimator or "judged",
        )
        field = "sentence"
        check_max_cost(quote, body.max_cost_usd, what=kind)
    if quote.probe != probe:
        raise InvalidInput(
            f"quote {quote.id!r} prices a {'probe' if quote.probe else 'trace'}, not a {kind}",
            field="probe" if field == "sentence" else field,
            fix="start a probe with POST /v1/probes from a quote made with probe: true, and a trace "
            "with POST /v1/traces from a quote without it",
        )
    if source_id is not None:
        await _require_source(services, caller, quote.turn_id, source_id)
    if quote.refused is not None:
        raise CostRefused(quote.refused, field=field, fix="narrow the turn's corpus or lower the request's params")
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
    quote: QuoteRecord,
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
        result=TraceJobResultModel.model_validate(job.result) if job.status == "succeeded" and job.result else None,
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
        calls_done=made,
        calls_planned=job.calls_planned,
        calls_billed=billed,
        calls_cached=cached,
        calls_failed=failed,
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
