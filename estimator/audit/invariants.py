"""Every rule that ties a word of a trace result to its numbers, in one place, checked twice.

A result is believed only if it never contradicts itself. These rules are what "never" means; each is a
function of the result alone (τ and τ_Γ are in it), so the same check runs in the property tests, over
every estimator and random, noisy, adversarial and constant judges (``tests/method/test_invariants.py``),
and at run time on every result before it is returned and stored (``estimator.trace.run_trace``), where a
violation is a bug of ours and is logged. A *measurement* that contradicts another (a noisy judge) is not a
violation: it is reported to the reader as a disagreement (``loo.coherence``), and rule 9 checks that it is.

The rules (Δ a drop, τ the trace's threshold, Γ = s(1) − s(0), τ_Γ the internal-knowledge ceiling):

1. ``verdict_text`` begins with the verdict's own words, and is hedged exactly when the scores disagree.
2. Verdict vs Γ: Γ unknown ⇒ *no information*; Γ < τ_Γ ⇒ *internal knowledge* (or *no information* when a
   disagreement contradicts it); Γ ≥ τ_Γ ⇒ never *internal knowledge*.
3. Verdict vs the search: *attributed* ⇒ round 2 searched at least one layer; *redundant* ⇒ it searched none;
   ``round2_skipped_reason`` is given exactly when it searched none.
4. A layer's role is what its Δ says (grounds Δ ≥ τ, distractor Δ ≤ −τ, irrelevant otherwise), except
   *redundant*: its removal changed nothing (|Δ| < τ) and it carries the claim alone (s(1) − alone < τ).
5. A source's role likewise; *redundant* ⇒ |Δ| < τ (when measured) and s(1) − alone < τ. A source whose
   removal changed nothing and that carries the claim alone is *redundant*.
6. ``contributing_layers`` are exactly the searched layers whose role is *grounds*; a distracting layer is
   searched, never contributing.
7. Diagnoses (§9): *grounded*/*misread* only with a verdict that attributes the claim to the context and a
   span check that supports/contradicts; *model knew it*/*overrode*/*unverifiable* only with *internal
   knowledge*; *unverifiable* only when every informative span check is silent.
8. Caveats: *shared carriers* names a layer whose Δ ≥ τ and none of whose tested sources' Δ ≥ τ; the
   *reworded source* caveat only on *internal knowledge* with Γ ≥ ½ τ_Γ.
9. Every part whose drop exceeds Γ + τ is named by a ``drop_exceeds_gamma`` disagreement ("nothing says the
   measurements disagree" is itself a contradiction), and every disagreement's numbers are the result's own.
10. Redundancy lines: each source named in "any one of …"/"… alone is enough" has the role *redundant*.
11. Numbers: Δ = s_all − s_without where both are measured; ``no_information`` exactly when one is not.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from estimator.loo.caveats import REWORDED_FRACTION
from estimator.loo.coherence import SCORES_DISAGREE, measured
from estimator.loo.diagnosis import GROUNDED, KNEW_IT, MISREAD, OVERRODE, UNVERIFIABLE
from estimator.loo.labels import VERDICT_TEXT
from estimator.loo.rounds import role_of
from estimator.results.models import LogprobTraceResultModel, SourceScoreModel, TraceResultModel

__all__ = ["EPSILON", "Violation", "thresholds_of", "violations"]

EPSILON = 1e-9
"""Slack for float comparisons of values the result computed from the same numbers."""

_Bad = Callable[[int, str, str], None]
_ANY_ONE = re.compile(r"any one of ([^:]+?) is enough|(\S+) alone is enough to carry")


@dataclass(frozen=True)
class Violation:
    rule: int
    subject: str
    detail: str

    def __str__(self) -> str:
        return f"rule {self.rule} ({self.subject}): {self.detail}"


def thresholds_of(result: TraceResultModel) -> tuple[float, float] | None:
    """(τ, τ_Γ) of a result: recorded in it, or for an older result read from its parameters."""
    if result.tau is not None and result.tau_gamma is not None:
        return result.tau, result.tau_gamma
    if isinstance(result, LogprobTraceResultModel):
        return result.thresholds.tau_nats, result.thresholds.tau_gamma_nats
    tau, tau_gamma = result.params.get("tau"), result.params.get("tau_gamma")
    if (
        isinstance(tau, int | float)
        and isinstance(tau_gamma, int | float)
        and result.estimator in ("judged", "expected")
    ):
        return float(tau), float(tau_gamma)
    return None


def violations(result: TraceResultModel) -> list[Violation]:
    """Every rule this result breaks (empty for a coherent result)."""
    out: list[Violation] = []

    def bad(rule: int, subject: str, detail: str) -> None:
        out.append(Violation(rule, subject, detail))

    base = VERDICT_TEXT[result.verdict]
    if not result.verdict_text.startswith(base):
        bad(1, "verdict_text", f"{result.verdict_text!r} does not begin with {base!r}")
    scores_disagree = [d for d in result.disagreements if d.kind in SCORES_DISAGREE]
    if bool(scores_disagree) != (result.verdict_text != base):
        bad(1, "verdict_text", f"hedged={result.verdict_text != base} but {len(scores_disagree)} disagreement(s)")
    found = thresholds_of(result)
    if found is None:
        return out
    tau, tau_gamma = found
    _verdict(result, tau_gamma, bad)
    _search(result, bad)
    _layers(result, tau, bad)
    for source in result.sources:
        _source(result, source, tau, bad)
    _diagnoses(result, bad)
    _caveats(result, tau, tau_gamma, bad)
    _disagreements(result, tau, bad)
    _redundancy_lines(result, bad)
    return out


def _verdict(result: TraceResultModel, tau_gamma: float, bad: _Bad) -> None:
    verdict, gamma = result.verdict, result.gamma
    downgraded = any(d.kind == "drop_exceeds_gamma" for d in result.disagreements)
    if not measured(gamma):
        if verdict != "no_information":
            bad(2, "verdict", f"Γ unknown but the verdict is {verdict}")
        return
    if gamma < tau_gamma:
        if verdict not in ("internal_knowledge", "no_information"):
            bad(2, "verdict", f"Γ = {gamma:.3f} < τ_Γ = {tau_gamma:.3f} but the verdict is {verdict}")
        unmeasured = any(x.no_information for x in result.layers)
        if verdict == "no_information" and not downgraded and not unmeasured:
            bad(2, "verdict", f"Γ = {gamma:.3f} < τ_Γ: no information without a disagreement or an unmeasured layer")
    elif verdict == "internal_knowledge":
        bad(2, "verdict", f"Γ = {gamma:.3f} ≥ τ_Γ = {tau_gamma:.3f} but the verdict is internal knowledge")


def _search(result: TraceResultModel, bad: _Bad) -> None:
    searched = result.searched_layers
    if searched is None:  # stored before the search was recorded
        return
    if result.verdict == "attributed" and not searched:
        bad(3, "verdict", "attributed, but round 2 searched no layer")
    if result.verdict == "redundant" and searched:
        bad(3, "verdict", f"redundant, but round 2 searched {[x.value for x in searched]}")
    if (result.round2_skipped_reason is None) != bool(searched):
        bad(3, "round2_skipped_reason", "given although round 2 ran, or missing although it did not")
    roles = {x.layer: x.role for x in result.layers}
    expected = tuple(x for x in searched if roles.get(x) == "grounds")
    if tuple(result.contributing_layers) != expected:
        bad(6, "contributing_layers", f"{[x.value for x in result.contributing_layers]} ≠ grounding {expected}")


def _layers(result: TraceResultModel, tau: float, bad: _Bad) -> None:
    for layer in result.layers:
        name = f"layer {layer.layer.value}"
        both = measured(result.s_all) and measured(layer.s_without)
        if layer.no_information == both:
            bad(11, name, f"no_information={layer.no_information} but s_all, s_without measured={both}")
        if both and abs(layer.delta - (result.s_all - layer.s_without)) > EPSILON:
            bad(11, name, f"Δ = {layer.delta} ≠ s_all − s_without = {result.s_all - layer.s_without}")
        if layer.role == "redundant":
            if abs(layer.delta) >= tau:
                bad(4, name, f"redundant with |Δ| = {abs(layer.delta):.3f} ≥ τ = {tau:.3f}")
            if not (layer.alone is not None and measured(layer.alone) and result.s_all - layer.alone < tau):
                bad(4, name, f"redundant, but kept alone it does not carry the claim (alone = {layer.alone})")
        elif layer.role != role_of(layer.delta, tau):
            bad(4, name, f"role {layer.role} but Δ = {layer.delta:.3f} with τ = {tau:.3f}")


def _source(result: TraceResultModel, source: SourceScoreModel, tau: float, bad: _Bad) -> None:
    name, delta = source.source_id, source.delta
    known = delta is not None and not source.no_information
    if delta is not None and measured(source.s_without) and abs(delta) > 0 and source.no_information:
        bad(11, name, "no_information with a measured, non-zero drop")
    if known and delta is not None and source.role not in (None, "redundant") and source.role != role_of(delta, tau):
        bad(5, name, f"role {source.role} but Δ = {delta:.3f} with τ = {tau:.3f}")
    carries = source.alone is not None and measured(source.alone) and result.s_all - source.alone < tau
    if source.role == "redundant":
        if known and delta is not None and abs(delta) >= tau:
            bad(5, name, f"redundant (removing it changes nothing) but Δ = {delta:.3f}, |Δ| ≥ τ = {tau:.3f}")
        if not carries:
            bad(5, name, f"redundant, but kept alone it does not carry the claim (alone = {source.alone})")
    elif carries and source.role == "irrelevant" and known:
        bad(5, name, "its removal changes nothing and it carries the claim alone, but it is not redundant")


def _diagnoses(result: TraceResultModel, bad: _Bad) -> None:
    verdict = result.verdict
    wants = {GROUNDED: "supported", MISREAD: "contradicted", KNEW_IT: "supported", OVERRODE: "contradicted"}
    for source in result.sources:
        diagnosis, support = source.diagnosis, source.support
        if diagnosis in (GROUNDED, MISREAD) and verdict not in ("attributed", "redundant"):
            bad(7, source.source_id, f"{diagnosis!r} under the verdict {verdict}")
        if diagnosis in (KNEW_IT, OVERRODE, UNVERIFIABLE) and verdict != "internal_knowledge":
            bad(7, source.source_id, f"{diagnosis!r} under the verdict {verdict}")
        want = wants.get(diagnosis or "")
        if want is not None and (support is None or support.verdict != want):
            bad(7, source.source_id, f"{diagnosis!r} with a span check that is not {want}")
    if result.diagnosis == UNVERIFIABLE:
        if verdict != "internal_knowledge":
            bad(7, "diagnosis", f"unverifiable under the verdict {verdict}")
        if any(s.support is not None and s.support.verdict != "silent" for s in result.sources):
            bad(7, "diagnosis", "unverifiable, but a span check is not silent")


def _caveats(result: TraceResultModel, tau: float, tau_gamma: float, bad: _Bad) -> None:
    layers = {x.layer.value: x for x in result.layers}
    for warning in result.warnings:
        m = re.match(r"No single source of the (\w+) layer", warning)
        if m:
            layer = layers.get(m.group(1))
            if layer is None or not layer.delta >= tau:
                bad(8, "warnings", f"shared carriers on {m.group(1)}, whose Δ is under τ")
            grounding = [s.source_id for s in result.sources if s.layer.value == m.group(1) and s.role == "grounds"]
            if grounding:
                bad(8, "warnings", f"shared carriers on {m.group(1)}, but {grounding} ground the claim on their own")
        if warning.startswith("Reported as the model's own knowledge, but narrowly"):
            gamma = result.gamma
            if result.verdict != "internal_knowledge" or not (
                measured(gamma) and gamma >= REWORDED_FRACTION * tau_gamma
            ):
                bad(8, "warnings", "the reworded-source caveat without a narrow internal-knowledge verdict")


def _disagreements(result: TraceResultModel, tau: float, bad: _Bad) -> None:
    gamma = result.gamma
    named = {d.subject for d in result.disagreements if d.kind == "drop_exceeds_gamma"}
    if measured(gamma):
        parts = [(x.layer.value, x.delta, x.no_information) for x in result.layers]
        parts += [(s.source_id, s.delta, s.no_information) for s in result.sources if s.delta is not None]
        for subject, delta, unmeasured in parts:
            if delta is not None and not unmeasured and delta > gamma + tau + EPSILON and subject not in named:
                bad(9, subject, f"Δ = {delta:.3f} exceeds Γ + τ = {gamma + tau:.3f} and nothing says so")
    for d in result.disagreements:
        values = d.values
        if d.kind == "drop_exceeds_gamma" and not values.get("delta", math.nan) > values.get("gamma", math.nan) + tau:
            bad(9, d.subject, f"a disagreement whose numbers agree: {values}")
        if "gamma" in values and measured(gamma) and abs(values["gamma"] - gamma) > EPSILON:
            bad(9, d.subject, f"Γ = {values['gamma']} in the disagreement, {gamma} in the result")


def _redundancy_lines(result: TraceResultModel, bad: _Bad) -> None:
    roles = {s.source_id: s.role for s in result.sources}
    for line in result.redundancy:
        for m in _ANY_ONE.finditer(line):
            names = m.group(1) or m.group(2) or ""
            for sid in re.findall(r"\bs\d+\b", names):
                if roles.get(sid) != "redundant":
                    bad(10, sid, f"named as carrying the claim alone ({line!r}) but its role is {roles.get(sid)}")
