"""What the free tier says of a turn's actions (``GET /v1/turns/{turn_id}/actions``): every tool call the agent
made, where each argument value came from, the action's origin, and whether a tool return steered it
(``estimator.actions``). Zero model calls."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from estimator.corpus.envelope import Envelope
from estimator.custody.ages import SourceAge
from estimator.custody.freshness import FreshnessFinding

__all__ = [
    "ActionOut",
    "ActionSourceOut",
    "ActionsOut",
    "ArgumentSourceOut",
    "EnvelopeOut",
    "FreshnessOut",
    "InjectionOut",
    "SourceAgeOut",
]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class EnvelopeOut(_Out):
    """A source's evidence envelope: what the history recorded of where it came from and what was done to it.
    A null field: not recorded by the history (never guessed)."""

    tool: str = Field(description="the producing tool (system_prompt for instructions, role:user … for history)")
    server: str | None = Field(None, description="the MCP server (or service) that answered")
    resource: str | None = Field(None, description="the resource read (an MCP resource URI)")
    observed_at: datetime | None = Field(None, description="when its content was observed")
    principal: str | None = Field(None, description="whom it was fetched for")
    tenant: str | None = None
    scope: str | None = None
    digest: str = Field(description="sha256 of the raw content, as the model saw it")
    transformations: list[str] = Field(description="every change made before a prompt showed it")
    derived_from: list[str] = Field(default_factory=list, description="what it was built from (a prompt's rule)")
    custody: Literal["gateway", "history"] = Field(description="who kept the record: a gateway, or the history")

    @classmethod
    def of(cls, envelope: Envelope) -> EnvelopeOut:
        return cls(
            tool=envelope.tool,
            server=envelope.server,
            resource=envelope.resource,
            observed_at=envelope.observed_at,
            principal=envelope.principal,
            tenant=envelope.tenant,
            scope=envelope.scope,
            digest=envelope.digest,
            transformations=list(envelope.transformations),
            derived_from=list(envelope.derived_from),
            custody=envelope.custody,
        )


class SourceAgeOut(_Out):
    """A source's age when the answer or an action was produced."""

    source_id: str
    age_seconds: float | None = Field(description="null: the source's or the moment's time is not recorded")
    age: str = Field(description="in words: '12 s', 'not recorded (the source's time)'")

    @classmethod
    def of(cls, age: SourceAge) -> SourceAgeOut:
        return cls(source_id=age.source_id, age_seconds=age.age_seconds, age=age.shown)


class FreshnessOut(_Out):
    """One freshness rule checked for an action: pass, breach, or not checkable (a time not recorded)."""

    rule: str
    status: Literal["pass", "breach", "not checkable"]
    source_id: str | None = Field(description="the evidence source judged; null: the agent had read none")
    age_seconds: float | None
    failed: list[str] = Field(description="each condition failed or not checkable")
    because: str

    @classmethod
    def of(cls, finding: FreshnessFinding) -> FreshnessOut:
        return cls(**finding.model_dump() | {"failed": list(finding.failed)})


class ActionSourceOut(_Out):
    """A source of the turn's context, with the tool call id it answers (tools layer, when the history has one)."""

    id: str
    layer: Literal["tools", "instructions", "history"]
    label: str
    tool: str
    call_id: str | None = None
    envelope: EnvelopeOut | None = None
    age_seconds: float | None = Field(None, description="its age when the answer was produced (null: not recorded)")
    age: str = Field("not recorded", description="that age in words")
    # the MCP evidence gateway's binding (core/evidence.py bind_custody); null where no binding was looked up
    custody: Literal["gateway", "history"] | None = Field(
        None,
        description="a tool return: 'gateway' when its text matches a result the gateway recorded (custody verified "
        "by the gateway), 'history' when it matches none (as reported by the agent's history); null for other layers",
    )
    custody_observed_at: datetime | None = Field(None, description="'gateway': when the gateway received the result")
    custody_server: str | None = Field(None, description="'gateway': the MCP server the gateway relayed it from")


class ArgumentSourceOut(_Out):
    path: str = Field(description="where the value is in the arguments: 'to', 'items[0].sku'")
    value: str
    decisive: bool = Field(description="an identifier, amount or address (counts for the origin); not long free text")
    source_id: str | None = Field(
        description="the first source holding the value, in the order the agent received them ('query': the "
        "user's request); null: it appears nowhere the agent could read — made up or computed"
    )
    layer: str | None = None
    lines: tuple[int, int] | None = Field(None, description="the value's lines in that source (1-based, inclusive)")
    quote: str | None = Field(None, description="those lines, verbatim")
    also_in: list[str] = Field(default_factory=list, description="other sources holding it")


class InjectionOut(_Out):
    suspected: bool
    source_id: str | None = None
    lines: tuple[int, int] | None = None
    quote: str | None = Field(None, description="the instruction, verbatim from the source")
    cues: list[str] = Field(default_factory=list, description="what makes it an instruction to the agent")
    because: str = Field("", description="the screen's reason, in words")


class ActionOut(_Out):
    id: str = Field(description="a0, a1, … in the order the agent made the calls")
    tool: str
    call_id: str | None
    arguments: Any = Field(description="as the agent sent them (parsed when they were JSON)")
    origin: Literal["user", "instructions", "data", "invented"]
    suspect_injection: bool
    argument_sources: list[ArgumentSourceOut]
    injection: InjectionOut
    reported_by: list[str] = Field(description="ids of the answer's sentences that report this action")
    produced_at: datetime | None = Field(None, description="when the agent made the call (null: not recorded)")
    source_ages: list[SourceAgeOut] = Field(
        default_factory=list, description="the age of each source it could read, when it made the call"
    )
    freshness: list[FreshnessOut] = Field(
        default_factory=list, description="the operator's freshness rules for its tool, checked (none: no rule)"
    )


class ActionsOut(_Out):
    turn_id: str
    corpus_digest: str
    summary: str = Field(description="'3 actions: 1 steered by tool data', or 'no actions'")
    steered: int = Field(description="actions the screen flags as steered by tool data")
    sources: list[ActionSourceOut]
    actions: list[ActionOut]
    answered_at: datetime | None = Field(None, description="when the answer was produced (null: not recorded)")
    freshness_rules: int = Field(0, description="freshness rules in force (0: ages shown, nothing judged)")
