"""The hosted judge confirms the proxy's ranking in a few calls, and says when it disagrees.

What it measures (digits 1–9, the judged scalar ``measure.JudgedDigit``): s(1) and s(0) for Γ; s(1 − top
layer) and s(1 − top source) for the proxy's top layer and top source; and the span check of the top
source(s) (Algorithm 5). All are sent at once. Every one of them is also a measurement the full judged
search makes, so after a fallback it is answered from these (``Seeded``): the fallback pays only for what
the confirmation did not measure.

The rule (``disagreements``), with the judged thresholds τ and τ_Γ of ``Params``:

* the verdict's side of τ_Γ: the proxy's *internal knowledge* needs the judge's Γ < τ_Γ, any other verdict
  of the proxy needs Γ ≥ τ_Γ;
* *attributed*: the judge gives the top layer the proxy's role for it (|Δ| ≥ τ, same sign), and the top
  source (when it grounds the claim for the proxy) a drop ≥ τ; and the share of Γ the top source carries
  for the judge is at most ``share_margin`` below its share for the proxy;
* *attributed* where no single source grounds the claim for the proxy: the judge measures its top source
  all the same (the one that carries the claim alone with the highest score, else the likeliest one of the
  top layer, ``_likeliest``), and a drop ≥ τ there is a source the proxy did not single out;
* *redundant*: no single layer's removal moves the judge by τ — the judge measures every layer's removal
  (all of round 1: checking only the proxy's top layer would let a layer the proxy got wrong pass unseen);
* a measurement without information, or a proxy without a verdict, cannot confirm anything.

Any reason is a disagreement, and the full judged search runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from estimator.audit.agreement import top_source
from estimator.corpus.units import Corpus, Layer
from estimator.judge import Mask
from estimator.ledger import CallLedger, labelled
from estimator.loo.measure import JudgedDigit, Measured, measure_repeated, replayed, sample_index
from estimator.loo.rounds import drop, layer_mask, mask_words, role_of
from estimator.params import Params
from estimator.proxy.prefix import BlockOrder
from estimator.results.models import SourceScoreModel, SupportVerdictModel, TraceResultModel
from estimator.seams.llm import LLM
from estimator.spans.support import check_support, support_body
from estimator.target import SENTENCE, Wording
from estimator.tokens import Tokenizer

__all__ = [
    "DEFAULT_PROXY_PARAMS",
    "Confirmation",
    "ProxyParams",
    "Seeded",
    "Targets",
    "confirm",
    "disagreements",
    "targets",
]


class ProxyParams(BaseModel):
    """The proxy-first estimator's settings (see the module docstring for the rule)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    share_margin: float = Field(
        0.5,
        ge=0,
        le=1,
        description="How much smaller a share of Γ the hosted judge may see in the proxy's top source than the "
        "proxy does before they disagree. The judge's digits are coarse — one digit of an 8-digit Γ is 0.125 "
        "of it, and a judge often keeps a claim at 5–7 of 9 with its source gone — so a share half the proxy's "
        "still names the same source; a judge that finds the source carries far less of the claim than the "
        "proxy thinks (a share smaller by more than half of Γ) is a different ranking, and the search widens.",
    )
    span_sources: int = Field(
        1,
        ge=1,
        le=4,
        description="The proxy's top sources whose span check the hosted judge makes (each may be retried once).",
    )
    order: BlockOrder = Field(
        "size",
        description="Source order in the proxy's prompts: size (grouped by layer, "
        "largest first: the most prefix reuse) or ordinal (as in the turn).",
    )
    local_tokens_per_second: float = Field(
        55.0,
        gt=0,
        le=100_000,
        description="Prompt tokens per second of the local scorer, for the quote's seconds: Qwen2.5-Coder-1.5B "
        "Q4_K_M in-process evaluates 55–65 on an idle 2-core CPU and about half that when the CPU is shared "
        "(bench/proxy/speed.py); a faster machine or the 0.5B model makes the estimate high.",
    )


DEFAULT_PROXY_PARAMS = ProxyParams()
Stage = Literal["gamma", "round1", "round2"]


@dataclass(frozen=True)
class Targets:
    """What the hosted judge is asked about: the proxy's top layer and source, and the span-checked ones.
    ``source_grounds``: the proxy found the top source grounds the claim; ``measured``: the judge measures
    s(1 − top source) (a grounding source, or the likeliest one of a layer where the proxy found none)."""

    layer: Layer | None
    source: str | None
    source_grounds: bool
    span: tuple[str, ...]
    measured: bool = False
    every_layer: bool = False
    """Under a *redundant* ranking: the judge measures the removal of every layer, not only the top one."""


