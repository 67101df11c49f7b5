"""The result of a proxy-first trace: the proxy's ranking confirmed by the hosted judge, or the full judged
search after a disagreement — with both rankings where both were measured, and the line that says which.

Confirmed, the scores are the proxy's log-probabilities (nats) and the span checks are the hosted judge's
for the top source(s); after a fallback, the scores are the judge's digits of the full search and the
proxy's ranking is kept beside them. ``calls`` counts hosted model calls (``made``, …) and, as ``scored``,
the local scoring passes. Its shape, ``ProxyTraceResultModel``, is the proxy variant of the stored trace
result (``results.models.TraceJobResult``), declared there with the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from estimator.corpus.units import Corpus
from estimator.loo.assembly import describe_mask
from estimator.loo.diagnosis import attribution_level, claim_diagnosis, diagnose
from estimator.proxy.confirm import Confirmation
from estimator.results.models import ProxyTraceResultModel, SourceScoreModel, SupportVerdictModel, TraceResultModel
from estimator.results.proxy import HostedCheckModel, RankedModel

__all__ = [
    "ProxyTraceResultModel",
    "hosted_check",
    "layer_ranking",
    "source_ranking",
    "with_supports",
]

NO_SPANS = "No span checks were made"


def _finite(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def source_ranking(result: TraceResultModel) -> list[RankedModel]:
    """Every tested source's drop, largest first (ties in ordinal order)."""
    tested = [s for s in result.sources if _finite(s.delta)]
    return [
        RankedModel(id=s.source_id, drop=s.delta, role=s.role) for s in sorted(tested, key=lambda s: -(s.delta or 0.0))
    ]


def layer_ranking(result: TraceResultModel) -> list[RankedModel]:
    """Every layer's drop, largest |drop| first."""
    return [
        RankedModel(id=x.layer.value, drop=x.delta, role=x.role)
        for x in sorted(result.layers, key=lambda x: -abs(x.delta) if _finite(x.delta) else math.inf)
    ]


def hosted_check(conf: Confirmation, corpus: Corpus) -> HostedCheckModel:
    tg = conf.targets
    s1, s0 = conf.value(frozenset()), conf.value(frozenset(u.id for u in corpus.units))
    layer_drop = source_drop = None
    if tg.layer is not None:
        layer_drop = s1 - conf.value(frozenset(u.id for u in corpus.in_layer(tg.layer)))
    if tg.source is not None and frozenset({tg.source}) in conf.scores:
        source_drop = s1 - conf.value(frozenset({tg.source}))
    return HostedCheckModel(
        s_all=s1,
        s_none=s0,
        gamma=s1 - s0,
        top_layer=None if tg.layer is None else tg.layer.value,
        top_layer_drop=layer_drop,
        top_source=tg.source,
        top_source_drop=source_drop,
        span_checked=list(conf.supports),
    )


def _with_support(
    result: TraceResultModel,
    score: SourceScoreModel,
    support: SupportVerdictModel,
    overall: str | None,
) -> SourceScoreModel:
    """One source with its span check and its §9 diagnosis, decided as ``assembly.score_sources`` does."""
    layer_role = next((x.role for x in result.layers if x.layer == score.layer), None)
    standing = score.role if score.role is not None or score.alone is None else "irrelevant"
    level = attribution_level(verdict=result.verdict, role=standing, layer_role=layer_role)
    diagnosis = None if level is None else diagnose(level, support)
    if overall is not None and support.verdict == "silent":
        diagnosis = overall
    return score.model_copy(update={"support": support, "diagnosis": diagnosis})


def with_supports(
    result: TraceResultModel, supports: Mapping[str, SupportVerdictModel], corpus: Corpus, conf: Confirmation
) -> TraceResultModel:
    """The proxy's result with the hosted judge's span checks of its top source(s) and their disclosures."""
    overall = claim_diagnosis(result.verdict, supports.values())
    sources = tuple(
        _with_support(result, s, supports[s.source_id], overall) if s.source_id in supports else s
        for s in result.sources
    )
    warnings = [w for w in result.warnings if not w.startswith(NO_SPANS)]
    if supports:
        warnings.append(
            f"Span checks were made for the proxy's top source(s) only ({', '.join(supports)}): the "
            "other sources were not span-checked."
        )
    else:
        warnings.append("No span checks were made: the proxy found no source to check.")
    for unit_id, support in supports.items():
        if support.no_information:
            warnings.append(
                f"No information from the span check of {unit_id} ({corpus.by_id(unit_id).label}): "
                f"{support.reason.removeprefix('no information: ')}."
            )
    layers = corpus.layers_present()
    for mask, measured in conf.scores.items():
        if measured.failure is not None:
            warnings.append(
                f"No information from the hosted judge {describe_mask(mask, corpus, layers)}: {measured.failure}."
            )
    return result.model_copy(
        update={
            "sources": sources,
            "warnings": tuple(warnings),
            "diagnosis": overall if overall is not None else result.diagnosis,
        }
    )
