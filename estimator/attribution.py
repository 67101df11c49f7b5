"""Algorithm 4 — TraceClaim: hierarchical leave-one-out (layers, then sources), with span localisation
(Algorithm 5) running unconditionally and concurrently with the ablation rounds.

Every call goes through one per-trace ledger: at most ``params.concurrency`` in flight (an anyio
CapacityLimiter) and never more than the cost gate's plan, ``plan_calls(corpus, params).total``.
Repeated masks are answered from the judge's memo: round 2's all-present mask is round 1's s(1),
and a round-2 mask equal to a round-1 layer mask is not measured again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio

from prompts import versions

from .cost import plan_calls
from .diagnosis import attribution_level, claim_diagnosis, diagnose
from .judge import CallLedger, Judge, Mask
from .llm import LLM
from .params import DEFAULT_PARAMS, Params
from .result import (
    VERDICT_TEXT,
    CallAccount,
    LayerScore,
    ProgressEvent,
    Role,
    Round,
    SourceScore,
    SupportVerdict,
    TraceResult,
    Verdict,
)
from .support import check_support, support_body
from .tokens import ApproxTokenizer, Tokenizer
from .units import PROVENANCE_LAYER_ORDER, Corpus, Layer, Unit

__all__ = ["ProgressEvent", "decide_verdict", "describe_mask", "drop", "layer_mask", "role_of", "score_sources",
           "select_sources", "trace_claim"]

PROMPT_NAMES = ("judge_system", "judge_user", "support_evidence", "support_directive", "support_retry_nudge",
                "data_only_rule")
UNVERSIONED_WARNING = "current text; an edit since this turn can't be detected"


def drop(full: float, without: float) -> float:
    """Drop(full, without): 0 if either is NaN (no information), else full − without."""
    return 0.0 if math.isnan(full) or math.isnan(without) else full - without


def role_of(delta: float, tau: float) -> Role:
    if delta >= tau:
        return "grounds"
    if delta <= -tau:
        return "distractor"
    return "irrelevant"


def select_sources(units: Sequence[Unit], max_sources: int) -> tuple[tuple[Unit, ...], tuple[str, ...]]:
    """Algorithm 4a: layer-balanced round-robin by recency, capped; every omitted source named."""
    kept, omitted = _select(units, max_sources)
    return kept, tuple(u.label for u in omitted)


def _select(units: Sequence[Unit], max_sources: int) -> tuple[tuple[Unit, ...], tuple[Unit, ...]]:
    if len(units) <= max_sources:
        return tuple(sorted(units, key=lambda u: u.ordinal)), ()
    queues = {layer: sorted((u for u in units if u.layer == layer), key=lambda u: -u.ordinal)
              for layer in PROVENANCE_LAYER_ORDER}
    kept: list[Unit] = []
    while len(kept) < max_sources and any(queues.values()):
        for layer in PROVENANCE_LAYER_ORDER:
            if queues[layer] and len(kept) < max_sources:
                kept.append(queues[layer].pop(0))
    kept_ids = {u.id for u in kept}
    omitted = tuple(u for u in sorted(units, key=lambda u: u.ordinal) if u.id not in kept_ids)
    return tuple(sorted(kept, key=lambda u: u.ordinal)), omitted


@dataclass
class _Run:
    """The mutable state of one trace (private to this module)."""

    judge: Judge
    ledger: CallLedger
    layers: tuple[Layer, ...]
    on_progress: Callable[[ProgressEvent], None] | None
    scores: dict[Mask, float] = field(default_factory=dict)
    supports: dict[str, SupportVerdict] = field(default_factory=dict)

    def layer_drops(self, corpus: Corpus) -> dict[str, float]:
        full = self.scores.get(frozenset())
        if full is None:
            return {}
        return {layer.value: drop(full, self.scores[m]) for layer in self.layers
                if (m := layer_mask(corpus, layer)) in self.scores}

    def emit(self, stage: Round, message: str, corpus: Corpus) -> None:
        if self.on_progress is not None:
            planned = self.ledger.planned if self.ledger.planned is not None else 0
            event = ProgressEvent(self.ledger.made, planned, stage, message, self.layer_drops(corpus))
            self.on_progress(event)

    async def measure(self, masks: Mapping[str, Mask], stage: Round, corpus: Corpus) -> dict[str, float]:
        out: dict[str, float] = {}

        async def one(name: str, mask: Mask) -> None:
            out[name] = self.scores[mask] = await self.judge.score(mask)
            shown = "no information" if math.isnan(out[name]) else f"{out[name]:.2f}"
            self.emit(stage, f"s({name}) = {shown}", corpus)

        async with anyio.create_task_group() as tg:
            for name, mask in masks.items():
                tg.start_soon(one, name, mask)
        return out


def layer_mask(corpus: Corpus, layer: Layer) -> Mask:
    return frozenset(u.id for u in corpus.in_layer(layer))


async def trace_claim(llm: LLM, claim: str, query: str, corpus: Corpus, *, params: Params = DEFAULT_PARAMS,
                      tokenizer: Tokenizer | None = None,
                      on_progress: Callable[[ProgressEvent], None] | None = None,
                      dedupe: bool = True) -> TraceResult:
    """Algorithm 4 for one claim. ``dedupe=False`` disables the per-trace memo (for measurement only)."""
    if not corpus.units:
        raise ValueError("the corpus has no sources: nothing in this turn's context can be traced")
    tok = tokenizer or ApproxTokenizer()
    ledger = CallLedger(planned=plan_calls(corpus, params).total, concurrency=params.concurrency)
    judge = Judge(llm, claim, query, corpus, ledger, params=params, tokenizer=tok, dedupe=dedupe)
    run = _Run(judge, ledger, corpus.layers_present(), on_progress)
    targets, span_omitted = _select(corpus.units, params.max_sources)
    bodies = {u.id: support_body(u, params=params, tokenizer=tok) for u in targets}  # cut once, not per call
    ablation: list[_Ablation] = []

    async def spans() -> None:
        async def one(unit: Unit) -> None:
            run.supports[unit.id] = await check_support(llm, claim, unit, params=params, tokenizer=tok,
                                                        ledger=ledger, body=bodies[unit.id][0])
            run.emit("spans", f"span check of {unit.id}: {run.supports[unit.id].verdict}", corpus)

        async with anyio.create_task_group() as tg:
            for unit in targets:
                tg.start_soon(one, unit)

    async def rounds() -> None:
        ablation.append(await _ablate(run, corpus, params))

    async with anyio.create_task_group() as tg:  # both start at t=0; spans never wait for ablation
        tg.start_soon(rounds)
        tg.start_soon(spans)
    cut_for_spans = tuple(unit_id for unit_id, (_, cut) in bodies.items() if cut)
    return _assemble(run, corpus, params, tok, claim, llm.model, ablation[0], span_omitted, cut_for_spans)


@dataclass(frozen=True)
class _Ablation:
    s1: float
    s0: float
    layers: tuple[LayerScore, ...]
    contributing: tuple[Layer, ...]
    tested: tuple[Unit, ...] = ()
    omitted: tuple[Unit, ...] = ()
    s2: Mapping[str, float] = field(default_factory=dict)


async def _ablate(run: _Run, corpus: Corpus, params: Params) -> _Ablation:
    # ---- round 1: which LAYER ----
    masks1: dict[str, Mask] = {"1": frozenset(), "0": frozenset(u.id for u in corpus.units)}
    masks1.update({f"1-{layer.value}": layer_mask(corpus, layer) for layer in run.layers})
    s = await run.measure(masks1, "round1", corpus)
    s1, s0 = s["1"], s["0"]
    layer_scores = []
    for layer in run.layers:
        without = s[f"1-{layer.value}"]
        delta = drop(s1, without)
        layer_scores.append(LayerScore(layer, delta, role_of(delta, params.tau), without,
                                       math.isnan(s1) or math.isnan(without)))
    ranked = sorted((ls for ls in layer_scores if ls.role in ("grounds", "distractor")),
                    key=lambda ls: -abs(ls.delta))  # stable: display order breaks ties
    contributing = tuple(ls.layer for ls in ranked)
    if not contributing:
        return _Ablation(s1, s0, tuple(layer_scores), contributing)
    # ---- round 2: which SOURCE, within contributing layers only ----
    candidates = [u for u in corpus.units if u.layer in contributing] or list(corpus.units)
    tested, omitted = _select(candidates, params.max_sources)
    masks2: dict[str, Mask] = {"1": frozenset(), "1-candidates": frozenset(u.id for u in tested)}
    masks2.update({f"1-{u.id}": frozenset({u.id}) for u in tested})
    s2 = await run.measure(masks2, "round2", corpus)
    return _Ablation(s1, s0, tuple(layer_scores), contributing, tested, omitted, s2)


def decide_verdict(gamma: float, contributing: tuple[Layer, ...], tau_gamma: float, *,
                   unmeasured: bool = False) -> Verdict:
    """``unmeasured``: a layer's removal gave no information. Then no contributing layer does not show
    the claim is carried by several layers (the unmeasured one may carry it alone): no information."""
    if math.isnan(gamma):
        return "no_information"
    if gamma < tau_gamma:
        return "internal_knowledge"
    if contributing:
        return "attributed"
    return "no_information" if unmeasured else "redundant"


def _skipped_reason(verdict: Verdict, gamma: float, params: Params) -> str:
    head = f"Round 2 skipped: no layer's removal moved the score by τ = {params.tau:.2f} or more. "
    if verdict == "redundant":
        return head + (f"Removing everything changed the answer (Γ = {gamma:.2f}) but removing any one "
                       "layer did not: each layer carries this claim independently, so no single layer is "
                       "solely responsible. Per-source scores would read zero too; the quotes are the answer "
                       "here.")
    if verdict == "internal_knowledge":
        return head + (f"With Γ = {gamma:.2f} < τ_Γ = {params.tau_gamma:.2f} the claim survives the removal "
                       "of the whole context: there is no layer to search within.")
    if not math.isnan(gamma):
        return head + (f"Removing everything changed the answer (Γ = {gamma:.2f}), but the removal of a layer "
                       "could not be measured, so whether one layer or several carry the claim is unknown.")
    return head + "No drop could be measured (no information with every source present or with none)."


def describe_mask(mask: Mask, corpus: Corpus, layers: tuple[Layer, ...] = PROVENANCE_LAYER_ORDER) -> str:
    if not mask:
        return "with every source present"
    if len(mask) == len(corpus.units):
        return "with no sources"
    for layer in layers:
        if mask == layer_mask(corpus, layer):
            return f"without the {layer.value} layer"
    if len(mask) == 1:
        unit = corpus.by_id(next(iter(mask)))
        return f"without {unit.id} ({unit.label})"
    return f"without the {len(mask)} round-2 candidates"


def _warnings(run: _Run, corpus: Corpus, params: Params, tok: Tokenizer, cut_for_spans: tuple[str, ...],
              omitted: tuple[str, ...], verdict: Verdict) -> list[str]:
    out = [f"{u.id} ({u.label}): {UNVERSIONED_WARNING}" for u in corpus.units if u.unversioned]
    for unit_id in run.judge.truncated:
        unit = corpus.by_id(unit_id)
        out.append(f"{unit.id} ({unit.label}) is {tok.count(unit.text):,} tokens, larger than the "
                   f"{params.source_token_cap}-token scoring window: only its first part is scored, so a "
                   "claim grounded later in it will read as ungrounded.")
    for unit in (corpus.by_id(unit_id) for unit_id in cut_for_spans):
        out.append(f"{unit.id} ({unit.label}) is cut to {params.support_token_cap} tokens for the span "
                   "check: a span later in it cannot be quoted.")
    out += [f"Attachment {name!r} was not kept, so it cannot be scored." for name in corpus.unscorable]
    out += [f"Tool call {x.label} is not a source: {x.reason}." for x in corpus.excluded]
    if omitted:
        out.append(f"More sources than MAX_SOURCES={params.max_sources}: not tested individually: "
                   + "; ".join(omitted) + ".")
    for failure in run.judge.failures:
        out.append(f"No information {describe_mask(failure.mask, corpus, run.layers)}: {failure.reason}. It is "
                   "not a score: a drop involving it reads 0 (disclosed, not measured).")
    if verdict == "no_information" and math.isnan(run.scores.get(frozenset(), math.nan) - run.scores.get(
            frozenset(u.id for u in corpus.units), math.nan)):
        out.append("Γ is unknown, so whether the claim is internal knowledge cannot be decided.")
    elif verdict == "no_information":
        out.append("No layer's removal moved the score, but a layer's removal gave no information: whether one "
                   "layer or several carry the claim cannot be decided.")
    for unit_id, support in run.supports.items():
        if support.no_information:
            out.append(f"No information from the span check of {unit_id} "
                       f"({corpus.by_id(unit_id).label}): {support.reason.removeprefix('no information: ')}.")
    if run.ledger.refused:
        out.append(f"{run.ledger.refused} call(s) refused: the plan of {run.ledger.planned} calls "
                   "was reached.")
    return out


def score_sources(corpus: Corpus, verdict: Verdict, contributing: tuple[Layer, ...], tested_ids: tuple[str, ...],
                  s2: Mapping[str, float], supports: Mapping[str, SupportVerdict], tau: float,
                  ) -> tuple[SourceScore, ...]:
    """Every measured source, in ordinal order: its round-2 drop and role (when tested), its span verdict and
    its §9 diagnosis. Shared by the judged and the log-probability estimators (only τ differs)."""
    tested = set(tested_ids)
    overall = claim_diagnosis(verdict, [supports.get(u.id) for u in corpus.units if u.id in supports])
    out: list[SourceScore] = []
    for unit in sorted(corpus.units, key=lambda u: u.ordinal):
        if unit.id not in tested and unit.id not in supports:
            continue
        delta: float | None = None
        role: Role | None = None
        without: float | None = None
        if unit.id in tested:
            without = s2[f"1-{unit.id}"]
            delta = drop(s2["1"], without)
            role = role_of(delta, tau)
        support = supports.get(unit.id)
        level = attribution_level(verdict=verdict, role=role, layer_contributes=unit.layer in contributing)
        diagnosis = diagnose(level, support)
        if overall is not None and support is not None and support.verdict == "silent":
            diagnosis = overall
        missing = without is not None and (math.isnan(without) or math.isnan(s2["1"]))
        out.append(SourceScore(unit.id, unit.layer, unit.label, unit.kind, delta, role, support,
                               diagnosis, without, missing))
    return tuple(out)


def _assemble(run: _Run, corpus: Corpus, params: Params, tok: Tokenizer, claim: str, model: str,
              ab: _Ablation, span_omitted: tuple[Unit, ...], cut_for_spans: tuple[str, ...]) -> TraceResult:
    gamma = ab.s1 - ab.s0
    verdict = decide_verdict(gamma, ab.contributing, params.tau_gamma,
                             unmeasured=any(ls.no_information for ls in ab.layers))
    sources = score_sources(corpus, verdict, ab.contributing, tuple(u.id for u in ab.tested), ab.s2,
                            run.supports, params.tau)
    overall = claim_diagnosis(verdict, [run.supports.get(u.id) for u in corpus.units if u.id in run.supports])
    left_out = {u.id for u in (*ab.omitted, *span_omitted)}  # union by id: two sources may share a label
    omitted = tuple(u.label for u in corpus.units if u.id in left_out)
    notes: list[str] = []
    if ab.tested:
        notes.append(f"round 2: s(1 ⊖ candidates) = {ab.s2['1-candidates']:.2f} over "
                     f"{len(ab.tested)} candidate(s) in {', '.join(x.value for x in ab.contributing)}")
    ledger = run.ledger
    return TraceResult(
        gamma=gamma, s_all=ab.s1, s_none=ab.s0, verdict=verdict, verdict_text=VERDICT_TEXT[verdict],
        layers=ab.layers, sources=tuple(sources), omitted=omitted, unscorable=corpus.unscorable,
        round2_skipped_reason=None if ab.contributing else _skipped_reason(verdict, gamma, params),
        warnings=tuple(_warnings(run, corpus, params, tok, cut_for_spans, omitted, verdict)),
        calls=CallAccount(planned=ledger.planned or 0, made=ledger.made, saved=ledger.saved,
                          cached=ledger.cached, failed=ledger.failed, failed_billed=ledger.failed_billed),
        usage=ledger.usage, cost_usd=ledger.cost_usd, prompt_versions=versions(*PROMPT_NAMES),
        params=params.model_dump(), model=model, corpus_digest=corpus.digest, diagnosis=overall,
        contributing_layers=ab.contributing, claim=claim, notes=tuple(notes),
    )
