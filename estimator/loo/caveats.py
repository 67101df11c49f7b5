"""What a result cannot tell, said to the user for the kinds of claim where the method is known to fail.

Beyond the paper: the hard planted-cause study (``bench/validity/``, held-out figures in its README) found
three kinds of claim that leave-one-out over the scored context gets systematically wrong, and no threshold
fixes them without breaking other kinds. A result that matches one of these patterns carries a caveat in its
warnings, with what to check by hand:

* **shared carriers** — a layer's removal lowers the claim's score by τ or more but no tested source's removal
  does on its own.
  The layer's sources share what the claim says: the same record twice (genuine redundancy), or look-alike
  records with the same ids, dates and amounts that differ in one field. Removing the true cause then costs
  only the differing word, far below τ = τ_rel·|Γ| when the shared ids make Γ large: on the study's
  look-alike turns no top source was named (0 of 8 held-out) and the look-alike was listed as a carrier.
* **cut context** — part of the context was cut before scoring (a source over its scoring window, a history
  message over its cap, history beyond the message count). Leave-one-out over what was scored cannot see what
  was not: with the cause past the cut, the study's traces still said *attributed* and named a source that
  does not carry the claim (16 of 16 turns).
* **reworded source** — the verdict is *internal knowledge*, but narrowly (Γ under τ_Γ, over half of it). A
  long claim that restates a source in other words gains less than τ_Γ (which grows with the claim's length)
  from the context as a whole: 2 of 8 held-out paraphrases were called internal knowledge. Round 2 does not
  run on such a verdict, so Γ's margin is the only figure the result has.

``caveats`` takes plain figures (not an ``Ablation``), so the study replays it on recorded measurements and
reports how often each caveat fires on its own kind of claim and on the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["CUT_MARKERS", "REWORDED_FRACTION", "Caveat", "caveats"]

CUT_MARKERS = ("SOURCE_TOKEN_CAP", "HISTORY_TOKENS_PER_MESSAGE", "HISTORY_MAX_MESSAGES", "scoring window")
"""Words of a corpus or trace warning that say part of the context was cut before scoring."""


REWORDED_FRACTION = 0.5
"""An *internal knowledge* verdict whose Γ reaches this fraction of τ_Γ carries the reworded-source caveat.
Chosen on the study's tuning split: it flags 2 of the 3 paraphrases there called internal knowledge and 1 of
its 8 knowledge claims (held-out figures in ``bench/validity/README.md``)."""


@dataclass(frozen=True)
class Caveat:
    kind: str
    """``shared_carriers``, ``cut_context`` or ``reworded_source`` (explained in the service's glossary as
    ``warning.lookalike``, ``warning.truncated`` and ``warning.paraphrase``)."""
    text: str


def _fmt(value: float, unit: str) -> str:
    return f"{value:.2f}{unit}"


def caveats(
    *,
    verdict: str,
    gamma: float,
    tau: float,
    tau_gamma: float,
    unit: str,
    layer_drops: Mapping[str, float],
    contributing: Sequence[str],
    tested_by_layer: Mapping[str, Sequence[str]],
    roles: Mapping[str, str],
    warnings: Sequence[str],
) -> list[Caveat]:
    """The caveats a result with these figures carries. ``layer_drops``: Δ per layer (NaN when unmeasured);
    ``contributing``: the layers round 2 searched; ``tested_by_layer``: the sources round 2 removed, by
    layer; ``roles``: source id → role; ``warnings``: the result's other warnings (cuts are read there)."""
    out: list[Caveat] = []
    for layer in contributing:
        tested = list(tested_by_layer.get(layer, ()))
        drop = layer_drops.get(layer, math.nan)
        if not drop >= tau or len(tested) < 2 or any(roles.get(sid) == "grounds" for sid in tested):
            continue  # a layer that does not ground the claim, or one of its sources does on its own
        carriers = [sid for sid in tested if roles.get(sid) == "redundant"]
        named = carriers if len(carriers) >= 2 else tested  # the carriers, when redundancy resolution found them
        out.append(
            Caveat(
                "shared_carriers",
                (
                    f"No single source of the {layer} layer, removed on its own, lowers this sentence's score by "
                    f"τ = {_fmt(tau, unit)}, "
                    f"although removing the whole layer does (Δ = {_fmt(drop, unit)}): its sources share what "
                    f"the sentence says — the same record twice, or look-alike records with the same ids, dates and "
                    f"amounts that differ in one field. The estimator cannot tell which of {', '.join(named)} the "
                    "answer followed; "
                    "compare the sentence's values with each of them. (On the hard validity set, look-alike records "
                    "were never told apart.)"
                ),
            )
        )
    if verdict != "no_information" and any(m in w for w in warnings for m in CUT_MARKERS):
        out.append(
            Caveat(
                "cut_context",
                (
                    "Part of this context was cut before scoring (see the warnings naming the cut). The sources named "
                    "are the best among the part that was scored; the sentence may come from the part that was cut, "
                    "which no measurement here can see — read the cut source in full before relying on this result. "
                    "(On the hard validity set, a cause past the cut was never recognised as such.)"
                ),
            )
        )
    if verdict == "internal_knowledge" and gamma >= REWORDED_FRACTION * tau_gamma > 0:
        out.append(
            Caveat(
                "reworded_source",
                (
                    f"Reported as the model's own knowledge, but narrowly: the context raises this sentence by "
                    f"Γ = {_fmt(gamma, unit)}, under the threshold τ_Γ = {_fmt(tau_gamma, unit)} "
                    "yet more than half of it. "
                    "An answer that restates a source in other words reads this way (the threshold grows with the "
                    "sentence's length); check the sources for the same facts in other words. (On the hard validity "
                    "set, 2 of 8 held-out paraphrases were reported as internal knowledge.)"
                ),
            )
        )
    return out
