"""Request and response models of the HTTP API (``/v1``), with OpenAPI examples.

The stored-turn model itself (``estimator.corpus.turn.StoredTurn``) is the body of ``POST /v1/turns``.
Everything returned is one of these models, so the OpenAPI schema is the contract.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from estimator.audit.answer_gate import Decision, Rule
from estimator.corpus.turn import StoredTurn
from estimator.loo.logprob_cost import EstimatorChoice
from estimator.params import MAX_REPEATS
from estimator.results.models import (
    DeclaredAuditModel,
    ProbeResultModel,
    QuoteCallsModel,
    ScoringQuoteModel,
    TraceJobResult,
    Verdict,
)
from estimator.results.proxy import ProxyQuoteModel
from provenance_api.core.errors import InvalidInput
from provenance_api.core.schemas_actions import ActionSourceOut

ParamsOverride = dict[str, Any]
PARAMS_DESCRIPTION = (
    "Overrides of the method's §7.8 constants (validated; unknown names are rejected). "
    "Ceilings (max_calls, max_evidence_tokens, max_sources, concurrency, …) may be lowered, "
    "never raised; rate_* are server policy."
)
ESTIMATOR_DESCRIPTION = (
    "The scalar: judged (a forced-choice judge's digit, any chat model), expected (the same judge's expected "
    "digit over 1-9 from its top log-probabilities, where the model offers them), logprob (log p of the claim "
    "from a scoring-capable model) or both (judged and logprob), with their agreement; proxy: a local scoring model "
    "ranks the sources for free and the judge confirms the ranking in a few calls, running the full judged search "
    "only when it disagrees."
)


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class Problem(BaseModel):
    """RFC 9457 problem details; ``field`` names the offending input and ``fix`` says what to do."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "type": "urn:provenance:problem:invalid-input",
                    "title": "Invalid input",
                    "status": 422,
                    "detail": "the selected sentence does not occur in the turn's response",
                    "field": "sentence",
                    "fix": "select text from the response as shown, or pass a segment id such as r3",
                }
            ]
        },
    )

    type: str
    title: str
    status: int
    detail: str
    instance: str | None = None
    field: str | None = None
    fix: str | None = None
    request_id: str | None = None


# --------------------------------------------------------------------------- turns


class TurnStored(_Out):
    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "turn_id": "turn-support-fallback-0042",
                    "digest": "9f2c…",
                    "stored_at": "2026-01-05T10:00:00Z",
                    "created": True,
                }
            ]
        },
    )

    turn_id: str
    digest: str = Field(description="sha256 of the turn's canonical JSON: its identity for idempotency")
    stored_at: datetime
    created: bool = Field(description="false when the same content was already stored (idempotent replay)")


TurnSort = Literal["stored_at", "-stored_at", "created_at", "-created_at", "model", "-model", "traceable", "-traceable"]
"""The turn list's orders: a field, ascending, or ``-field``, descending. Turns without the value (no
``created_at``, no ``model``) come last either way; equal values are ordered by ``turn_id``."""


class TurnSummary(_Out):
    turn_id: str
    digest: str
    model: str | None
    agent: str | None
    created_at: datetime | None
    stored_at: datetime
    traceable: int = Field(
        description="sentences of the response the free tier says can be traced (counted when "
        "the turn was stored; 0 for a turn that can no longer be read)"
    )
    traces: int = Field(description="traces run on the turn (any status; probes are not counted)")


class TurnList(_Out):
    items: list[TurnSummary]
    total: int = Field(description="turns matching q and the filters, on every page (the cursor is ignored)")
    next_cursor: str | None = Field(
        description="pass as ?cursor= for the next page, with the same q, filters and sort; null on the last page"
    )


class TurnOut(_Out):
    turn_id: str
    digest: str
    stored_at: datetime
    turn: StoredTurn


# --------------------------------------------------------------------------- sources


class SourceOut(_Out):
    id: str
    layer: str
    kind: str
    tool: str
    label: str
    tokens: int = Field(description="untruncated size in tokens")
    truncated_for_ablation: bool
    truncated_for_span_check: bool
    transformations: list[str]
    digest: str = Field(description="sha256 of the source's full, untruncated text")
    unversioned: bool
    turns_ago: int | None


class LayerOut(_Out):
    layer: Literal["tools", "instructions", "history"]
    sources: list[SourceOut]


class ExcludedOut(_Out):
    tool: str
    label: str
    reason: str