def _likeliest(proxy: TraceResultModel, layer: Layer) -> str | None:
    """In a grounding layer where the proxy found no source that grounds or carries the claim alone: the
    source that keeps the most of it alone (else whose removal moves it most)."""

    def key(score: SourceScoreModel) -> tuple[float, float]:
        alone = score.alone if score.alone is not None and not math.isnan(score.alone) else -math.inf
        delta = score.delta if score.delta is not None and not math.isnan(score.delta) else -math.inf
        return alone, delta

    tested = [s for s in proxy.sources if s.layer == layer and max(key(s)) > -math.inf]
    return max(tested, key=key).source_id if tested else None


def targets(proxy: TraceResultModel, corpus: Corpus, pp: ProxyParams) -> Targets:
    """The proxy's top layer (its first contributing layer; under *redundant*, the layer it found carrying
    the claim alone with the largest drop), its top source (the largest grounding drop, else the source it
    found carrying the claim alone with the highest score, else under *attributed* the likeliest source of
    the top layer), and the span-check targets."""
    if proxy.verdict in ("internal_knowledge", "no_information"):
        return Targets(None, None, False, ())
    layer: Layer | None = proxy.contributing_layers[0] if proxy.contributing_layers else None
    if layer is None and proxy.layers:
        carriers = [x for x in proxy.layers if x.role == "redundant"] or list(proxy.layers)
        layer = max(carriers, key=lambda x: -math.inf if math.isnan(x.delta) else x.delta).layer
    grounding = top_source(proxy)
    ranked = sorted(
        (
            s
            for s in proxy.sources
            if s.role == "grounds" and s.delta is not None and not math.isnan(s.delta) and s.delta > 0
        ),
        key=lambda s: -(s.delta or 0.0),
    )
    alone = sorted(
        (s for s in proxy.sources if s.role == "redundant" and s.alone is not None and not math.isnan(s.alone)),
        key=lambda s: -(s.alone or 0.0),
    )
    span = tuple(s.source_id for s in (*ranked, *alone))[: pp.span_sources]
    likeliest = None
    if grounding is None and not alone and layer is not None and proxy.verdict == "attributed":
        likeliest = _likeliest(proxy, layer)
    source = grounding or (alone[0].source_id if alone else likeliest)
    if source is not None and source not in span:
        span = (source, *span[: pp.span_sources - 1])
    measured = source is not None and proxy.verdict == "attributed"  # grounds, carries it alone, or likeliest
    return Targets(
        layer, source, grounding is not None, span, measured=measured, every_layer=proxy.verdict == "redundant"
    )


@dataclass
class Confirmation:
    """The hosted judge's measurements of the proxy's targets."""

    targets: Targets
    scores: dict[Mask, Measured] = field(default_factory=dict)
    supports: dict[str, SupportVerdictModel] = field(default_factory=dict)

    def value(self, mask: Mask) -> float:
        measured = self.scores.get(mask)
        return math.nan if measured is None else measured.value


async def confirm(
    llm: LLM,
    ledger: CallLedger,
    claim: str,
    query: str,
    corpus: Corpus,
    texts: Mapping[str, str],
    tg: Targets,
    *,
    params: Params,
    tokenizer: Tokenizer,
    wording: Wording = SENTENCE,
) -> Confirmation:
    """s(1), s(0), s(1 − top layer), s(1 − top source) and the span checks, all at once, on ``ledger``."""
    judge = JudgedDigit(llm, ledger, claim, query, corpus, texts, wording=wording)
    masks: dict[Mask, Stage] = {frozenset(): "gamma", frozenset(u.id for u in corpus.units): "gamma"}
    for layer in corpus.layers_present() if tg.every_layer else (tg.layer,) if tg.layer is not None else ():
        masks.setdefault(layer_mask(corpus, layer), "round1")
    if tg.source is not None and tg.measured:
        masks.setdefault(frozenset({tg.source}), "round2")
    out = Confirmation(tg)

    async def measure(mask: Mask, stage: Stage) -> None:
        with labelled(stage, mask_words(mask, corpus)):
            out.scores[mask] = await measure_repeated(judge, mask, params.repeats)  # k samples, as the search takes

    async def span(unit_id: str) -> None:
        unit = corpus.by_id(unit_id)
        body = support_body(unit, params=params, tokenizer=tokenizer)[0]
        with labelled("spans", f"span check of {unit_id}"):
            out.supports[unit_id] = await check_support(
                llm, claim, unit, params=params, tokenizer=tokenizer, ledger=ledger, body=body, wording=wording
            )

    async with anyio.create_task_group() as group:
        for mask, stage in masks.items():
            group.start_soon(measure, mask, stage)
        for unit_id in tg.span:
            group.start_soon(span, unit_id)
    return out


def _share(delta: float, gamma: float) -> float:
    return 0.0 if gamma <= 0 else min(1.0, max(0.0, delta / gamma))


