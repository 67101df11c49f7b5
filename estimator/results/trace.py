"""What a trace reports while it runs, and how its verdict is decided.

The result of one traced claim (Algorithm 4's return value) is ``result_models.TraceResultModel``, the
one definition of its shape: a score that carries no information is ``NaN`` in memory and ``null`` in
JSON, never a number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from estimator.corpus.units import Layer
from estimator.results.models import Role, SupportLabel, Verdict, json_number

__all__ = [
    "ProgressEvent",
    "Role",
    "Round",
    "SupportLabel",
    "Verdict",
    "decide_verdict",
    "json_number",
]

Round = Literal["round1", "round2", "redundancy", "spans", "probe"]


@dataclass(frozen=True)
class ProgressEvent:
    """A progress report of a running trace: the calls made so far against the calls planned (the call
    account's words, ``CallLedger.made`` and ``.planned``), the stage, a message, and the layer drops Δ_L
    known so far (by layer name)."""

    made: int
    planned: int
    round: Round
    message: str
    layer_scores: Mapping[str, float] = field(default_factory=dict)


def decide_verdict(
    gamma: float, contributing: tuple[Layer, ...], tau_gamma: float, *, unmeasured: bool = False
) -> Verdict:
    """``unmeasured``: a layer's removal gave no information. Then no contributing layer does not show
    the claim is carried by several layers (the unmeasured one may carry it alone): no information."""
    if math.isnan(gamma):
        return "no_information"
    if gamma < tau_gamma:
        return "internal_knowledge"
    if contributing:
        return "attributed"
    return "no_information" if unmeasured else "redundant"