class SourcesOut(_Out):
    turn_id: str
    corpus_digest: str
    path: str = Field(description="primary (native messages), fallback (flattened tool calls) or none")
    source_count: int
    layers: list[LayerOut]
    unversioned: bool
    unscorable: list[str] = Field(
        description="what no score can be drawn from: attachments whose bytes were not kept, media a tool returned"
    )
    excluded: list[ExcludedOut] = Field(description="tool calls not made sources, and why")


# --------------------------------------------------------------------------- segments (free tier)


class CitationOut(_Out):
    source_id: str
    line_start: int
    line_end: int
    quote: str | None = None


class SegmentOut(_Out):
    model_config = ConfigDict(frozen=True, populate_by_name=True, serialize_by_alias=True)

    id: str
    text: str
    start: int
    end: int
    status: Literal["traceable", "quoted", "action", "agent_voice", "unanchored"]
    klass: str = Field(alias="class")
    anchors: list[str]
    citations: list[CitationOut]


class GateSummaryOut(_Out):
    sources: int
    sentences: int
    traceable: int
    quoted: int
    agent_voice: int
    action: int
    unanchored: int
    line: str = Field(description="the accounting line, e.g. '8 sources · 13 sentences: 3 you can trace, …'")


class SegmentsOut(_Out):
    turn_id: str
    corpus_digest: str
    summary: GateSummaryOut
    segments: list[SegmentOut]
    answered_at: datetime | None = Field(None, description="when the answer was produced (null: not recorded)")
    sources: list[ActionSourceOut] = Field(
        default_factory=list, description="the sources, each with its evidence envelope and its age at the answer"
    )


class ClientSegment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, max_length=64)
    text: str = Field(min_length=1, max_length=20_000)


class SegmentsIn(BaseModel):
    """Segments as the client's renderer drew them; used as given, never re-split."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"segments": [{"id": "p1", "text": "Layer: MODIS Annual Land Cover Type (IGBP classification)."}]}
            ]
        },
    )

    segments: list[ClientSegment] = Field(min_length=1, max_length=2000)
    params: ParamsOverride | None = Field(None, description=PARAMS_DESCRIPTION)


# --------------------------------------------------------------------------- quotes


class TargetIn(BaseModel):
    """A trace target other than a sentence: one action (tool call) of the turn."""

    model_config = ConfigDict(extra="forbid")

    action: str = Field(
        pattern=r"^a\d{1,6}$",
        description="the action's id: a0, a1, … in the order the agent made its tool calls "
        "(GET /v1/turns/{id}/actions lists them)",
    )


def _selected(sentence: str | None, target: TargetIn | None) -> str | None:
    """What to trace: the sentence (or its id), or the action's id; refuses both at once."""
    if sentence is not None and target is not None:
        raise InvalidInput(
            "send a sentence or a target, not both",
            field="target",
            fix='trace a sentence with {"sentence": …}, an action with {"target": {"action": "a3"}}',
        )
    return target.action if target is not None else sentence


REPEATS_DESCRIPTION = (
    f"Samples per measurement, 1 to {MAX_REPEATS} (params.repeats; default 1): each measurement of rounds 1 and 2 "
    "and of redundancy resolution is made this many times, every sample a model call the quote prices and the "
    "plan counts; the score is their median and their spread is in the result. Span checks are made once."
)


def _with_repeats(params: ParamsOverride | None, repeats: int | None) -> ParamsOverride | None:
    """A request's params with its ``repeats`` (a 422 naming repeats when params.repeats says otherwise)."""
    if repeats is None:
        return params
    said = (params or {}).get("repeats", repeats)
    if said != repeats:
        raise InvalidInput(
            f"repeats={repeats} and params.repeats={said!r} disagree",
            field="repeats",
            fix="send repeats or params.repeats, not both",
        )
    return {**(params or {}), "repeats": repeats}


class QuoteIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "turn_id": "turn-support-fallback-0042",
                    "sentence": "Refunds are issued to the original payment method within 5 to 7 "
                    "business days after approval.",
                    "probe": False,
                }
            ]
        },
    )

    turn_id: str = Field(min_length=1, max_length=256)
    sentence: str | None = Field(
        None,
        min_length=1,
        max_length=20_000,
        description="text of the response (after normalisation) or a segment id such as r3; or send target",
    )
    target: TargetIn | None = Field(None, description='an action to trace instead of a sentence: {"action": "a3"}')
    model: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="litellm model string of the judge; "
        "only a model on the service's allow-list (else 422); default: the turn's own model "
        "when allowed, else the service's default",
    )
    probe: StrictBool = False  # JSON true or false only: "yes", 1 or "true" is refused
    params: ParamsOverride | None = Field(None, description=PARAMS_DESCRIPTION)
    estimator: EstimatorChoice = Field("judged", description=ESTIMATOR_DESCRIPTION)
    repeats: int | None = Field(None, ge=1, le=MAX_REPEATS, description=REPEATS_DESCRIPTION)

    def overrides(self) -> ParamsOverride | None:
        """``params`` with ``repeats`` folded in: what the quote is made with."""
        return _with_repeats(self.params, self.repeats)

    def selected(self) -> str:
        """The sentence, its segment id, or the action's id; a 422 naming the field when neither is sent."""
        chosen = _selected(self.sentence, self.target)
        if chosen is None:
            raise InvalidInput(
                "a quote needs a sentence or a target",
                field="sentence",
                fix='send {"sentence": "r3"} (text or a segment id), or {"target": {"action": "a3"}}',
            )
        return chosen


ScoringOut = ScoringQuoteModel  # the estimator's quote of a logprob trace's scoring
PlannedCalls = QuoteCallsModel  # the estimator's planned calls, by stage


class ExpectedDigitOut(_Out):
    offered: bool = Field(description="whether the judge model returns top log-probabilities (estimator expected)")
    how: str
    reason: str


class QuoteOut(_Out):
    quote_id: str
    expires_at: datetime
    turn_id: str
    claim: str = Field(description="the selected text that will be traced")
    segment_id: str | None
    model: str = Field(description="the judge model that will run")
    model_reason: str | None = Field(
        None,
        description="why this model: requested explicitly, the turn's own model "
        "on the allow-list, or the default (and why the turn's model is not used)",
    )
    sources: int
    planned_calls: int = Field(description="worst case; a trace never makes more")
    calls: PlannedCalls
    input_tokens: int
    output_tokens: int
    untruncated_corpus_tokens: int
    cost_usd: float | None = Field(description="null when the model's price is unknown")
    warnings: list[str]
    truncated_sources: list[str]
    refused: str | None = Field(description="why the cost gate refuses this trace; null when it may run")
    estimator: EstimatorChoice = Field("judged", description=ESTIMATOR_DESCRIPTION)
    expected_digit: ExpectedDigitOut | None = Field(
        None, description="whether the judge offers top log-probabilities, for estimator expected"
    )
    proxy: ProxyQuoteModel | None = Field(
        None,
        description="estimator proxy: the hosted calls, tokens and price of "
        "the confirmation and of the fallback's worst case (planned_calls and "
        "cost_usd are the worst case), the local passes and estimated seconds",
    )
    scoring: ScoringOut | None = Field(
        None,
        description="whether the model can score (log p of a supplied "
        "claim) and what a logprob trace's scoring costs; null for a probe",
    )


# --------------------------------------------------------------------------- traces


class TraceIn(BaseModel):
    """Either ``{quote_id}`` or ``{turn_id, sentence, max_cost_usd}`` (quoted and started at once)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"quote_id": "q_3f9a0c2b7d1e4a5b6c7d"},
                {"turn_id": "turn-support-fallback-0042", "sentence": "r2", "max_cost_usd": 0.05},
            ]
        },
    )

    quote_id: str | None = Field(None, min_length=1, max_length=40)
    turn_id: str | None = Field(None, min_length=1, max_length=256)
    sentence: str | None = Field(None, min_length=1, max_length=20_000)
    target: TargetIn | None = Field(None, description='an action to trace instead of a sentence: {"action": "a3"}')
    max_cost_usd: float | None = Field(None, ge=0, le=1_000_000)
    model: str | None = Field(None, min_length=1, max_length=256)
    probe: StrictBool = False  # JSON true or false only: "yes", 1 or "true" is refused
    params: ParamsOverride | None = Field(None, description=PARAMS_DESCRIPTION)
    estimator: EstimatorChoice | None = Field(None, description=ESTIMATOR_DESCRIPTION + " By quote_id: the quote's.")
    repeats: int | None = Field(
        None, ge=1, le=MAX_REPEATS, description=REPEATS_DESCRIPTION + " By quote_id: the quote's."
    )

    def overrides(self) -> ParamsOverride | None:
        """The inline form's ``params`` with ``repeats`` folded in: what its quote is made with."""
        return _with_repeats(self.params, self.repeats)

    def by_quote(self) -> bool:
        """True for the {quote_id} form; raise InvalidInput naming the field when neither form is complete."""
        inline = {
            "turn_id": self.turn_id,
            "sentence": _selected(self.sentence, self.target),
            "max_cost_usd": self.max_cost_usd,
        }
        if self.quote_id is not None:
            extra = (
                [k for k, v in inline.items() if v is not None]
                + [k for k in ("model", "params", "estimator", "repeats") if getattr(self, k) is not None]
                + (["probe"] if self.probe else [])
            )
            if extra:
                raise InvalidInput(
                    f"a trace by quote_id takes nothing else; got {', '.join(extra)}",
                    field=extra[0],
                    fix="send only {quote_id}, or the inline form without it",
                )
            return True
        missing = [k for k, v in inline.items() if v is None]
        if missing:
            raise InvalidInput(
                f"without quote_id a trace needs turn_id, sentence (or target) and max_cost_usd; missing "
                f"{', '.join(missing)}",
                field=missing[0],
                fix="send {quote_id} from POST /v1/quotes, or all of turn_id, sentence (or target), max_cost_usd",
            )
        return False

    def selected(self) -> str:
        """The inline form's sentence, segment id or action id (after ``by_quote`` found the form complete)."""
        chosen = _selected(self.sentence, self.target)
        assert chosen is not None
        return chosen


