"""Every result shape of the method, declared once, as frozen pydantic models: the estimator builds these
very objects, and the service, its storage and the CLI read and write them.

A trace result, its layers, sources and span checks, the call account, the log-probability variant,
the agreement of two estimators, the declared-attribution audit, and the probe's verdict. A score that
carries no information is ``NaN`` in memory, where the estimator does arithmetic on it, and ``null`` in
JSON (``score.Score``); ``model_dump(mode="json")`` is the JSON contract, and validating it gives the
result back.

Why models rather than dataclasses with one ``TypeAdapter`` each: the JSON contract was already these
models' (field order, the computed ``unspent``, members that are absent rather than null, every field's
description in ``/openapi.json`` under the same component names), so making them the results keeps the
JSON and the OpenAPI document as they were, while the estimator's code changes only in how it builds and
copies a result (keywords, ``model_copy``).

What the estimator returns for one claim is ``TraceResultModel`` (``estimator`` judged or expected),
``LogprobTraceResultModel`` (logprob: the log-probability fields added) or ``ProxyTraceResultModel``. What a
trace job stores and ``GET /v1/traces/{id}`` returns is ``TraceJobResult``: a union keyed on ``estimator``,
one variant per estimator the service runs, each with the sentence's ``declared`` audit —
``JudgedTraceJobResultModel``, ``ExpectedTraceJobResultModel`` (the common fields),
``LogprobTraceJobResultModel`` (the log-probability fields required), ``BothTraceJobResultModel`` (the judged
trace's fields at the top, and the log-probability trace ``logprob`` and the ``agreement`` required) and
``ProxyTraceResultModel`` (the proxy's fields required; the log-probability fields when the proxy's scores
are shown). ``estimator`` names the job's estimator: a ``both`` result says ``both`` though its top-level
scores are the judged trace's. In ``/openapi.json`` ``TraceOut.result`` is a ``oneOf`` of the five
components with a ``discriminator`` on ``estimator``.

Results stored by earlier versions validate: fields added since (``alone``, ``redundancy``, the
``billed``/``refused`` call counts, ``declared``, ``kind``, ``usage.estimated``) have defaults. A trace
result stored before the union says ``estimator`` judged under ``both`` (with ``logprob`` and ``agreement``
beside the judged trace), or no ``estimator`` at all: ``trace_estimator`` reads the first as ``both``, one
with the proxy's fields as ``proxy`` and one without ``estimator`` as ``judged``, before the discriminator
picks the variant (a validator before a discriminator on the field, not a callable ``Discriminator``: only a
field's discriminator puts its ``mapping`` in the OpenAPI document). A job result says its ``kind``
(``trace`` or ``probe``); one stored without it is told apart by its fields (``JobResult``).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Discriminator, Field, Tag, TypeAdapter, computed_field

from estimator.corpus.envelope import Envelope
from estimator.corpus.units import Layer
from estimator.custody.freshness import FreshnessFinding
from estimator.results.proxy import ProxyReportModel
from estimator.results.score import RESULT_CONFIG, Score, json_number

__all__ = [
    "AgreementModel",
    "AgreementSummaryModel",
    "ArgumentSourceModel",
    "BothTraceJobResultModel",
    "CallAccountModel",
    "DeclaredAuditModel",
    "DeclaredOutcome",
    "DeclaredRefModel",
    "DisagreementKind",
    "DisagreementModel",
    "DumpsAsModel",
    "ExpectedTraceJobResultModel",
    "InjectionModel",
    "JobResult",
    "JudgedTraceJobResultModel",
    "LayerScoreModel",
    "LogprobThresholdsModel",
    "LogprobTraceJobResultModel",
    "LogprobTraceResultModel",
    "ProbeCallsModel",
    "ProbeResultModel",
    "ProbeVerdict",
    "ProxyTraceResultModel",
    "QuoteCallsModel",
    "RefKind",
    "Role",
    "Score",
    "ScoringQuoteModel",
    "SourceScoreModel",
    "SpreadModel",
    "SupportLabel",
    "SupportVerdictModel",
    "TraceJobResult",
    "TraceResultModel",
    "TraceTargetModel",
    "UsageModel",
    "Verdict",
    "job_result_kind",
    "json_number",
    "sampling_note",
    "trace_estimator",
    "trace_job_result",
]

Role = Literal["grounds", "distractor", "irrelevant", "redundant"]
Verdict = Literal["internal_knowledge", "redundant", "attributed", "no_information"]
SupportLabel = Literal["supported", "contradicted", "silent"]
ProbeVerdict = Literal["required", "not_required", "inconclusive"]
DeclaredOutcome = Literal["consistent", "conflated", "unsupported_citation", "none_declared"]
RefKind = Literal["phrase", "history", "citation_marker", "url", "path", "file_name", "tool_name"]


class _Model(BaseModel):
    model_config = RESULT_CONFIG

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: ``model_dump(mode="json")`` (a score without information is null)."""
        return self.model_dump(mode="json")


