"""Calibration of the log-probability thresholds from recorded measurements, without the model.

``hard_run.py`` records per turn the measurement table (s(1), s(0), s(1 ⊖ L), s(1 ⊖ u), s with only u kept of
its layer). ``replay`` re-runs the estimator's decisions on that table for any thresholds — the same rules as
``estimator.loo.rounds`` / ``estimator.loo.redundancy`` / ``estimator.results.trace.decide_verdict`` with τ and τ_Γ from
``estimator.loo.logprob.thresholds`` — so a sweep costs no model call. With the defaults it must give what the
trace gave (``hard_report.py`` reports the count).

The rule (stated in HARD.md): on the ``tune`` split only, maximise the number of turns whose verdict AND top
source are both right; ties go to the candidate closest to the defaults (fewest thresholds changed, then the
fewest grid steps away). The held-out split is scored once, with the chosen thresholds.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from estimator.corpus.units import PROVENANCE_LAYER_ORDER, Layer
from estimator.loo.caveats import caveats
from estimator.loo.logprob import DEFAULT_LOGPROB_PARAMS, LogprobParams, thresholds
from estimator.loo.redundancy import carries_alone
from estimator.loo.rounds import drop, role_of
from estimator.params import DEFAULT_PARAMS
from estimator.results.trace import decide_verdict

ABSTAIN = ("no_information", "cannot_tell")
GRID: dict[str, tuple[float, ...]] = {
    "tau_rel": (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5),
    "tau_floor": (0.25, 0.5, 1.0, 2.0, 3.0),
    "gamma_per_token": (0.0, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5),
    "gamma_floor": (0.5, 1.0, 2.0, 3.0, 4.0, 6.0),
    "redundancy_k": (0.5, 1.0, 2.0),
}
"""The sweep. ``redundancy_k``: a source carries the claim alone when s(1) − s(only it) < k·τ (the product: k = 1)."""
SWEEP_MIN_TAU = min(GRID["tau_floor"])
# the settings the hard set was first run with, before its calibration moved tau_floor 1 → 2 and gamma_floor 2 → 3:
# the sweep's baseline and its "fewest changes" reference, fixed so that the report's before/after stays reproducible
DEFAULTS: dict[str, float] = {
    **DEFAULT_LOGPROB_PARAMS.model_dump(),
    "tau_floor": 1.0,
    "gamma_floor": 2.0,
    "redundancy_k": 1.0,
}


@dataclass(frozen=True)
class Setting:
    tau_rel: float = DEFAULTS["tau_rel"]
    tau_floor: float = DEFAULTS["tau_floor"]
    gamma_per_token: float = DEFAULTS["gamma_per_token"]
    gamma_floor: float = DEFAULTS["gamma_floor"]
    redundancy_k: float = 1.0
    abstain_when_cut: bool = False
    """Proposed rule 1: a claim not attributed while part of the context was cut reads "cannot tell"."""
    gamma_at_least_layer: bool = False
    """Proposed rule 2: the internal-knowledge test uses max(Γ, the largest layer drop): a claim that loses
    τ_Γ when one layer goes is not internal knowledge, whatever removing everything does."""

    @property
    def lp(self) -> LogprobParams:
        return LogprobParams(
            tau_rel=self.tau_rel,
            tau_floor=self.tau_floor,
            gamma_per_token=self.gamma_per_token,
            gamma_floor=self.gamma_floor,
        )

    def values(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in GRID}

    def steps_from_default(self) -> tuple[int, int]:
        changed = sum(1 for k in GRID if getattr(self, k) != DEFAULTS[k])
        steps = sum(abs(GRID[k].index(getattr(self, k)) - GRID[k].index(DEFAULTS[k])) for k in GRID)
        return changed, steps


@dataclass(frozen=True)
class Replayed:
    verdict: str
    top_source: str | None
    contributing: tuple[str, ...]
    gamma: float
    tau: float
    tau_gamma: float
    complete: bool = True
    """False when a mask this replay needed was not in the table (its roles are then unresolved)."""
    roles: Mapping[str, str] = field(default_factory=dict)
    layer_drops: Mapping[str, float] = field(default_factory=dict)
    tested_by_layer: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Layer → the sources round 2 removed in it."""
    contributing_layers: tuple[str, ...] = ()