def disagreements(
    proxy: TraceResultModel, conf: Confirmation, corpus: Corpus, params: Params, pp: ProxyParams
) -> list[str]:
    """Why the hosted judge's measurements disagree with the proxy's ranking (empty: confirmed)."""
    tg = conf.targets
    if proxy.verdict == "no_information":
        return ["the proxy's ranking gave no information, so there is nothing to confirm"]
    s1, s0 = conf.value(frozenset()), conf.value(frozenset(u.id for u in corpus.units))
    if math.isnan(s1) or math.isnan(s0):
        return ["the hosted judge gave no information for s(1) or s(0), so Γ cannot be confirmed"]
    gamma = s1 - s0
    if proxy.verdict == "internal_knowledge":
        return (
            []
            if gamma < params.tau_gamma
            else [
                f"the hosted judge's Γ = {gamma:.2f} ≥ τ_Γ = {params.tau_gamma:g}: the context matters to it, while "
                "the proxy found the claim survives without it"
            ]
        )
    out: list[str] = []
    if gamma < params.tau_gamma:
        out.append(
            f"the hosted judge's Γ = {gamma:.2f} < τ_Γ = {params.tau_gamma:g}: internal knowledge to it, "
            f"while the proxy's verdict is {proxy.verdict}"
        )
    if tg.layer is not None:
        without = conf.value(layer_mask(corpus, tg.layer))
        delta = drop(s1, without)
        proxy_role = next((x.role for x in proxy.layers if x.layer == tg.layer), None)
        if math.isnan(without):
            out.append(f"the hosted judge gave no information without the {tg.layer.value} layer")
        elif proxy.verdict == "redundant" and role_of(delta, params.tau) != "irrelevant":
            out.append(
                f"removing the {tg.layer.value} layer moves the hosted judge by {delta:+.2f} (|Δ| ≥ τ = "
                f"{params.tau:g}), while the proxy found no single layer matters"
            )
        elif proxy.verdict == "attributed" and role_of(delta, params.tau) != proxy_role:
            out.append(
                f"removing the {tg.layer.value} layer moves the hosted judge by {delta:+.2f}: "
                f"{role_of(delta, params.tau)} to it, {proxy_role} to the proxy"
            )
    if proxy.verdict == "redundant" and tg.every_layer:
        for layer in corpus.layers_present():
            if layer == tg.layer:
                continue  # said above
            delta = drop(s1, conf.value(layer_mask(corpus, layer)))
            if math.isnan(delta):
                out.append(f"the hosted judge gave no information without the {layer.value} layer")
            elif role_of(delta, params.tau) != "irrelevant":
                out.append(
                    f"removing the {layer.value} layer moves the hosted judge by {delta:+.2f} (|Δ| ≥ τ = "
                    f"{params.tau:g}), while the proxy found no single layer matters"
                )
    if proxy.verdict == "attributed" and tg.source is not None and tg.source_grounds:
        without = conf.value(frozenset({tg.source}))
        delta = drop(s1, without)
        mine = proxy.source(tg.source).delta
        if math.isnan(without):
            out.append(f"the hosted judge gave no information without {tg.source}")
        elif delta < params.tau:
            out.append(
                f"removing {tg.source} moves the hosted judge by {delta:+.2f} < τ = {params.tau:g}, while "
                "it is the proxy's top source"
            )
        elif mine is not None and _share(mine, proxy.gamma) - _share(delta, gamma) > pp.share_margin:
            out.append(
                f"{tg.source} carries {_share(delta, gamma):.0%} of Γ for the hosted judge and "
                f"{_share(mine, proxy.gamma):.0%} for the proxy: more than the margin of "
                f"{pp.share_margin:.0%} apart"
            )
    elif proxy.verdict == "attributed" and tg.source is not None and tg.measured:
        delta = drop(s1, conf.value(frozenset({tg.source})))
        if delta >= params.tau:
            out.append(
                f"removing {tg.source} moves the hosted judge by {delta:+.2f} ≥ τ = {params.tau:g}: it "
                "grounds the claim for the judge, while for the proxy no single source does (removing "
                "one changes less than τ)"
            )
    return out


@dataclass
class Seeded:
    """The judged scalar, with the confirmation's measurements answered again without a call (``saved``):
    the fallback's rounds never pay twice for a mask."""

    inner: JudgedDigit
    known: Mapping[Mask, Measured]
    name: str = "judged"
    unit: str = ""

    async def measure(self, mask: Mask) -> Measured:
        if mask in self.known:
            if sample_index() == 0:  # one measurement saved, however many samples it took
                self.inner.ledger.note_saved()
            return replayed(self.known[mask])  # each sample as the confirmation took it
        return await self.inner.measure(mask)

    def thresholds(self, gamma: float, params: Params) -> tuple[float, float]:
        return self.inner.thresholds(gamma, params)

    def describe(self, tau: float, tau_gamma: float) -> list[str]:
        return self.inner.describe(tau, tau_gamma)

    def extra_params(self) -> dict[str, Any]:
        return self.inner.extra_params()

    def finish(self, result: TraceResultModel) -> TraceResultModel:
        return self.inner.finish(result)