JobStatus = Literal["queued", "running", "succeeded", "failed", "interrupted"]
"""Where a job (a trace or a probe) is: only ``succeeded`` has a result; ``failed`` and ``interrupted``
say why in ``reason`` and keep the calls already billed."""


class JobCalls(_Out):
    """The calls block of a job (a trace or a probe), and of a verification's traces together."""

    planned: int = Field(description="the cost gate's worst case, reserved from the caller's budget")
    made: int = Field(description="calls sent to the provider, failed ones included; never answers from the cache")
    cached: int = Field(0, description="measurements answered from the judgement cache: not sent, not billed, $0")
    billed: int = Field(description="calls the provider charged for (answered ones, plus failed ones it billed)")
    failed: int = Field(0, description="sent calls that failed")


TraceCalls = JobCalls  # the same type, by its older name


class TraceOut(_Out):
    trace_id: str
    status: JobStatus
    turn_id: str
    quote_id: str
    claim: str
    segment_id: str | None
    model: str
    calls: JobCalls
    round: str | None = Field(description="round1, round2, redundancy, spans or probe while running")
    message: str | None
    layer_scores: dict[str, float | None] = Field(description="partial layer drops known so far")
    reason: str | None = Field(description="why a trace failed or was interrupted")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result: TraceJobResult | None = Field(
        description="the trace result, only when status is succeeded: one shape per estimator, keyed on estimator"
    )


TraceSort = Literal["-created_at", "created_at", "cost", "-cost"]
"""The trace list's orders (``-created_at``, newest first, by default); traces without a cost come last
either way; equal values are ordered by ``trace_id``."""


class TraceSummary(_Out):
    """One trace in the list across turns (``GET /v1/traces``)."""

    trace_id: str
    turn_id: str
    claim: str
    status: JobStatus
    verdict: Verdict | None = Field(description="the verdict, only when status is succeeded")
    estimator: EstimatorChoice | None = Field(
        description="the estimator the trace was started with; null when its quote is no longer kept"
    )
    model: str = Field(description="the judge model")
    calls: JobCalls
    cost_usd: float | None = Field(
        description="USD the provider billed, from the result; null until the trace "
        "succeeded or when the model has no known price"
    )
    created_at: datetime
    finished_at: datetime | None
    source: Literal["api", "cli"] = Field(
        description="api: started through the API or the viewer; cli: run by `provenance trace` and stored here"
    )


class TraceList(_Out):
    items: list[TraceSummary]
    total: int = Field(description="traces matching the filters, on every page (the cursor is ignored)")
    next_cursor: str | None = Field(
        description="pass as ?cursor= for the next page, with the same filters and sort; null on the last page"
    )


class ProgressOut(_Out):
    """The data of one ``progress`` server-sent event."""

    trace_id: str
    status: JobStatus
    calls: JobCalls = Field(
        description="the calls so far in the words of the job's own calls: planned, made, cached, billed, failed"
    )
    round: str | None
    message: str | None
    layer_scores: dict[str, float | None]


# --------------------------------------------------------------------------- probes


