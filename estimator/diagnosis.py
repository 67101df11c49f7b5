"""§9 — crossing the attribution axis with the span verdict: which repair a claim needs.

                        source supports it            source contradicts it       sources silent
    high attribution    grounded in your data         agent misread the source    —
    ~zero attribution   model knew it, data agrees    model overrode your data    unverifiable model knowledge

The last cell is a statement about the whole claim (every source silent, Γ < τ_Γ), so it is
decided once per result by ``claim_diagnosis`` and then shown on each source too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from .result import Role, SupportLabel, SupportVerdict, Verdict

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


def attribution_level(*, verdict: Verdict, role: Role | None, layer_contributes: bool) -> Attribution:
    """Whether a source's attribution is high or ~zero.

    High: the source itself grounds the claim (round-2 role ``grounds``), or the whole-context effect
    is real (Γ ≥ τ_Γ) and reaches the source — its layer contributes (a round-2 ``distractor`` or an
    untested source of a contributing layer), or the claim is redundant, i.e. carried jointly by every
    layer. ~Zero: internal knowledge, a source tested and found irrelevant, or one not tested because
    its layer did not contribute.
    """
    if verdict in ("internal_knowledge", "no_information"):
        return "zero"
    if role == "grounds":
        return "high"
    if role == "irrelevant":
        return "zero"
    if verdict == "redundant" or layer_contributes:
        return "high"
    return "zero"


def diagnose(level: Attribution, support: SupportVerdict | None) -> str | None:
    """The §9 cell for one source; None for a silent source, a missing span check or no information."""
    if support is None or support.no_information:
        return None
    return _TABLE[(level, support.verdict)]


def claim_diagnosis(verdict: Verdict, supports: Iterable[SupportVerdict | None]) -> str | None:
    """The claim-level cell: internal knowledge with every span check silent (and informative)."""
    checked = list(supports)
    if verdict != "internal_knowledge" or not checked:
        return None
    if all(s is not None and s.verdict == "silent" and not s.no_information for s in checked):
        return UNVERIFIABLE
    return None