def _select(units: Sequence[tuple[str, str, int]], cap: int) -> list[str]:
    """``loo.select_units`` on (id, layer, ordinal): layer-balanced round-robin by recency, capped."""
    if len(units) <= cap:
        return [u[0] for u in sorted(units, key=lambda u: u[2])]
    queues = {
        layer.value: sorted((u for u in units if u[1] == layer.value), key=lambda u: -u[2])
        for layer in PROVENANCE_LAYER_ORDER
    }
    kept: list[tuple[str, str, int]] = []
    while len(kept) < cap and any(queues.values()):
        for layer in PROVENANCE_LAYER_ORDER:
            if queues[layer.value] and len(kept) < cap:
                kept.append(queues[layer.value].pop(0))
    return [u[0] for u in sorted(kept, key=lambda u: u[2])]


def _value(masks: Mapping[str, float | None], name: str) -> float | None:
    v = masks.get(name)
    return None if v is None else float(v)


def replay(row: Mapping[str, Any], setting: Setting = Setting()) -> Replayed:
    """The log-probability estimator's decisions on one recorded measurement table."""
    m: Mapping[str, float | None] = row["masks"]
    units = [(uid, u["layer"], u["ordinal"]) for uid, u in row["units"].items()]
    full, none = _value(m, "1"), _value(m, "0")
    s1 = math.nan if full is None else full
    s0 = math.nan if none is None else none
    gamma = s1 - s0
    th = thresholds(gamma, int(row.get("claim_tokens") or 0), setting.lp)
    tau, tau_gamma = th.tau, th.tau_gamma
    present = [layer.value for layer in PROVENANCE_LAYER_ORDER if any(u[1] == layer.value for u in units)]
    layer_drop: dict[str, float] = {}
    unmeasured = False
    for layer in present:
        without = _value(m, f"-{layer}")
        layer_drop[layer] = drop(s1, math.nan if without is None else without)
        unmeasured |= without is None or math.isnan(without) or math.isnan(s1)
    ranked = sorted(
        (x for x in present if role_of(layer_drop[x], tau) != "irrelevant"), key=lambda x: -abs(layer_drop[x])
    )
    contributing = tuple(Layer(x) for x in ranked)
    effect = gamma
    if setting.gamma_at_least_layer and layer_drop:
        effect = max(gamma, max(layer_drop.values()))
    verdict = str(decide_verdict(effect, contributing, tau_gamma, unmeasured=unmeasured))
    if setting.abstain_when_cut and row.get("context_cut") and verdict == "internal_knowledge":
        verdict = "cannot_tell"
    roles: dict[str, str] = {}
    complete = True
    top: str | None = None
    tested_by_layer: dict[str, tuple[str, ...]] = {}
    if contributing:
        candidates = [u for u in units if u[1] in ranked]
        tested = _select(candidates, DEFAULT_PARAMS.max_sources)
        drops: dict[str, float] = {}
        for uid in tested:
            v = _value(m, f"-{uid}")
            if v is None:
                complete = False
                continue
            drops[uid] = drop(s1, v)
            roles[uid] = role_of(drops[uid], tau)
        for layer in ranked:
            in_layer = [uid for uid in tested if row["units"][uid]["layer"] == layer]
            tested_by_layer[layer] = tuple(in_layer)
            if (
                role_of(layer_drop[layer], tau) != "grounds"
                or len(in_layer) < 2
                or any(roles.get(uid) == "grounds" for uid in in_layer)
            ):
                continue
            for uid in in_layer:
                alone = _value(m, f"in {uid}")
                if alone is None:
                    complete = False
                elif uid in drops and carries_alone(s1, alone, setting.redundancy_k * tau):
                    roles[uid] = "redundant"
        grounding = [(uid, drops[uid]) for uid in tested if roles.get(uid) == "grounds"]
        if grounding:
            top = max(grounding, key=lambda x: x[1])[0]
    elif verdict == "redundant" and len(present) >= 2:
        complete = False  # which sources carry it alone: only-u masks are not in the table
    contrib = tuple(sorted(uid for uid, r in roles.items() if r in ("grounds", "redundant")))
    return Replayed(
        verdict,
        top,
        contrib,
        gamma,
        tau,
        tau_gamma,
        complete,
        roles,
        layer_drop,
        tested_by_layer,
        ranked_names(contributing),
    )


