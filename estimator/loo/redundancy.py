"""Redundancy, named and resolved: which sources (or layers) carry the claim *alone*?

Leave-one-out cannot separate sources that each carry a claim: removing one changes nothing because
the others still say it, so every drop reads zero. Where that happens the complementary question has
an answer — keep one at a time and see whether the claim survives:

* inside a layer: the layer grounds the claim (Δ_L ≥ τ) but no single source of it does. Keep one
  source of that layer at a time, the other layers intact. A source with which the score stays within
  τ of s(1) carries the claim alone: its role is ``redundant`` and ``alone`` is that score.
* across layers (the verdict *redundant*: Γ ≥ τ_Γ, no layer's removal matters): keep one layer at a
  time (every other layer removed); a layer that carries the claim alone is ``redundant``; then, inside
  each such layer, keep one of its sources alone (nothing else present).

Masks equal to one measured before come from the memo (a one-source layer costs nothing more).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from estimator.corpus.units import Corpus, Layer, Unit
from estimator.loo.rounds import Ablation, LooRun, layer_mask, select_units
from estimator.results.trace import Role, decide_verdict

__all__ = ["across_layers", "carries_alone", "explain", "needs_within", "within_layers"]


def carries_alone(s1: float, alone: float, tau: float) -> bool:
    """With only this kept, the claim's score stays within τ of s(1). NaN carries nothing (unmeasured)."""
    return not (math.isnan(s1) or math.isnan(alone)) and s1 - alone < tau


def needs_within(ab: Ablation) -> tuple[Layer, ...]:
    """Grounding layers of which at least two sources were tested and none grounds on its own."""
    out = []
    for score in ab.layers:
        if score.role != "grounds" or score.no_information:
            continue
        tested = [u for u in ab.tested if u.layer == score.layer]
        if len(tested) >= 2 and not any(ab.roles.get(u.id) == "grounds" for u in tested):
            out.append(score.layer)
    return tuple(out)


async def within_layers(run: LooRun, ab: Ablation, budget: int | None) -> Ablation:
    """Keep each tested source of a grounding layer alone (the other layers intact), at most ``budget``
    of them (None: all), chosen layer-balanced by recency (Algorithm 4a); the rest are named."""
    layers = needs_within(ab)
    if not layers:
        return ab
    candidates = [u for u in ab.tested if u.layer in layers]
    kept, left = select_units(candidates, len(candidates) if budget is None else budget)
    masks = {f"only {u.id}": layer_mask(run.corpus, u.layer) - {u.id} for u in kept}
    s = await run.measure(masks, "redundancy")
    alone = {u.id: s[f"only {u.id}"] for u in kept}
    roles: dict[str, Role] = dict(ab.roles)
    # a source whose own removal gave no information keeps that disclosure: its drop is unknown, so
    # "removing it changes nothing" is not established (its ``alone`` is still reported)
    unmeasured = {uid for uid in alone if math.isnan(ab.s2.get(f"1-{uid}", math.nan)) or math.isnan(ab.s2["1"])}
    # only a source whose removal changed nothing (|Δ| < τ) is redundant: "removing one changes nothing
    # because the others still say it". A distractor that also carries the claim alone keeps its role; the
    # contradiction is a disagreement of the judge's answers (``coherence``), not a word of the result.
    roles.update(
        {
            uid: "redundant"
            for uid, value in alone.items()
            if uid not in unmeasured and roles.get(uid) == "irrelevant" and carries_alone(ab.s1, value, ab.tau)
        }
    )
    skipped = None
    if left:
        skipped = (
            f"which of {', '.join(u.id for u in left)} carry the claim alone was not measured: the plan "
            f"for this corpus leaves room for {len(kept)} of {len(candidates)} (MAX_CALLS)"
        )
    return replace(ab, alone=alone, roles=roles, redundancy_skipped=skipped)