class DumpsAsModel:
    """An object whose JSON is a model's: ``to_dict()`` is ``to_model().model_dump(mode="json")``."""

    def to_model(self) -> BaseModel:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return self.to_model().model_dump(mode="json")


class SupportVerdictModel(_Model):
    """Algorithm 5's span check of one source; ``quote`` only when it verified against the source."""

    verdict: SupportLabel
    quote: str | None
    line_start: int | None
    line_end: int | None
    confidence: Score
    downgraded: bool
    reason: str
    calls: int
    no_information: bool = False  # the verdict carries none: the call failed or its answer could not be read


def _unsampled(value: object) -> bool:
    return value is None


class SpreadModel(_Model):
    """One measurement taken ``repeats`` times: every sample in the order asked (null: it gave no information),
    and the lowest and highest of those that gave one. The score used is their median."""

    samples: tuple[Score, ...]
    low: Score
    high: Score


def sampling_note(repeats: int) -> str:
    """What a trace's ``repeats`` says about its scores, for the reader of its result."""
    if repeats <= 1:
        return (
            "A single sample was taken per measurement (repeats=1): how much a score varies from one call to the "
            "next is unknown; repeats k (--repeats k) measures each k times."
        )
    return (
        f"Each measurement was taken {repeats} times (repeats={repeats}): a score is the median of its samples, "
        "shown with their spread (lowest–highest); span checks were made once."
    )


def _spread() -> Any:
    return Field(
        None,
        exclude_if=_unsampled,
        description="the samples of the score without it (repeats > 1), lowest and highest; absent for one sample",
    )


class LayerScoreModel(_Model):
    """Round 1 for one layer: Δ_L, its role, s without the layer, and Δ with only this layer kept."""

    layer: Layer
    delta: Score
    role: Role
    s_without: Score
    no_information: bool
    alone: Score | None = None
    """The scalar with only this layer kept (measured when the claim is carried by several layers)."""
    spread: SpreadModel | None = _spread()


class SourceScoreModel(_Model):
    """One source: its round-2 drop (null when not tested) and its span check (null when not a target)."""

    source_id: str
    layer: Layer
    label: str
    kind: str
    delta: Score | None
    role: Role | None
    s_without: Score | None = None
    no_information: bool = False
    support: SupportVerdictModel | None
    diagnosis: str | None
    alone: Score | None = None
    """The scalar with only this source kept of its layer; None when that was not measured."""
    spread: SpreadModel | None = _spread()
    envelope: Envelope | None = Field(
        None,
        exclude_if=lambda v: v is None,  # results stored before envelopes read and write as they were
        description="the source's evidence envelope: tool, server, resource, observed_at, principal, digest, …",
    )


DisagreementKind = Literal["drop_exceeds_gamma", "distractor_carries_alone", "carrier_silent", "context_without_ground"]


class DisagreementModel(_Model):
    """Two measurements of one trace that cannot both be true (``loo.coherence``): reported with their numbers,
    and the verdict downgraded or hedged."""

    kind: DisagreementKind
    subject: str = Field(description="the layer or source the disagreement is about")
    values: dict[str, Score] = Field(description="the numbers that disagree (Δ, Γ, τ, keep-alone score, s(1))")
    text: str = Field(description="the disagreement in words, with its numbers")