def ranked_names(layers: Sequence[Layer]) -> tuple[str, ...]:
    return tuple(x.value for x in layers)


def replay_caveats(row: Mapping[str, Any], setting: Setting = Setting()) -> set[str]:
    """The kinds of caveat (``estimator.loo.caveats``) the product's result would carry for this recorded turn."""
    r = replay(row, setting)
    cut = ["scoring window"] if row.get("context_cut") or row["logprob"].get("disclosed") else []
    found = caveats(
        verdict=r.verdict,
        gamma=r.gamma,
        tau=r.tau,
        tau_gamma=r.tau_gamma,
        unit=" nats",
        layer_drops=r.layer_drops,
        contributing=r.contributing_layers,
        tested_by_layer=r.tested_by_layer,
        roles=r.roles,
        warnings=cut,
    )
    return {c.kind for c in found}


def score_row(row: Mapping[str, Any], pred: Mapping[str, Any] | Replayed) -> dict[str, Any]:
    """Right or wrong against the planted truth: verdict, top source, the set of contributing sources
    (true/false positives and misses), and whether the estimator abstained (said it cannot tell)."""
    if isinstance(pred, Replayed):
        verdict, top, contrib = pred.verdict, pred.top_source, set(pred.contributing)
    else:
        verdict, top, contrib = pred["verdict"], pred["top_source"], set(pred["contributing"])
    expected = row["expected_verdict"]
    causes = set(row["causes"])
    abstained = verdict in ABSTAIN
    safe: bool | None = None
    if expected == "cannot_tell":
        verdict_ok = abstained
        top_ok = top is None or top in row["cut_units"]
        truth: set[str] = set()
        wrong = contrib - set(row["cut_units"])
        # the reading "cut — cannot tell" at its most lenient: the cut is disclosed and no source but the cut
        # one is named (whatever the verdict says)
        safe = abstained or (bool(row.get("logprob", {}).get("disclosed", False)) and top_ok and not wrong)
        contrib = wrong
    elif expected == "internal_knowledge":
        verdict_ok, top_ok, truth = verdict == "internal_knowledge", top is None, set()
    else:
        verdict_ok = verdict == "attributed"
        top_ok = top in causes or (row["none_ok"] and top is None)
        truth = causes
    return {
        "verdict_ok": verdict_ok,
        "top_ok": top_ok,
        "both_ok": verdict_ok and top_ok,
        "abstained": abstained,
        "safe": verdict_ok and top_ok if safe is None else safe,
        "wrong_knowledge": expected == "cannot_tell" and verdict == "internal_knowledge",
        "tp": len(contrib & truth),
        "fp": len(contrib - truth),
        "fn": len(truth - contrib),
    }


def settings(grid: Mapping[str, Sequence[float]] = GRID) -> Iterable[Setting]:
    keys = list(grid)
    for combo in itertools.product(*(grid[k] for k in keys)):
        values: dict[str, Any] = dict(zip(keys, combo, strict=True))
        yield Setting(**values)


def objective(rows: Sequence[Mapping[str, Any]], setting: Setting) -> int:
    """Turns whose verdict and top source are both right."""
    return sum(score_row(r, replay(r, setting))["both_ok"] for r in rows)


def choose(
    rows: Sequence[Mapping[str, Any]],
    grid: Mapping[str, Sequence[float]] = GRID,
) -> tuple[Setting, int, list[tuple[Setting, int]]]:
    """The rule: the most right turns on ``rows`` (the tune split); ties → closest to the defaults.
    Returns the choice, its count, and every candidate's count."""
    scored = [(s, objective(rows, s)) for s in settings(grid)]
    best = max(n for _, n in scored)
    tied = [s for s, n in scored if n == best]
    return min(tied, key=lambda s: s.steps_from_default()), best, scored


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval (95 %) for k successes out of n."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))
