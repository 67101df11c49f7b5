"""When the judge's answers disagree with each other: found, reported with their numbers, and the verdict
downgraded rather than stated cleanly.

Beyond the paper. A hosted judge is noisy: the same context can read 7 once and 5 the next time, and the
masks of one trace are answered independently. Leave-one-out reads its words off differences of those
answers, so a noisy judge can produce measurements that cannot all be true at once. They are not bugs of the
result (its words still follow its numbers, ``results.invariants``); they are findings about the
measurements, and the reader is told:

* ``drop_exceeds_gamma`` — removing one layer or one source lowers the score by more than removing the
  whole context does (Δ > Γ + τ). A part cannot matter more than the whole it belongs to, beyond the
  smallest change the trace counts (τ; for a judged digit any difference of one digit).
* ``distractor_carries_alone`` — a source whose removal *raises* the score by τ or more (a distractor) still
  carries the claim when kept alone: leave-one-out and keep-alone say opposite things about it.
* ``carrier_silent`` — a source carries the claim alone (its keep-alone score stays within τ of s(1)), yet the
  span check found nothing in it that states the claim.
* ``context_without_ground`` — the context as a whole carries the claim (Γ ≥ τ_Γ), yet no layer's removal
  lowers the score by τ while some layer's removal raises it by τ: the only layer round 2 searches distracts.

What it does to the verdict (``downgrade``): *internal knowledge* rests on the whole context mattering little
(Γ < τ_Γ); a part whose removal lowers the score by more than Γ + τ contradicts exactly that, so the verdict
becomes *no information* — a measurement that ran and could not decide. Any other disagreement among the
scores keeps the verdict's value and hedges its text (``HEDGE``), so no surface states it cleanly; a score
that disagrees with a span check (``carrier_silent``) is disclosed without hedging the verdict.
``--repeats k`` (the median of k samples per mask) is the remedy the finding names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from estimator.corpus.units import Layer
from estimator.loo.rounds import Ablation, drop
from estimator.results.models import DisagreementModel, SupportVerdictModel
from estimator.results.trace import Verdict

__all__ = ["HEDGE", "SCORES_DISAGREE", "disagreements", "downgrade", "grounding_layers", "hedged", "measured"]

HEDGE = "uncertain: the judge's answers disagree with each other"
"""Appended to a verdict's text when the measurements it rests on disagree (see ``disagreements``)."""

REMEDY = " Measuring each mask several times (--repeats) and taking the median settles such a disagreement."


def measured(*values: float | None) -> bool:
    """Every value is a number: neither unmeasured (None) nor without information (NaN)."""
    return all(v is not None and not math.isnan(v) for v in values)


def _n(value: float, unit: str) -> str:
    return f"{value:+.2f}{unit}" if value < 0 else f"{value:.2f}{unit}"