class ProbeIn(BaseModel):
    """Either ``{quote_id, source_id}`` (a probe quote: ``POST /v1/quotes`` with ``probe: true``) or
    ``{turn_id, sentence, source_id, max_cost_usd, k?}`` (quoted and started at once)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"quote_id": "q_3f9a0c2b7d1e4a5b6c7d", "source_id": "s0"},
                {
                    "turn_id": "turn-support-fallback-0042",
                    "sentence": "r2",
                    "source_id": "s0",
                    "k": 3,
                    "max_cost_usd": 0.05,
                },
            ]
        },
    )

    source_id: str = Field(min_length=1, max_length=64, description="the source to remove (s0, s1, …)")
    quote_id: str | None = Field(None, min_length=1, max_length=40)
    turn_id: str | None = Field(None, min_length=1, max_length=256)
    sentence: str | None = Field(None, min_length=1, max_length=20_000)
    k: int | None = Field(None, ge=1, le=20, description="regenerations per side (params.causal_samples)")
    max_cost_usd: float | None = Field(None, ge=0, le=1_000_000)
    model: str | None = Field(None, min_length=1, max_length=256)
    params: ParamsOverride | None = Field(None, description=PARAMS_DESCRIPTION)

    def as_trace(self) -> TraceIn:
        """The same request in the trace form, so both kinds share one quoting and budgeting path."""
        params = dict(self.params or {})
        if self.k is not None:
            if self.quote_id is not None:
                raise InvalidInput(
                    "a probe by quote_id takes k from its quote",
                    field="k",
                    fix="quote with params.causal_samples=k, or drop k",
                )
            params["causal_samples"] = self.k
        return TraceIn(
            quote_id=self.quote_id,
            turn_id=self.turn_id,
            sentence=self.sentence,
            max_cost_usd=self.max_cost_usd,
            model=self.model,
            params=params or None,
        )


class ProbeOut(_Out):
    probe_id: str
    status: JobStatus
    turn_id: str
    quote_id: str
    claim: str
    segment_id: str | None
    source_id: str
    model: str
    calls: JobCalls
    message: str | None
    reason: str | None = Field(description="why a probe failed or was interrupted")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result: ProbeResultModel | None = Field(
        description="verdict (required | not_required | inconclusive), note, anchors, baseline B and "
        "without W of k, calls, usage, cost — only when status is succeeded"
    )


# --------------------------------------------------------------------------- verification gate


class VerifyIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"max_cost_usd": 0.25}]})

    max_cost_usd: float = Field(ge=0, le=1_000_000, description="the budget for every trace of the answer")
    model: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="litellm model string of the judge; "
        "only a model on the service's allow-list (else 422); default: the turn's own model "
        "when allowed, else the service's default",
    )
    params: ParamsOverride | None = Field(None, description=PARAMS_DESCRIPTION)


class VerifySentenceOut(_Out):
    segment_id: str
    text: str
    status: str = Field(description="the free-tier status of the sentence")
    decision: Decision
    rule: Rule
    reason: str
    outcome: Literal["quoted", "traced", "error", "budget_refused"] | None = Field(
        description="what checking it produced; null when it needed no check"
    )
    trace_id: str | None
    verdict: Verdict | None = Field(description="the trace's verdict, when traced")
    declared: DeclaredAuditModel | None = Field(description="the declared-attribution audit, when traced or quoted")


class VerifyOut(_Out):
    turn_id: str
    decision: Decision
    rule: Rule = Field(description="the rule that fired")
    reason: str
    model: str
    model_reason: str | None = Field(None, description="why this judge model (see the quote's model_reason)")
    quoted_cost_usd: float = Field(description="the sum of the traces' quotes, within max_cost_usd")
    max_cost_usd: float
    calls: JobCalls
    sentences: list[VerifySentenceOut]


# --------------------------------------------------------------------------- health


class Health(_Out):
    status: Literal["ok"]


class Readiness(_Out):
    status: Literal["ready"]
    database: str
    running_traces: int


# --------------------------------------------------------------------------- documented problems

_PROBLEM_TEXT = {
    400: "The request could not be read.",
    401: "Missing or invalid API key.",
    403: "The key may not make this request (an admin-only route).",
    404: "No such resource for this tenant (another tenant's ids are 404 too).",
    409: "Conflicts with what is stored (idempotency) or a quote already used.",
    410: "The quote expired.",
    413: "The request body is over the size limit.",
    422: "Invalid input; `field` names it and `fix` says what to do.",
    429: "The caller's model-call budget is exhausted; see Retry-After.",
    503: "The service is not ready.",
}


def problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem+json answers a route can give."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        entry: dict[str, Any] = {
            "model": Problem,
            "description": _PROBLEM_TEXT[code],
            "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        if code == 429:
            entry["headers"] = {
                "Retry-After": {
                    "description": "seconds until the budget allows this trace",
                    "schema": {"type": "integer"},
                }
            }
        out[code] = entry
    return out
