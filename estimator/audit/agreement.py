"""Agreement between two traces of the same claim (``--estimator both``): the judged digit and the
log-probability. Same verdict, same top layer, same top source, and the Spearman rank correlation of
the per-source drops over the sources both rounds 2 tested."""

from __future__ import annotations

import math
from collections.abc import Sequence

from estimator.results.models import AgreementModel, AgreementSummaryModel, TraceResultModel

__all__ = ["agreement", "spearman", "top_layer", "top_source"]


def _ranks(values: Sequence[float]) -> list[float]:
    """Average ranks (1-based), ties sharing the mean of their positions."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's ρ (Pearson on average ranks); None with fewer than two pairs or a constant side."""
    if len(a) != len(b):
        raise ValueError("spearman needs two sequences of the same length")
    if len(a) < 2:
        return None
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    if va == 0 or vb == 0:
        return None
    return cov / math.sqrt(va * vb)


def top_layer(result: TraceResultModel) -> str | None:
    """The contributing layer with the largest |Δ_L|, or None when no layer contributes."""
    return result.contributing_layers[0].value if result.contributing_layers else None


def top_source(result: TraceResultModel) -> str | None:
    """The tested source with the largest positive drop that grounds the claim, or None."""
    grounding = [s for s in result.sources if s.delta is not None and s.role == "grounds" and not math.isnan(s.delta)]
    if not grounding:
        return None
    return max(grounding, key=lambda s: s.delta if s.delta is not None else -math.inf).source_id


def _summary(result: TraceResultModel) -> AgreementSummaryModel:
    return AgreementSummaryModel(verdict=result.verdict, top_layer=top_layer(result), top_source=top_source(result))


def agreement(judged: TraceResultModel, logprob: TraceResultModel) -> AgreementModel:
    a = {s.source_id: s.delta for s in judged.sources if s.delta is not None and not math.isnan(s.delta)}
    b = {s.source_id: s.delta for s in logprob.sources if s.delta is not None and not math.isnan(s.delta)}
    common = tuple(sid for sid in a if sid in b)
    rho = spearman([a[s] for s in common], [b[s] for s in common])
    return AgreementModel(
        same_verdict=judged.verdict == logprob.verdict,
        same_top_layer=top_layer(judged) == top_layer(logprob),
        same_top_source=top_source(judged) == top_source(logprob),
        spearman=rho,
        compared_sources=common,
        judged=_summary(judged),
        logprob=_summary(logprob),
    )
