"""What an incident export returns (``GET /v1/turns/{turn_id}/incident``, ``provenance incident``): for one action or
one sentence of a stored turn, the chain action → sentence(s) → sources, each source with its evidence envelope,
its age when the target was produced, its custody and its digest; the latest finished trace of the target; and the
custody log's record of the turn with whether the tenant's chain verifies now.

Everything is read from the store (no model call), so the same store gives the same document: it carries no time
of its own making. A null field is one the history did not record (never guessed).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from estimator.results.models import InjectionModel
from provenance_api.core.schemas_actions import ArgumentSourceOut, EnvelopeOut, FreshnessOut, InjectionOut
from provenance_api.core.schemas_audit import AuditBreak, AuditHead

__all__ = [
    "IncidentCauseOut",
    "IncidentChainOut",
    "IncidentCustodyLogOut",
    "IncidentLinkOut",
    "IncidentOut",
    "IncidentRecordOut",
    "IncidentSourceOut",
    "IncidentTargetOut",
    "IncidentTraceOut",
    "IncidentTraceSourceOut",
    "IncidentTurnOut",
    "TargetKind",
]

TargetKind = Literal["action", "sentence"]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class IncidentTurnOut(_Out):
    """The stored turn the target belongs to."""

    turn_id: str
    conversation: str | None = Field(
        description="the conversation it was imported from (the turn id before its last ':'); null: not recorded"
    )
    agent: str | None
    model: str | None
    query: str | None = Field(description="the user's request of the turn")
    answered_at: datetime | None = Field(description="when the answer was produced (UTC); null: not recorded")
    digest: str = Field(description="sha256 of the turn's stored canonical JSON (what the custody log attests)")
    stored_at: datetime = Field(description="when the service stored the turn (UTC)")


class IncidentTargetOut(_Out):
    """The action or sentence the incident is about."""

    kind: TargetKind
    id: str = Field(description="a0, a1, … for an action (in the order made); r0, r1, … for a sentence")
    produced_at: datetime | None = Field(
        description="when the agent made the call (an action) or produced the answer (a sentence), UTC; null: not "
        "recorded"
    )
    tool: str | None = Field(None, description="an action: the tool called")
    call_id: str | None = Field(None, description="an action: the tool call id the history gave it")
    arguments: str | None = Field(None, description="an action: its arguments as canonical JSON (keys sorted)")
    call: str | None = Field(None, description="an action: the call as traced, name(canonical JSON arguments)")
    origin: Literal["user", "instructions", "data", "invented"] | None = Field(
        None, description="an action: where its decisive values came from"
    )
    text: str | None = Field(None, description="a sentence: its text, verbatim from the answer")
    status: str | None = Field(None, description="a sentence: its free-tier status (traceable, quoted, action, …)")


class IncidentLinkOut(_Out):
    """One link of the chain: a sentence that reports the action, or an action the sentence reports."""

    kind: TargetKind
    id: str
    text: str = Field(description="a sentence's text, or an action's call as name(canonical JSON arguments)")


class IncidentCauseOut(_Out):
    """A source the chain names as the target's cause, and on what ground."""

    source_id: str
    basis: Literal["trace", "screen", "arguments", "quote"] = Field(
        description="trace: it grounds the target in the latest finished trace (measured); screen: the "
        "steered-by-data screen names it; arguments: a decisive argument value first appears in it; quote: the "
        "sentence quotes it verbatim"
    )
    because: str = Field(description="the ground in words, with its numbers")
    via: str | None = Field(
        None, description="a sentence's cause found through an action it reports: that action's id (a0, …)"
    )


class IncidentChainOut(_Out):
    reported_by: list[IncidentLinkOut] = Field(description="an action: the answer's sentences that report it")
    reports: list[IncidentLinkOut] = Field(description="a sentence: the actions it reports")
    caused_by: list[IncidentCauseOut] = Field(
        description="the sources named as its cause: measured by a trace when one finished, else the free tier's "
        "finding (empty: none named)"
    )
    text: str = Field(description="the chain in words")


