"""What the free tier says of a turn's actions (``GET /v1/turns/{turn_id}/actions``): every tool call the agent
made, where each argument value came from, the action's origin, and whether a tool return steered it
(``estimator.actions``). Zero model calls."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ActionOut", "ActionSourceOut", "ActionsOut", "ArgumentSourceOut", "InjectionOut"]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class ActionSourceOut(_Out):
    """A source of the turn's context, with the tool call id it answers (tools layer, when the history has one)."""

    id: str
    layer: Literal["tools", "instructions", "history"]
    label: str
    tool: str
    call_id: str | None = None


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


class ActionsOut(_Out):
    turn_id: str
    corpus_digest: str
    summary: str = Field(description="'3 actions: 1 steered by tool data', or 'no actions'")
    steered: int = Field(description="actions the screen flags as steered by tool data")
    sources: list[ActionSourceOut]
    actions: list[ActionOut]