async def across_layers(run: LooRun, ab: Ablation) -> Ablation:
    """The seed's *redundant* verdict one level down: which layers alone carry it, then inside those."""
    unmeasured = any(x.no_information for x in ab.layers)
    if (
        decide_verdict(ab.s1 - ab.s0, ab.contributing, ab.tau_gamma, unmeasured=unmeasured) != "redundant"
        or len(ab.layers) < 2
    ):
        return ab
    corpus = run.corpus
    everything = frozenset(u.id for u in corpus.units)
    s = await run.measure(
        {f"only {x.layer.value}": everything - layer_mask(corpus, x.layer) for x in ab.layers}, "redundancy"
    )
    layer_alone = {x.layer: s[f"only {x.layer.value}"] for x in ab.layers}
    carrying = [layer for layer, value in layer_alone.items() if carries_alone(ab.s1, value, ab.tau)]
    layers = tuple(
        x.model_copy(update={"role": "redundant" if x.layer in carrying else x.role, "alone": layer_alone[x.layer]})
        for x in ab.layers
    )
    candidates = [u for u in corpus.units if u.layer in carrying]
    tested, omitted = select_units(candidates, run.params.max_sources)
    s2 = await run.measure({f"only {u.id}": everything - {u.id} for u in tested}, "redundancy")
    alone = {u.id: s2[f"only {u.id}"] for u in tested}
    roles: dict[str, Role] = {uid: "redundant" for uid, value in alone.items() if carries_alone(ab.s1, value, ab.tau)}
    return replace(ab, layers=layers, layer_alone=layer_alone, alone=alone, roles=roles, omitted=omitted)


def _ids(units: Sequence[Unit]) -> str:
    ids = [u.id for u in units]
    return ids[0] if len(ids) == 1 else ", ".join(ids[:-1]) + " and " + ids[-1]


def _any_of(ids: str, count: int) -> str:
    return f"{ids} alone is enough" if count == 1 else f"any one of {ids} is enough"


def explain(ab: Ablation, corpus: Corpus) -> tuple[str, ...]:
    """The redundancy findings in plain words (empty when there is nothing to say)."""
    out: list[str] = []
    units = {u.id: u for u in corpus.units}
    if ab.layer_alone:
        carrying = [x.layer for x in ab.layers if x.role == "redundant"]
        if len(carrying) >= 2:
            out.append(
                f"Any one of the {', '.join(x.value for x in carrying)} layers is enough: removing one "
                "changes nothing because the others still carry the claim."
            )
        elif carrying:
            out.append(
                f"The {carrying[0].value} layer alone carries the claim; removing it changed nothing "
                "because another layer carries it too."
            )
        else:
            out.append("No single layer carries the claim alone: it takes several layers together.")
    by_layer: dict[Layer, list[Unit]] = {}
    for unit in sorted((units[uid] for uid in ab.alone), key=lambda u: u.ordinal):
        by_layer.setdefault(unit.layer, []).append(unit)
    for layer, measured in by_layer.items():
        carriers = [u for u in measured if ab.roles.get(u.id) == "redundant"]
        # carries the claim alone, but its own removal did not read "changes nothing" (a distractor, or no
        # information): not redundant, and never said not to carry it
        also = [u for u in measured if u not in carriers and carries_alone(ab.s1, ab.alone[u.id], ab.tau)]
        others = [u for u in measured if u not in carriers and u not in also]
        if len(carriers) >= 2:
            text = (
                f"In the {layer.value} layer, {_any_of(_ids(carriers), len(carriers))}: removing one changes "
                "nothing because the others still say it."
            )
        elif carriers:
            text = f"In the {layer.value} layer, {_any_of(_ids(carriers), 1)} to carry the claim."
        elif also:
            text = f"In the {layer.value} layer, no source reads as redundant."
        else:
            text = (
                f"In the {layer.value} layer, no source carries the claim alone: it takes several of "
                f"{_ids(measured)} together."
            )
        for unit in also:
            without = ab.s2.get(f"1-{unit.id}", math.nan)
            if math.isnan(without) or math.isnan(ab.s2.get("1", math.nan)):
                text += f" {unit.id} carries it alone too, but whether removing it changes anything is unknown."
            else:
                text += (
                    f" {unit.id} carries it alone too, yet removing it raises the score: the judge's answers "
                    "disagree about it (see the disagreements)."
                )
        if (carriers or also) and others:
            text += f" {_ids(others)} {'does' if len(others) == 1 else 'do'} not carry it alone."
        out.append(text)
    if ab.redundancy_skipped:
        out.append(ab.redundancy_skipped[0].upper() + ab.redundancy_skipped[1:] + ".")
    return tuple(out)
