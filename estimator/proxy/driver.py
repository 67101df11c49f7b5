"""Proxy-first tracing (``--estimator proxy``): a local scoring model ranks the sources for free, the hosted
judge confirms the ranking in a few calls, and the full judged search runs only when it disagrees.

1. Rank: the log-probability leave-one-out (``logprob.LogprobScalar``) through the one driver
   (``loo.run_loo``: round 1 over layers, round 2 over the sources of contributing layers, redundancy
   resolution) on the local scorer, with the prompts' prefixes shared (``proxy_prefix``). Its passes are
   metered on a ledger of their own: they are ``calls.scored``, never ``calls.made``.
2. Confirm: the hosted judge measures s(1), s(0), s(1 − top layer), s(1 − top source) and span-checks the
   top source(s) (``proxy_confirm``), on the trace's ledger (``calls.made``).
3. Only when its measurements disagree with the proxy's ranking by more than the stated margin
   (``ProxyParams.share_margin``, rule in ``proxy_confirm``) does the full judged search run, answering
   what the confirmation measured without a second call; the result says so.
4. The judged search is the answer unless its own measurements contradict each other (a disagreement of a
   kind in ``coherence.SCORES_DISAGREE``: a part that matters more than the whole, a distractor that carries
   the claim alone, a context that matters with no part that does) while the proxy's ranking is coherent and
   has a verdict. Answers that cannot all be true cannot overrule a measurement that is consistent: the result
   is then the proxy's ranking, *unconfirmed* (``confirmed`` false, ``CONTRADICTED_LINE`` and a warning), the
   judge's contradictions listed among the proxy's disagreements and its ranking kept beside it. A judge that
   answers the opposite of the claim — the claim likelier with nothing shown than with its cause — lands
   here; a judge whose answers are coherent but different still decides, as before.

The plan (``planned_proxy_calls``) is the fallback's worst case: the full judged plan, plus the
confirmation's calls the fallback cannot reuse (s(1 − top source), which its round 2 may not test, and
the span checks of top sources its span checks do not reach when sources exceed MAX_SOURCES), capped at
MAX_CALLS; s(1), s(0), s(1 − top layer) are round-1 masks and the span checks of the top source(s) are
span targets, so the fallback reuses them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import anyio

from estimator.corpus.units import Corpus
from estimator.cost import plan_calls
from estimator.ledger import CallLedger, labelled
from estimator.loo.coherence import SCORES_DISAGREE
from estimator.loo.driver import run_loo
from estimator.loo.logprob import DEFAULT_LOGPROB_PARAMS, LogprobParams
from estimator.loo.measure import JudgedDigit
from estimator.loo.rounds import plan_redundancy, select_units, windowed_texts
from estimator.params import DEFAULT_PARAMS, Params
from estimator.proxy.confirm import (
    DEFAULT_PROXY_PARAMS,
    Confirmation,
    ProxyParams,
    Seeded,
    confirm,
    disagreements,
    targets,
)
from estimator.proxy.prefix import OrderedLogprobScalar, PrefixOrderedScorer, block_order
from estimator.proxy.result import (
    ProxyTraceResultModel,
    hosted_check,
    layer_ranking,
    source_ranking,
    with_supports,
)
from estimator.results.models import (
    DisagreementModel,
    LogprobTraceResultModel,
    SupportVerdictModel,
    TraceResultModel,
    UsageModel,
)
from estimator.results.proxy import (
    CONFIRMED_LINE,
    CONTRADICTED_LINE,
    CONTRADICTED_WARNING,
    FALLBACK_LINE,
    ProxyReportModel,
)
from estimator.results.trace import ProgressEvent
from estimator.seams.llm import LLM
from estimator.seams.scorer import Scorer
from estimator.spans.support import check_support, support_body
from estimator.target import SENTENCE, Wording
from estimator.tokens import ApproxTokenizer, Tokenizer

__all__ = [
    "DEFAULT_PROXY_PARAMS",
    "ProxyParams",
    "Ranking",
    "confirm_calls",
    "confirm_judge_calls",
    "planned_proxy_calls",
    "rank",
    "self_contradictions",
    "trace_proxy",
]


def confirm_judge_calls(corpus: Corpus | None = None) -> int:
    """Judge calls of a confirmation at most: s(1), s(0) and the removals of the top layer and source — or,
    under a *redundant* ranking, of every layer of ``corpus`` (when given)."""
    return 2 + max(2, len(corpus.layers_present()) if corpus is not None else 0)


def confirm_calls(pp: ProxyParams = DEFAULT_PROXY_PARAMS, corpus: Corpus | None = None) -> int:
    """Hosted calls of a confirmation, worst case: its judge calls and each span check retried once."""
    return confirm_judge_calls(corpus) + 2 * pp.span_sources


def planned_proxy_calls(
    corpus: Corpus,
    params: Params = DEFAULT_PARAMS,
    pp: ProxyParams = DEFAULT_PROXY_PARAMS,
) -> int:
    """The hosted calls a proxy trace may make at worst (its ledger's ceiling); see the module docstring."""
    full = plan_calls(corpus, params).total
    # s(1 − top source), every sample of it (``repeats``), and the span checks the fallback may not reach
    unreused = params.repeats + (2 * pp.span_sources if len(corpus.units) > params.max_sources else 0)
    return min(full + unreused, max(full, params.call_ceiling))


def _relabelled(on_progress: Callable[[ProgressEvent], None] | None) -> Callable[[ProgressEvent], None] | None:
    if on_progress is None:
        return None

    def relay(event: ProgressEvent) -> None:
        on_progress(replace(event, message=f"proxy: {event.message}"))

    return relay


async def _span_checks(
    llm: LLM,
    ledger: CallLedger,
    claim: str,
    corpus: Corpus,
    ids: list[str],
    *,
    params: Params,
    tokenizer: Tokenizer,
    wording: Wording = SENTENCE,
) -> dict[str, SupportVerdictModel]:
    out: dict[str, SupportVerdictModel] = {}

    async def one(unit_id: str) -> None:
        unit = corpus.by_id(unit_id)
        with labelled("spans", f"span check of {unit_id}"):
            out[unit_id] = await check_support(
                llm,
                claim,
                unit,
                params=params,
                tokenizer=tokenizer,
                ledger=ledger,
                body=support_body(unit, params=params, tokenizer=tokenizer)[0],
                wording=wording,
            )

    async with anyio.create_task_group() as group:
        for unit_id in ids:
            group.start_soon(one, unit_id)
    return out


def _evaluated(scorer: Scorer) -> int | None:
    value = getattr(scorer, "evaluated_tokens", None)
    return value if isinstance(value, int) else None


@dataclass(frozen=True)
class Ranking:
    """The proxy's ranking: the log-probability trace, its local passes, seconds and evaluated tokens."""

    result: LogprobTraceResultModel
    passes: int
    seconds: float
    evaluated_tokens: int | None


async def rank(
    scorer: Scorer,
    claim: str,
    query: str,
    corpus: Corpus,
    *,
    model: str,
    params: Params = DEFAULT_PARAMS,
    pp: ProxyParams = DEFAULT_PROXY_PARAMS,
    lp: LogprobParams = DEFAULT_LOGPROB_PARAMS,
    tokenizer: Tokenizer | None = None,
    on_progress: Callable[[ProgressEvent], None] | None = None,
    wording: Wording = SENTENCE,
) -> Ranking:
    """Step 1: the log-probability leave-one-out on ``scorer``, prefixes shared, on a ledger of its own
    (capped at the plan's scoring passes). ``model`` names the hosted judge in the result."""
    tok = tokenizer or ApproxTokenizer()
    plan = plan_calls(corpus, params)
    local = CallLedger(planned=plan.ablation, concurrency=max(params.concurrency, params.max_sources + 4))
    texts, truncated = windowed_texts(corpus, params, tok)
    ordered = scorer if isinstance(scorer, PrefixOrderedScorer) else PrefixOrderedScorer(scorer)
    scalar = OrderedLogprobScalar(
        ordered,
        local,
        claim,
        query,
        corpus,
        texts,
        lp,
        wording=wording,
        order=block_order(corpus, texts, tok, pp.order),
    )
    before = _evaluated(ordered.inner)
    started = time.perf_counter()
    result = await run_loo(
        scalar,
        claim,
        corpus,
        llm=None,
        ledger=local,
        params=params,
        tokenizer=tok,
        model=model,
        truncated=truncated,
        on_progress=_relabelled(on_progress),
        redundancy=plan_redundancy(plan),
        wording=wording,
    )
    seconds = time.perf_counter() - started
    assert isinstance(result, LogprobTraceResultModel)
    after = _evaluated(ordered.inner)
    return Ranking(result, local.made, seconds, None if before is None or after is None else after - before)


async def trace_proxy(
    scorer: Scorer,
    llm: LLM,
    claim: str,
    query: str,
    corpus: Corpus,
    *,
    params: Params = DEFAULT_PARAMS,
    pp: ProxyParams = DEFAULT_PROXY_PARAMS,
    lp: LogprobParams = DEFAULT_LOGPROB_PARAMS,
    tokenizer: Tokenizer | None = None,
    on_progress: Callable[[ProgressEvent], None] | None = None,
    ledger: CallLedger | None = None,
    ranking: Ranking | None = None,
    wording: Wording = SENTENCE,
) -> ProxyTraceResultModel:
    """Rank on ``scorer``, confirm with ``llm``; ``ledger`` meters the hosted calls (a fresh one capped at
    ``planned_proxy_calls`` when None). ``ranking``: the proxy's ranking of this claim, already made (the
    benchmark confirms one ranking with several judges)."""
    if not corpus.units:
        raise ValueError("the corpus has no sources: nothing in this turn's context can be traced")
    tok = tokenizer or ApproxTokenizer()
    plan = plan_calls(corpus, params)
    hosted = ledger or CallLedger(planned=planned_proxy_calls(corpus, params, pp), concurrency=params.concurrency)
    texts, truncated = windowed_texts(corpus, params, tok)
    if ranking is None:
        ranking = await rank(
            scorer,
            claim,
            query,
            corpus,
            model=llm.model,
            params=params,
            pp=pp,
            lp=lp,
            tokenizer=tok,
            on_progress=on_progress,
            wording=wording,
        )
    ranked = ranking.result
    tg = targets(ranked, corpus, pp)
    conf = await confirm(llm, hosted, claim, query, corpus, texts, tg, params=params, tokenizer=tok, wording=wording)
    reasons = disagreements(ranked, conf, corpus, params, pp)
    report = ProxyReportModel(
        proxy_model=scorer.model,
        proxy_verdict=ranked.verdict,
        proxy_layers=layer_ranking(ranked),
        proxy_ranking=source_ranking(ranked),
        hosted=hosted_check(conf, corpus),
        disagreements=reasons,
        share_margin=pp.share_margin,
        proxy_seconds=round(ranking.seconds, 3),
        evaluated_tokens=ranking.evaluated_tokens,
    )
    extra = {"logprob": lp.model_dump(), "proxy": pp.model_dump()}
    if on_progress is not None:
        said = "confirmed the proxy's ranking" if not reasons else "disagreed: the full judged search runs"
        on_progress(ProgressEvent(hosted.made, hosted.planned or 0, "round1", f"hosted judge {said}"))
    if not reasons:
        shown = with_supports(ranked, conf.supports, corpus, conf)
        return _finish(shown, ranked, hosted, ranking.passes, report, extra, confirmed=True)
    judge = Seeded(JudgedDigit(llm, hosted, claim, query, corpus, texts, wording=wording), conf.scores)
    supports = await _fallback_spans(llm, hosted, claim, corpus, conf, params=params, tokenizer=tok, wording=wording)
    judged = await run_loo(
        judge,
        claim,
        corpus,
        llm=llm,
        ledger=hosted,
        params=params,
        tokenizer=tok,
        model=llm.model,
        truncated=truncated,
        on_progress=on_progress,
        supports=supports,
        redundancy=plan_redundancy(plan),
        wording=wording,
    )
    report = report.model_copy(update={"judged_ranking": source_ranking(judged)})
    contradicted = self_contradictions(judged)
    if contradicted and ranked.verdict != "no_information" and not self_contradictions(ranked):
        listed = [f"the hosted judge's own measurements contradict each other: {d.text}" for d in contradicted]
        report = report.model_copy(update={"disagreements": [*reasons, *listed]})
        shown = with_supports(ranked, conf.supports, corpus, conf)
        kept = shown.model_copy(update={"warnings": (*shown.warnings, CONTRADICTED_WARNING)})
        return _finish(kept, ranked, hosted, ranking.passes, report, extra, confirmed=False, local_scores=True)
    return _finish(judged, ranked, hosted, ranking.passes, report, extra, confirmed=False)


def self_contradictions(result: TraceResultModel) -> list[DisagreementModel]:
    """The disagreements of ``result`` in which its own scores contradict each other (``coherence``)."""
    return [d for d in result.disagreements if d.kind in SCORES_DISAGREE]


async def _fallback_spans(
    llm: LLM,
    ledger: CallLedger,
    claim: str,
    corpus: Corpus,
    conf: Confirmation,
    *,
    params: Params,
    tokenizer: Tokenizer,
    wording: Wording = SENTENCE,
) -> dict[str, SupportVerdictModel]:
    """The span checks the full search needs, reusing the confirmation's."""
    span_targets, _ = select_units(corpus.units, params.max_sources)
    missing = [u.id for u in span_targets if u.id not in conf.supports]
    made = await _span_checks(llm, ledger, claim, corpus, missing, params=params, tokenizer=tokenizer, wording=wording)
    return {**conf.supports, **made}


def _finish(
    body: TraceResultModel,
    ranked: LogprobTraceResultModel,
    hosted: CallLedger,
    passes: int,
    report: ProxyReportModel,
    extra: Mapping[str, object],
    *,
    confirmed: bool,
    local_scores: bool = False,
) -> ProxyTraceResultModel:
    """The proxy result: ``body`` is the proxy's ranking when ``confirmed`` or ``local_scores`` (the judge
    disagreed but its own measurements contradict each other), else the judged search's."""
    base: dict[str, object] = {name: getattr(body, name) for name in TraceResultModel.model_fields}
    calls = hosted.account().model_copy(update={"scored": passes})
    outcome = (
        "confirmed by the hosted judge"
        if confirmed
        else "the hosted judge disagreed, its own answers contradicting each other"
        if local_scores
        else "the hosted judge disagreed"
    )
    line = (
        f"proxy: ranked by {ranked.scorer_model} (log-probability leave-one-out, {passes} local scoring "
        f"passes), {outcome} ({hosted.made} hosted calls)"
    )
    base.update(
        estimator="proxy",
        calls=calls,
        usage=UsageModel.model_validate(hosted.usage),
        cost_usd=hosted.cost_usd,
        params={**body.params, **extra},
        notes=(*body.notes, line),
    )
    if hosted.refused:
        warned = f"{hosted.refused} call(s) refused: the plan of {hosted.planned} calls was reached."
        if warned not in body.warnings:
            base["warnings"] = (*body.warnings, warned)
    if confirmed or local_scores:  # the scores shown are the proxy's: its log-probability fields with them
        base.update(
            units=ranked.units,
            thresholds=ranked.thresholds,
            claim_tokens=ranked.claim_tokens,
            claim_token_logprobs=ranked.claim_token_logprobs,
            scorer_model=ranked.scorer_model,
        )
    return ProxyTraceResultModel.model_validate(
        {
            **base,
            "proxy_model": ranked.scorer_model,
            "confirmed": confirmed,
            "confirmation": CONFIRMED_LINE if confirmed else CONTRADICTED_LINE if local_scores else FALLBACK_LINE,
            "proxy": report,
        }
    )
