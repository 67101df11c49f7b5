"""Algorithm 4 — the one hierarchical leave-one-out driver, over any scalar (``measure.Scalar``).

Round 1 removes each layer; round 2 removes each source of the contributing layers (both capped by
Algorithm 4a); redundancy resolution asks the complementary question where leave-one-out reads zero
(``redundancy.py``); span localisation (Algorithm 5) runs unconditionally and concurrently. The memo,
progress events, warnings and assembly (``assembly.py``) exist here once: the judged digit, the
expected digit and the log-probability differ only in how they measure a mask.

Every call goes through one ledger (``ledger.CallLedger``): the concurrency cap and the plan's ceiling.
A mask equal to one measured before (round 2's all-present mask is round 1's s(1); a one-source layer's
"keep only this source" mask is its "keep only this layer" mask) is answered from the memo.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio

from estimator.corpus.units import PROVENANCE_LAYER_ORDER, Corpus, Layer, Unit
from estimator.cost import CallPlan
from estimator.judge import Mask, cut_to_budget
from estimator.ledger import CallLedger, CallStage, labelled
from estimator.loo.measure import Scalar, measure_repeated
from estimator.params import Params
from estimator.results.models import LayerScoreModel, SupportVerdictModel
from estimator.results.trace import ProgressEvent, Role, Round
from estimator.tokens import Tokenizer

__all__ = [
    "Ablation",
    "LooRun",
    "Redundancy",
    "drop",
    "layer_mask",
    "mask_words",
    "plan_redundancy",
    "role_of",
    "select_units",
    "windowed_texts",
]


def drop(full: float, without: float) -> float:
    """Drop(full, without): 0 if either is NaN (no information), else full − without."""
    return 0.0 if math.isnan(full) or math.isnan(without) else full - without


def role_of(delta: float, tau: float) -> Role:
    if delta >= tau:
        return "grounds"
    if delta <= -tau:
        return "distractor"
    return "irrelevant"


def layer_mask(corpus: Corpus, layer: Layer) -> Mask:
    return frozenset(u.id for u in corpus.in_layer(layer))


def mask_words(mask: Mask, corpus: Corpus) -> str:
    """A mask in words, for a call's record: "all sources", "no sources", "without layer tools", "only layer
    tools", "without s2", "only s1", "only s1 of tools", else "without s1, s3"."""
    everything = frozenset(u.id for u in corpus.units)
    if not mask:
        return "all sources"
    if mask == everything:
        return "no sources"
    layers = corpus.layers_present()
    for layer in layers:  # before "only layer": with two layers, removing one keeps only the other
        if mask == layer_mask(corpus, layer):
            return f"without layer {layer.value}"
    for layer in layers:
        if mask == everything - layer_mask(corpus, layer):
            return f"only layer {layer.value}"
    ordered = [u.id for u in sorted(corpus.units, key=lambda u: u.ordinal)]
    kept = [uid for uid in ordered if uid not in mask]
    if len(mask) == 1:
        return f"without {next(iter(mask))}"
    if len(kept) == 1:
        return f"only {kept[0]}"
    for layer in layers:
        whole = layer_mask(corpus, layer)
        if mask < whole and len(whole - mask) == 1:
            return f"only {next(iter(whole - mask))} of {layer.value}"
    return "without " + ", ".join(uid for uid in ordered if uid in mask)


def select_units(units: Sequence[Unit], max_sources: int) -> tuple[tuple[Unit, ...], tuple[Unit, ...]]:
    """Algorithm 4a: layer-balanced round-robin by recency, capped; (kept, omitted), both in ordinal order."""
    if len(units) <= max_sources:
        return tuple(sorted(units, key=lambda u: u.ordinal)), ()
    queues = {
        layer: sorted((u for u in units if u.layer == layer), key=lambda u: -u.ordinal)
        for layer in PROVENANCE_LAYER_ORDER
    }
    kept: list[Unit] = []
    while len(kept) < max_sources and any(queues.values()):
        for layer in PROVENANCE_LAYER_ORDER:
            if queues[layer] and len(kept) < max_sources:
                kept.append(queues[layer].pop(0))
    kept_ids = {u.id for u in kept}
    omitted = tuple(u for u in sorted(units, key=lambda u: u.ordinal) if u.id not in kept_ids)
    return tuple(sorted(kept, key=lambda u: u.ordinal)), omitted