class IncidentSourceOut(_Out):
    """A source the target could read: every source of the turn for a sentence; for an action, the sources it had
    seen when it made the call (never a later return)."""

    id: str
    layer: Literal["tools", "instructions", "history"]
    label: str
    tool: str
    call_id: str | None
    envelope: EnvelopeOut | None = Field(description="all its fields; a null field: not recorded by the history")
    age_seconds: float | None = Field(
        description="seconds from its observed_at to when the target was produced (negative: observed after); "
        "null: either time not recorded"
    )
    age: str = Field(description="that age in words ('45 s', 'not recorded (the source's time)')")
    custody: Literal["gateway", "history"] = Field(
        description="gateway: a tool return whose text matches a result the MCP gateway recorded; history: as "
        "reported by the agent's history"
    )
    custody_observed_at: datetime | None = Field(description="gateway: when the gateway received the result (UTC)")
    custody_server: str | None = Field(description="gateway: the MCP server the gateway relayed it from")
    digest: str = Field(description="sha256 (hex, 64 digits) of its raw content, as the model saw it")


class IncidentTraceSourceOut(_Out):
    """A source of the trace, ranked by its effect (largest first)."""

    source_id: str
    layer: str
    label: str
    role: str | None = Field(description="grounds, distractor, irrelevant or redundant; null: not measured")
    delta: float | None = Field(
        description="Δ: how much the target's score fell when the source was removed, in the trace's unit (points "
        "of the judge's 1–9 scale, or nats of log-probability); null: not measured"
    )


class IncidentTraceOut(_Out):
    """The latest finished trace of the target (succeeded, failed or interrupted)."""

    trace_id: str
    status: str = Field(description="succeeded, failed or interrupted")
    estimator: str | None = Field(description="judged, expected, logprob, both or proxy; null: it has no result")
    verdict: str | None = Field(description="the trace's verdict; null when it did not succeed")
    unit: Literal["points", "nats"] | None = Field(
        description="the unit of its scores and Δ: points of the judge's 1–9 scale, or nats of log-probability "
        "(logprob, a proxy confirmed in nats); null: it has no result"
    )
    finished_at: datetime | None
    reason: str | None = Field(description="why it failed or was interrupted")
    sources: list[IncidentTraceSourceOut] = Field(description="the sources it measured, largest effect first")
    injection: InjectionModel | None = Field(
        description="an action's trace: its injection block as the result has it (suspected, source, lines, Δ)"
    )


class IncidentRecordOut(_Out):
    """The custody log's latest record of the turn."""

    seq: int = Field(description="its place in the tenant's log, from 1")
    kind: str = Field(description="turn_stored")
    hash: str = Field(description="its chain hash (sha256, hex)")
    content_digest: str = Field(description="sha256 of what it attests (the turn's digest and each source's)")
    created_at: datetime


class IncidentCustodyLogOut(_Out):
    """The turn's place in the tenant's custody log, and whether the whole chain verifies now."""

    record: IncidentRecordOut | None = Field(description="null: the turn was stored before the tenant's log began")
    intact: bool = Field(description="true when the tenant's whole chain verifies now (provenance audit verify)")
    records: int = Field(description="records in the tenant's log")
    head: AuditHead | None = Field(description="the newest record of the log")
    broken: AuditBreak | None = Field(description="the first broken record; null when intact")
    turn_broken: bool = Field(description="true when the first broken record is this turn's")


class IncidentOut(_Out):
    """One action or sentence, its chain, the sources it could read, its trace and the custody of it all."""

    turn: IncidentTurnOut
    target: IncidentTargetOut
    chain: IncidentChainOut
    sources: list[IncidentSourceOut]
    argument_sources: list[ArgumentSourceOut] | None = Field(
        description="an action: where each argument value first appears; null for a sentence"
    )
    injection: InjectionOut | None = Field(description="an action: the steered-by-data screen; null for a sentence")
    freshness: list[FreshnessOut] = Field(
        description="an action: the operator's freshness rules for its tool, checked (empty: no rule applies)"
    )
    freshness_rules: int = Field(description="freshness rules in force (0: ages shown, nothing judged)")
    trace: IncidentTraceOut | None = Field(description="the latest finished trace of the target; null: none was run")
    trace_note: str = Field(description="in words: which trace is shown, or that none of the target was run")
    custody_log: IncidentCustodyLogOut