def disagreements(
    ab: Ablation, supports: Mapping[str, SupportVerdictModel], *, unit: str = ""
) -> tuple[DisagreementModel, ...]:
    """Every measurement of this trace that contradicts another one, in words with its numbers."""
    out: list[DisagreementModel] = []
    gamma, tau = ab.s1 - ab.s0, ab.tau
    if measured(gamma):
        for layer in ab.layers:
            if not layer.no_information and layer.delta > gamma + tau:
                out.append(
                    DisagreementModel(
                        kind="drop_exceeds_gamma",
                        subject=layer.layer.value,
                        values={"delta": layer.delta, "gamma": gamma, "tau": tau},
                        text=(
                            f"Removing the {layer.layer.value} layer lowers the score by Δ = {_n(layer.delta, unit)}, "
                            f"more than removing the whole context does (Γ = {_n(gamma, unit)}) by over "
                            f"τ = {_n(tau, unit)}: a part cannot matter more than the whole." + REMEDY
                        ),
                    )
                )
        s2_full = ab.s2.get("1", math.nan)
        for unit_ in ab.tested:
            without = ab.s2.get(f"1-{unit_.id}", math.nan)
            if not measured(s2_full, without):
                continue
            delta = drop(s2_full, without)
            if delta > gamma + tau:
                out.append(
                    DisagreementModel(
                        kind="drop_exceeds_gamma",
                        subject=unit_.id,
                        values={"delta": delta, "gamma": gamma, "tau": tau},
                        text=(
                            f"Removing {unit_.id} alone lowers the score by Δ = {_n(delta, unit)}, more than "
                            f"removing the whole context does (Γ = {_n(gamma, unit)}) by over τ = {_n(tau, unit)}: "
                            "a part cannot matter more than the whole." + REMEDY
                        ),
                    )
                )
    s2_full = ab.s2.get("1", math.nan)
    for source_id, alone in ab.alone.items():
        carries = measured(ab.s1, alone) and ab.s1 - alone < tau
        if not carries:
            continue
        without = ab.s2.get(f"1-{source_id}", math.nan)
        if measured(s2_full, without) and drop(s2_full, without) <= -tau:
            delta = drop(s2_full, without)
            out.append(
                DisagreementModel(
                    kind="distractor_carries_alone",
                    subject=source_id,
                    values={"delta": delta, "alone": alone, "s_all": ab.s1, "tau": tau},
                    text=(
                        f"Removing {source_id} raises the score (Δ = {_n(delta, unit)}), so it reads as a "
                        f"distractor, yet kept alone it carries the claim (s = {_n(alone, unit)} against "
                        f"s(1) = {_n(ab.s1, unit)}): leave-one-out and keep-alone disagree about it." + REMEDY
                    ),
                )
            )
            continue
        support = supports.get(source_id)
        if support is not None and support.verdict == "silent" and not support.no_information:
            out.append(
                DisagreementModel(
                    kind="carrier_silent",
                    subject=source_id,
                    values={"alone": alone, "s_all": ab.s1, "tau": tau},
                    text=(
                        f"Kept alone, {source_id} carries the claim (s = {_n(alone, unit)} against "
                        f"s(1) = {_n(ab.s1, unit)}), yet the span check found nothing in it that states the "
                        "claim: the score and the span check disagree; read the source before relying on either."
                    ),
                )
            )
    grounding = [x for x in ab.layers if x.role in ("grounds", "redundant")]
    raising = [x for x in ab.layers if x.role == "distractor"]
    if measured(gamma) and gamma >= ab.tau_gamma and ab.contributing and not grounding and raising:
        names = ", ".join(f"{x.layer.value} (Δ = {_n(x.delta, unit)})" for x in raising)
        out.append(
            DisagreementModel(
                kind="context_without_ground",
                subject=",".join(x.layer.value for x in raising),
                values={"gamma": gamma, "tau_gamma": ab.tau_gamma, "tau": tau},
                text=(
                    f"The context as a whole raises the score by Γ = {_n(gamma, unit)}, yet no layer's removal "
                    f"lowers it by τ = {_n(tau, unit)} and removing {names} raises it: the whole and its parts "
                    "disagree." + REMEDY
                ),
            )
        )
    return tuple(out)


def downgrade(verdict: Verdict, found: tuple[DisagreementModel, ...]) -> Verdict:
    """*Internal knowledge* contradicted by a part that matters more than the whole becomes *no information*;
    every other verdict keeps its value (its text is hedged by ``hedged``)."""
    if verdict == "internal_knowledge" and any(d.kind == "drop_exceeds_gamma" for d in found):
        return "no_information"
    return verdict


SCORES_DISAGREE = frozenset({"drop_exceeds_gamma", "distractor_carries_alone", "context_without_ground"})
"""The kinds in which the judge's scores contradict each other: the verdict rests on them, so it is hedged.
``carrier_silent`` sets a score against the span check: disclosed beside the source, the verdict unhedged."""


def hedged(text: str, found: tuple[DisagreementModel, ...]) -> str:
    return f"{text} — {HEDGE}" if any(d.kind in SCORES_DISAGREE for d in found) else text


def grounding_layers(searched: tuple[Layer, ...], roles: Mapping[Layer, str]) -> tuple[Layer, ...]:
    """The result's ``contributing_layers``: the layers of round 2's search whose removal lowers the score by τ
    (role *grounds*), in the search's order (largest |Δ| first). A distracting layer is searched, not
    contributing."""
    return tuple(x for x in searched if roles.get(x) == "grounds")