def windowed_texts(corpus: Corpus, params: Params, tok: Tokenizer) -> tuple[dict[str, str], tuple[str, ...]]:
    """Every source cut once to the scoring window, and the ids of those that were cut."""
    texts: dict[str, str] = {}
    cut: list[str] = []
    for unit in corpus.units:
        texts[unit.id], was_cut = cut_to_budget(unit.shown, params.source_token_cap, tok)
        if was_cut:
            cut.append(unit.id)
    return texts, tuple(cut)


@dataclass
class _Entry:
    done: anyio.Event
    value: float = math.nan


@dataclass(frozen=True)
class Failure:
    """A measurement that produced no information, and why (disclosed in the result)."""

    mask: Mask
    reason: str


@dataclass
class LooRun:
    """The mutable state of one trace: memo, scores (with each mask's samples under ``params.repeats`` > 1),
    failures, span verdicts, progress."""

    scalar: Scalar
    ledger: CallLedger
    corpus: Corpus
    params: Params
    on_progress: Callable[[ProgressEvent], None] | None = None
    dedupe: bool = True
    memo: dict[Mask, _Entry] = field(default_factory=dict)
    scores: dict[Mask, float] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    supports: dict[str, SupportVerdictModel] = field(default_factory=dict)
    samples: dict[Mask, tuple[float, ...]] = field(default_factory=dict)
    """Mask → each of its ``repeats`` samples (NaN: that sample gave no information); empty when repeats is 1."""

    def layer_drops(self) -> dict[str, float]:
        full = self.scores.get(frozenset())
        if full is None:
            return {}
        return {
            layer.value: drop(full, self.scores[m])
            for layer in self.corpus.layers_present()
            if (m := layer_mask(self.corpus, layer)) in self.scores
        }

    def emit(self, stage: Round, message: str) -> None:
        if self.on_progress is not None:
            planned = self.ledger.planned if self.ledger.planned is not None else 0
            self.on_progress(ProgressEvent(self.ledger.made, planned, stage, message, self.layer_drops()))

    async def score(self, mask: Mask) -> float:
        """s(mask), measured at most once per trace (unless ``dedupe`` is off, for measurement only): a memo hit
        reuses the same samples, it never takes new ones."""
        if self.dedupe:
            entry = self.memo.get(mask)
            if entry is not None:
                self.ledger.note_saved()
                await entry.done.wait()
                return entry.value
            entry = _Entry(anyio.Event())
            self.memo[mask] = entry
            try:
                entry.value = await self._measure(mask)
            finally:
                entry.done.set()
            return entry.value
        return await self._measure(mask)

    async def _measure(self, mask: Mask) -> float:
        """The scalar's measurement of ``mask``, ``params.repeats`` times: the median of the samples is the score."""
        measured = await measure_repeated(self.scalar, mask, self.params.repeats)
        if measured.failure is not None:
            self.failures.append(Failure(mask, measured.failure))
        self.scores[mask] = measured.value
        if measured.samples:
            self.samples[mask] = tuple(m.value for m in measured.samples)
        return measured.value

    def spread_words(self, mask: Mask) -> str:
        """A measured mask's samples in words, for progress ("" for a single sample)."""
        taken = self.samples.get(mask)
        known = [x for x in taken or () if not math.isnan(x)]
        if not taken or not known:
            return ""
        return f" (median of {len(taken)} samples, {min(known):.2f}–{max(known):.2f})"

    async def measure(self, masks: Mapping[str, Mask], stage: Round) -> dict[str, float]:
        out: dict[str, float] = {}

        async def one(name: str, mask: Mask) -> None:
            label: CallStage = "gamma" if stage == "round1" and name in ("1", "0") else stage
            with labelled(label, mask_words(mask, self.corpus)):  # the scalar's calls carry it
                out[name] = await self.score(mask)
            shown = "no information" if math.isnan(out[name]) else f"{out[name]:.2f}{self.scalar.unit}"
            shown += self.spread_words(mask)
            self.emit(stage, f"s({name}) = {shown}")

        async with anyio.create_task_group() as tg:
            for name, mask in masks.items():
                tg.start_soon(one, name, mask)
        return out