class CallAccountModel(_Model):
    """Model calls of one trace: planned (the quoted worst case), made (sent, failed ones included), saved
    (answered from the trace's memo), cached (answered by a judgement cache), failed, billed, refused."""

    planned: int
    made: int
    saved: int
    cached: int
    failed: int
    failed_billed: int = 0
    refused: int = 0
    billed: int = 0
    scored: int | None = Field(
        None, exclude_if=lambda v: v is None, description="estimator proxy: local scoring passes (free; never in made)"
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def unspent(self) -> int:
        """planned − made: the reserved calls released after the trace."""
        return self.planned - self.made


class UsageModel(_Model):
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    estimated: bool = Field(
        False,
        description="true when the provider reported no usage for some call: its tokens were counted from the "
        "request as sent and the answer as received, and billed at the model's price",
    )


def _absent(value: object) -> bool:
    return value is None


def _none_found(value: tuple[object, ...]) -> bool:
    return not value


class TraceTargetModel(_Model):
    """What a trace of an action traced (absent from a sentence's trace): the call, as the judge and scorer saw it."""

    kind: Literal["action"] = "action"
    id: str = Field(description="the action's id in its turn: a0, a1, … in the order the calls were made")
    tool: str
    call_id: str | None = Field(description="the tool call id the history gave the call; null when it has none")
    text: str = Field(description="the call as traced: name(canonical JSON of its arguments)")
    context_sources: tuple[str, ...] = Field(
        description="the sources the agent could read when it made the call (tool returns that came back later, "
        "its own included, are never its cause and were left out)"
    )


class ArgumentSourceModel(_Model):
    """Where one argument value of an action first appears in what the agent could read (no model call)."""

    path: str = Field(description="where the value sits in the arguments, e.g. recipient or items[0].sku")
    value: str
    decisive: bool = Field(description="a value that decides what the action does (not a boolean or tiny number)")
    source_id: str | None = Field(description="the first source holding it; null: it appears nowhere (invented)")
    layer: str | None = None
    lines: tuple[int, int] | None = None
    quote: str | None = None


class InjectionModel(_Model):
    """Whether the action obeyed instructions a tool return gave the agent, by the trace's measurements."""

    suspected: bool = Field(
        description="a tool return that addresses the agent with instructions grounds this call (removing it "
        "drops the score by at least τ), and the user's own words do not ask for it"
    )
    source_id: str | None = None
    lines: tuple[int, int] | None = Field(None, description="the instruction's lines in that source (1-based)")
    quote: str | None = Field(None, description="the instruction, as it stands in the source")
    delta: Score | None = Field(None, description="the drop in the score when that source is removed")
    screened: bool = Field(description="what the free screen (no model call) said of this action")
    because: str = Field(description="the finding in plain words")


class TraceResultModel(_Model):
    """Everything Algorithm 4 returns for one claim, plus the disclosures that make it readable."""

    kind: Literal["trace"] = "trace"
    claim: str = ""
    estimator: str = Field("judged", description="judged, expected or logprob: the scalar behind the scores")
    gamma: Score = Field(description="Γ = s(1) − s(0); null when it could not be measured")
    s_all: Score
    s_none: Score
    repeats: int | None = Field(
        None,
        ge=1,
        exclude_if=_unsampled,
        description="samples per measurement: each score is the median of this many model calls (absent in "
        "results stored before it was recorded, which took one)",
    )
    sampling: str | None = Field(
        None,
        exclude_if=_unsampled,
        description="what repeats says of the scores, in words: with one sample, that their spread is unknown",
    )
    s_all_spread: SpreadModel | None = Field(
        None, exclude_if=_unsampled, description="the samples of s(1) (repeats > 1); absent for one sample"
    )
    s_none_spread: SpreadModel | None = Field(
        None, exclude_if=_unsampled, description="the samples of s(0) (repeats > 1); absent for one sample"
    )
    verdict: Verdict
    verdict_text: str
    diagnosis: str | None = None
    contributing_layers: tuple[Layer, ...] = Field(
        (), description="the layers whose removal lowers the score by τ or more (role grounds), largest first"
    )
    searched_layers: tuple[Layer, ...] | None = Field(
        None,
        exclude_if=_absent,
        description="the layers round 2 searched: every layer whose removal moved the score by τ either way "
        "(a distracting layer is searched, not contributing); absent in results stored before it was recorded",
    )
    tau: Score | None = Field(None, exclude_if=_absent, description="τ: the smallest drop this trace counts")
    tau_gamma: Score | None = Field(
        None, exclude_if=_absent, description="τ_Γ: the least Γ at which the context, not the model, carries the claim"
    )
    disagreements: tuple[DisagreementModel, ...] = Field(
        (),
        exclude_if=_none_found,
        description="measurements of this trace that contradict each other (a noisy judge); absent when none",
    )
    layers: tuple[LayerScoreModel, ...]
    sources: tuple[SourceScoreModel, ...]
    omitted: tuple[str, ...]
    unscorable: tuple[str, ...]
    round2_skipped_reason: str | None
    redundancy: tuple[str, ...] = Field((), description="which sources or layers carry the claim alone, in words")
    warnings: tuple[str, ...]
    calls: CallAccountModel
    usage: UsageModel
    cost_usd: Score | None
    prompt_versions: dict[str, str]
    params: dict[str, Any]
    model: str
    corpus_digest: str
    notes: tuple[str, ...] = Field((), exclude=True)
    """How the scalar and the thresholds were read (in memory only, not in the JSON)."""
    target: TraceTargetModel | None = Field(
        None, exclude_if=_absent, description="a trace of an action: the call traced (absent for a sentence)"
    )
    argument_sources: tuple[ArgumentSourceModel, ...] | None = Field(
        None, exclude_if=_absent, description="a trace of an action: where each argument value came from"
    )
    injection: InjectionModel | None = Field(
        None, exclude_if=_absent, description="a trace of an action: whether tool data steered it"
    )
    freshness: tuple[FreshnessFinding, ...] | None = Field(
        None,
        exclude_if=_absent,
        description="a trace of an action: the operator's freshness rules for its tool, checked (absent: no rule)",
    )

    @property
    def internal_knowledge(self) -> bool:
        return self.verdict == "internal_knowledge"

    @property
    def redundant(self) -> bool:
        return self.verdict == "redundant"

    def layer(self, layer: Layer) -> LayerScoreModel:
        for score in self.layers:
            if score.layer == layer:
                return score
        raise KeyError(layer)

    def source(self, source_id: str) -> SourceScoreModel:
        for score in self.sources:
            if score.source_id == source_id:
                return score
        raise KeyError(source_id)


class LogprobThresholdsModel(_Model):
    tau_nats: Score
    tau_gamma_nats: Score


class LogprobTraceResultModel(TraceResultModel):
    """A trace whose scores are log-probabilities in nats (``estimator`` logprob)."""

    units: Literal["nats"] = "nats"
    thresholds: LogprobThresholdsModel
    claim_tokens: int
    claim_token_logprobs: tuple[Score, ...]
    scorer_model: str


class AgreementSummaryModel(_Model):
    verdict: Verdict
    top_layer: str | None
    top_source: str | None


class AgreementModel(_Model):
    """Agreement of the judged and the log-probability traces of one claim (estimator both)."""

    same_verdict: bool
    same_top_layer: bool
    same_top_source: bool
    spearman: float | None = Field(description="Spearman ρ of the source drops both rounds 2 tested")
    compared_sources: tuple[str, ...]
    judged: AgreementSummaryModel
    logprob: AgreementSummaryModel


class DeclaredRefModel(_Model):
    """One explicit credit in a sentence and the sources it resolves to (empty: none in the context)."""

    text: str
    span: tuple[int, int]
    source_ids: tuple[str, ...]
    kind: RefKind
    families: tuple[str, ...] = ()


class DeclaredAuditModel(_Model):
    """The declared source(s) of a sentence compared with the source(s) that verifiably ground it."""

    outcome: DeclaredOutcome
    declared: tuple[DeclaredRefModel, ...]
    credited: tuple[str, ...]
    grounding: tuple[str, ...]
    explanation: str


def _declared() -> Any:
    return Field(None, exclude_if=_absent, description="the declared-attribution audit of the sentence")


class JudgedTraceJobResultModel(TraceResultModel):
    """The stored result of a trace job under estimator judged: the trace and its declared-attribution audit."""

    estimator: Literal["judged"] = Field(description="judged: the forced-choice judge's digit")
    declared: DeclaredAuditModel | None = _declared()


class ExpectedTraceJobResultModel(TraceResultModel):
    """The stored result of a trace job under estimator expected: the trace and its declared-attribution audit."""

    estimator: Literal["expected"] = Field(
        description="expected: the judge's expected digit from its top log-probabilities"
    )
    declared: DeclaredAuditModel | None = _declared()


class LogprobTraceJobResultModel(LogprobTraceResultModel):
    """The stored result of a trace job under estimator logprob: the log-probability trace (scores in nats)
    and its declared-attribution audit."""

    estimator: Literal["logprob"] = Field(description="logprob: log p(claim) from a scoring-capable model")
    declared: DeclaredAuditModel | None = _declared()


class BothTraceJobResultModel(TraceResultModel):
    """The stored result of a trace job under estimator both: the judged trace's fields (its scores are the
    judge's digits), the log-probability trace of the same claim, their agreement, and the declared audit."""

    estimator: Literal["both"] = Field(
        description="both: the judged trace (these scores), then the log-probability trace beside it"
    )
    logprob: LogprobTraceResultModel = Field(description="the log-probability trace of the same claim")
    agreement: AgreementModel = Field(description="how the two traces agree")
    declared: DeclaredAuditModel | None = _declared()


class ProxyTraceResultModel(TraceResultModel):
    """A proxy trace (estimator proxy), as the estimator returns it and a trace job stores it: the trace's
    fields, its log-probability fields when the proxy's scores are shown (confirmed; absent after a
    fallback), the declared audit when made, and the proxy's own fields, always present."""

    estimator: Literal["proxy"] = Field(
        description="proxy: a local scoring model ranked the sources and the hosted judge confirmed the ranking"
    )
    units: Literal["nats"] | None = Field(None, exclude_if=_absent)
    thresholds: LogprobThresholdsModel | None = Field(None, exclude_if=_absent)
    claim_tokens: int | None = Field(None, exclude_if=_absent)
    claim_token_logprobs: tuple[Score, ...] | None = Field(None, exclude_if=_absent)
    scorer_model: str | None = Field(None, exclude_if=_absent)
    declared: DeclaredAuditModel | None = _declared()
    proxy_model: str = Field(description="the local model that ranked the sources")
    confirmed: bool = Field(
        description="whether the hosted judge confirmed the proxy's ranking (else the full judged search ran)"
    )
    confirmation: str = Field(description="that, in words")
    proxy: ProxyReportModel = Field(description="both rankings and the hosted judge's measurements")


_PROXY_MEMBERS = ("proxy_model", "confirmed", "confirmation", "proxy")
_BOTH_MEMBERS = ("logprob", "agreement")


def trace_estimator(value: Any) -> Any:
    """A stored trace result with the ``estimator`` of its variant: one stored before the union said
    ``judged`` under ``both`` (its ``logprob`` and ``agreement`` beside the judged trace) and may say
    nothing; the proxy's fields make it ``proxy``, ``logprob``/``agreement`` make it ``both``, and one
    without ``estimator`` is ``judged``. A result that already names another estimator is left as it is,
    and a trace result the estimator returned (not a variant) is read by its fields."""
    if isinstance(value, _TRACE_JOB_VARIANTS):
        return value
    if isinstance(value, BaseModel):
        value = {name: getattr(value, name) for name in type(value).model_fields}
    if not isinstance(value, dict):
        return value
    said = value.get("estimator")
    if said not in (None, "judged"):
        return value
    if any(value.get(name) is not None for name in _PROXY_MEMBERS):
        return {**value, "estimator": "proxy"}
    if any(value.get(name) is not None for name in _BOTH_MEMBERS):
        return {**value, "estimator": "both"}
    return value if said == "judged" else {**value, "estimator": "judged"}


_TRACE_JOB_VARIANTS = (
    JudgedTraceJobResultModel,
    ExpectedTraceJobResultModel,
    LogprobTraceJobResultModel,
    BothTraceJobResultModel,
    ProxyTraceResultModel,
)

TraceJobResult = Annotated[
    JudgedTraceJobResultModel
    | ExpectedTraceJobResultModel
    | LogprobTraceJobResultModel
    | BothTraceJobResultModel
    | ProxyTraceResultModel,
    Field(discriminator="estimator"),
    BeforeValidator(trace_estimator),
]
"""The stored result of a trace job (``GET /v1/traces/{id}``): one variant per estimator, keyed on
``estimator``; earlier rows are read by ``trace_estimator`` first."""


@cache
def _trace_job_adapter() -> TypeAdapter[TraceJobResult]:
    return TypeAdapter(TraceJobResult)


def trace_job_result(value: Any) -> TraceJobResult:
    """A stored trace result (its JSON, or a model with its fields) as its variant of ``TraceJobResult``."""
    return _trace_job_adapter().validate_python(value)


class ProbeCallsModel(_Model):
    planned: int = Field(description="2k regenerations")
    made: int
    failed: int


class ProbeResultModel(_Model):
    """Algorithm 6's verdict for one (claim, source) pair (``GET /v1/probes/{id}``)."""

    kind: Literal["probe"] = "probe"
    verdict: ProbeVerdict
    note: str | None
    target_id: str = Field(description="the source removed")
    anchors: tuple[str, ...]
    # B and W are None when not measured: the bail-out sent nothing, and a failed call leaves only partial
    # data, which is never reported as a count.
    baseline: int | None = Field(description="B: full-context runs that repeat the claim; null when not measured")
    without: int | None = Field(description="W: runs without the source that repeat it; null when not measured")
    k: int
    calls: ProbeCallsModel
    usage: UsageModel
    cost_usd: float | None
    prompt_version: str
    model: str

    @property
    def required(self) -> bool:
        return self.verdict == "required"


class QuoteCallsModel(_Model):
    """The planned calls of a quote, by stage (worst case); rounds 1 and 2 and redundancy count every sample."""

    round1: int
    round2: int
    redundancy: int = Field(0, description="redundancy resolution, worst case: each candidate kept alone once")
    spans: int
    probe: int
    repeats: int = Field(
        1,
        ge=1,
        exclude_if=lambda v: v == 1,
        description="samples per measurement: rounds 1 and 2 and redundancy are counted this many times, span "
        "checks once (absent when 1)",
    )

    @property
    def ablation(self) -> int:
        """Calls of the scalar (judge or scorer): rounds 1 and 2 and redundancy resolution."""
        return self.round1 + self.round2 + self.redundancy


class ScoringQuoteModel(_Model):
    """Whether the model can score (log p of a supplied claim) and what a logprob trace's scoring costs."""

    can_score: bool
    how: Literal["in-process", "completions-echo", "none"]
    reason: str
    scoring_calls: int = Field(description="prompt-only scoring calls of a logprob trace (worst case)")
    span_calls: int
    scoring_prompt_tokens: int
    scoring_output_tokens: int


def job_result_kind(value: Any) -> str:
    """The kind of a job result: its ``kind``, else (stored before ``kind`` existed) a probe by its
    ``target_id``, else a trace."""
    if isinstance(value, dict):
        kind = value.get("kind")
        return str(kind) if kind else ("probe" if "target_id" in value else "trace")
    return str(getattr(value, "kind", "trace"))


JobResult = Annotated[
    Annotated[TraceJobResult, Tag("trace")] | Annotated[ProbeResultModel, Tag("probe")],
    Discriminator(job_result_kind),
]
"""The result of a job of either kind, told apart by ``kind``."""
