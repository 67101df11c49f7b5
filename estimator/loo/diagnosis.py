"""§9 — crossing the attribution axis with the span verdict: which repair a claim needs.

                        source supports it            source contradicts it       sources silent
    high attribution    grounded in your data         agent misread the source    —
    ~zero attribution   model knew it, data agrees    model overrode your data    unverifiable model knowledge

The rows are decided by Γ (§6.5) and the drops, never by a source's round-2 role alone: a claim
whose whole-context effect is real is never "model knew it". The last cell is a statement about the
whole claim (every source silent, Γ < τ_Γ), so it is decided once per result by ``claim_diagnosis``
and then shown on each source too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from estimator.results.models import SupportVerdictModel
from estimator.results.trace import Role, SupportLabel, Verdict

Attribution = Literal["high", "zero"]

GROUNDED = "grounded in your data"
MISREAD = "agent misread the source"
KNEW_IT = "model knew it, data agrees"
OVERRODE = "model overrode your data"
UNVERIFIABLE = "unverifiable model knowledge"

_TABLE: dict[tuple[Attribution, SupportLabel], str | None] = {
    ("high", "supported"): GROUNDED,
    ("high", "contradicted"): MISREAD,
    ("high", "silent"): None,
    ("zero", "supported"): KNEW_IT,
    ("zero", "contradicted"): OVERRODE,
    ("zero", "silent"): None,
}


def attribution_level(*, verdict: Verdict, role: Role | None, layer_role: Role | None) -> Attribution | None:
    """The attribution axis of §9 for one source, decided by Γ first (as the paper states), then by the
    layer and source drops; None when the measurement cannot decide it (then nothing is said).

    ~Zero: Γ < τ_Γ (internal knowledge) — the claim survives the removal of the whole context, so no
    source drove it, whatever its own drop. High: Γ ≥ τ_Γ and the effect reaches this source — its layer
    contributes (|Δ_L| ≥ τ) or carries the claim alone (``redundant``), and the source itself was not
    found irrelevant: it grounds the claim, carries it alone, distracts from it, or was not tested on
    its own. Otherwise, with Γ ≥ τ_Γ, the context drove the claim but this source's part in it was not
    established (its layer's removal changed nothing, or its own removal changed nothing and it does not
    carry the claim alone): "model knew it" there would contradict Γ, and "grounded" would be a guess.
    """
    if verdict == "internal_knowledge":
        return "zero"
    if verdict == "no_information":
        return None
    if layer_role in ("grounds", "distractor", "redundant") and role != "irrelevant":
        return "high"
    return None


def diagnose(level: Attribution, support: SupportVerdictModel | None) -> str | None:
    """The §9 cell for one source; None for a silent source, a missing span check or no information."""
    if support is None or support.no_information:
        return None
    return _TABLE[(level, support.verdict)]


def claim_diagnosis(verdict: Verdict, supports: Iterable[SupportVerdictModel | None]) -> str | None:
    """The claim-level cell: internal knowledge with every span check silent (and informative)."""
    checked = list(supports)
    if verdict != "internal_knowledge" or not checked:
        return None
    if all(s is not None and s.verdict == "silent" and not s.no_information for s in checked):
        return UNVERIFIABLE
    return None