@dataclass(frozen=True)
class Ablation:
    """What the rounds measured."""

    s1: float
    s0: float
    tau: float
    tau_gamma: float
    layers: tuple[LayerScoreModel, ...]
    contributing: tuple[Layer, ...]
    tested: tuple[Unit, ...] = ()
    omitted: tuple[Unit, ...] = ()
    s2: Mapping[str, float] = field(default_factory=dict)
    roles: Mapping[str, Role] = field(default_factory=dict)
    alone: Mapping[str, float] = field(default_factory=dict)
    """Source id → the scalar with only this source kept of its layer (redundancy resolution)."""
    layer_alone: Mapping[Layer, float] = field(default_factory=dict)
    """Layer → the scalar with only this layer kept (across-layer redundancy resolution)."""
    redundancy_skipped: str | None = None


async def round1(run: LooRun) -> Ablation:
    corpus, params = run.corpus, run.params
    layers = corpus.layers_present()
    masks: dict[str, Mask] = {"1": frozenset(), "0": frozenset(u.id for u in corpus.units)}
    masks.update({f"1-{layer.value}": layer_mask(corpus, layer) for layer in layers})
    s = await run.measure(masks, "round1")
    s1, s0 = s["1"], s["0"]
    tau, tau_gamma = run.scalar.thresholds(s1 - s0, params)
    scores = []
    for layer in layers:
        without = s[f"1-{layer.value}"]
        delta = drop(s1, without)
        scores.append(
            LayerScoreModel(
                layer=layer,
                delta=delta,
                role=role_of(delta, tau),
                s_without=without,
                no_information=math.isnan(s1) or math.isnan(without),
            )
        )
    ranked = sorted((x for x in scores if x.role in ("grounds", "distractor")), key=lambda x: -abs(x.delta))
    return Ablation(s1, s0, tau, tau_gamma, tuple(scores), tuple(x.layer for x in ranked))


async def round2(run: LooRun, ab: Ablation) -> Ablation:
    corpus = run.corpus
    candidates = [u for u in corpus.units if u.layer in ab.contributing] or list(corpus.units)
    tested, omitted = select_units(candidates, run.params.max_sources)
    masks: dict[str, Mask] = {"1": frozenset(), "1-candidates": frozenset(u.id for u in tested)}
    masks.update({f"1-{u.id}": frozenset({u.id}) for u in tested})
    s2 = await run.measure(masks, "round2")
    roles = {u.id: role_of(drop(s2["1"], s2[f"1-{u.id}"]), ab.tau) for u in tested}
    return Ablation(ab.s1, ab.s0, ab.tau, ab.tau_gamma, ab.layers, ab.contributing, tested, omitted, s2, roles)


@dataclass(frozen=True)
class Redundancy:
    """How much redundancy resolution a trace may spend: ``within`` sources kept alone at most inside
    grounding layers (None: no cap, 0: none), and whether the *redundant* verdict is resolved ``across``
    layers (it fits in round 2's share of the plan). ``Redundancy(0, False)`` is the seed's algorithm
    (for measurement)."""

    within: int | None = None
    across: bool = True


def plan_redundancy(plan: CallPlan, resolve: bool | None = None) -> Redundancy:
    """What the plan allows (``resolve`` None), the seed's algorithm (False), or no cap (True)."""
    if resolve is None:
        return Redundancy(plan.redundancy)
    return Redundancy() if resolve else Redundancy(0, False)
