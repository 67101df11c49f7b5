"""The result of one traced claim (Algorithm 4's return value), as frozen dataclasses.

Its JSON is the pydantic contract in ``result_models`` (``TraceResult.to_model()``; ``to_dict()`` is that
model's ``model_dump(mode="json")``), which the service and the interface read.
A score that carries no information is ``NaN`` in memory and ``null`` in JSON, never a number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .llm import Usage
from .result_models import (
    CallAccountModel,
    DumpsAsModel,
    LayerScoreModel,
    Role,
    SourceScoreModel,
    SupportLabel,
    SupportVerdictModel,
    TraceResultModel,
    Verdict,
    json_number,
)
from .units import Layer

__all__ = [
    "VERDICT_TEXT",
    "CallAccount",
    "LayerScore",
    "ProgressEvent",
    "Role",
    "Round",
    "SourceScore",
    "SupportLabel",
    "SupportVerdict",
    "TraceResult",
    "Verdict",
    "decide_verdict",
    "json_number",
]

Round = Literal["round1", "round2", "redundancy", "spans", "probe"]

VERDICT_TEXT: Mapping[str, str] = {
    "attributed": "attributed",
    "redundant": "carried by several sources",
    "internal_knowledge": "answered from the model's own knowledge",
    "no_information": "no information: the judge gave no usable score for a measurement the verdict rests on",
}


@dataclass(frozen=True)
class ProgressEvent:
    """A progress report of a running trace: calls so far against the plan, the stage, a message, and
    the layer drops Δ_L known so far (by layer name)."""

    calls_done: int
    calls_planned: int
    round: Round
    message: str
    layer_scores: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class SupportVerdict(DumpsAsModel):
    """Algorithm 5's verdict for one source: what the source says about the claim, with a verified span.

    ``quote`` is set only when it verified against the source's full text; ``no_information`` marks a
    verdict that carries none (the call failed or its answer could not be read)."""

    verdict: SupportLabel
    quote: str | None
    line_start: int | None
    line_end: int | None
    confidence: float
    downgraded: bool
    reason: str
    calls: int
    no_information: bool = False

    def to_model(self) -> SupportVerdictModel:
        return SupportVerdictModel.model_validate(self)


@dataclass(frozen=True)
class LayerScore(DumpsAsModel):
    """Round 1 for one layer: Δ_L = s(1) − s(1 ⊖ L), its role, and whether the measurement was missing."""

    layer: Layer
    delta: float
    role: Role
    s_without: float
    no_information: bool
    alone: float | None = None
    """The scalar with only this layer kept (measured when the claim is carried by several layers)."""

    def to_model(self) -> LayerScoreModel:
        return LayerScoreModel.model_validate(self)


@dataclass(frozen=True)
class SourceScore(DumpsAsModel):
    """One source: its round-2 drop (None when it was not tested) and its span check (None when it was
    not a span target, i.e. omitted by MAX_SOURCES and named in ``TraceResult.omitted``)."""

    source_id: str
    layer: Layer
    label: str
    kind: str
    delta: float | None
    role: Role | None
    support: SupportVerdict | None
    diagnosis: str | None
    s_without: float | None = None
    no_information: bool = False
    alone: float | None = None
    """The scalar with only this source kept of its layer; None when that was not measured."""

    def to_model(self) -> SourceScoreModel:
        return SourceScoreModel.model_validate(self)


@dataclass(frozen=True)
class CallAccount(DumpsAsModel):
    """Model calls of one trace.

    ``planned`` is the worst case the cost gate quoted; ``made`` every model call actually sent, scoring
    calls included (failed ones included); ``saved`` measurements answered from the per-trace memo
    instead of a call; ``cached`` answers served by a judgement cache (not calls, not in ``made``);
    ``failed`` calls that raised, ``failed_billed`` those of them the provider still billed; ``refused``
    calls the plan did not allow (never sent); ``billed`` calls the provider charged for."""

    planned: int
    made: int
    saved: int
    cached: int
    failed: int
    failed_billed: int = 0
    refused: int = 0
    billed: int = 0

    def to_model(self) -> CallAccountModel:
        return CallAccountModel.model_validate(self)


@dataclass(frozen=True)
class TraceResult(DumpsAsModel):
    """Everything Algorithm 4 returns for one claim, plus the disclosures that make it readable."""

    gamma: float
    s_all: float
    s_none: float
    verdict: Verdict
    verdict_text: str
    layers: tuple[LayerScore, ...]
    sources: tuple[SourceScore, ...]
    omitted: tuple[str, ...]
    unscorable: tuple[str, ...]
    round2_skipped_reason: str | None
    warnings: tuple[str, ...]
    calls: CallAccount
    usage: Usage
    cost_usd: float | None
    prompt_versions: Mapping[str, str]
    params: Mapping[str, Any]
    model: str
    corpus_digest: str
    diagnosis: str | None = None
    contributing_layers: tuple[Layer, ...] = ()
    claim: str = ""
    notes: tuple[str, ...] = field(default=())
    estimator: str = "judged"
    """Which scalar produced the scores: "judged" (a forced-choice digit), "expected" (the expected
    digit from the judge's top log-probabilities) or "logprob" (nats)."""
    redundancy: tuple[str, ...] = ()
    """Redundancy resolution in plain words: which sources or layers carry the claim alone."""

    @property
    def internal_knowledge(self) -> bool:
        return self.verdict == "internal_knowledge"

    @property
    def redundant(self) -> bool:
        return self.verdict == "redundant"

    def layer(self, layer: Layer) -> LayerScore:
        for score in self.layers:
            if score.layer == layer:
                return score
        raise KeyError(layer)

    def source(self, source_id: str) -> SourceScore:
        for score in self.sources:
            if score.source_id == source_id:
                return score
        raise KeyError(source_id)

    def to_model(self) -> TraceResultModel:
        """The JSON contract of this result (NaN scores are null)."""
        return TraceResultModel.model_validate(self)


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
