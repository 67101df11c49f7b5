"""The model calls of a trace, as ``GET /v1/traces/{trace_id}/calls`` returns them: what the judge (or scorer)
was sent and what it answered, call by call, with the value the estimator read from each answer."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CallOutcomeOut", "CallStageOut", "ModelCallOut", "PromptMessageOut", "TraceCallsOut"]

CallStageOut = Literal["round1", "round2", "redundancy", "spans", "probe", "gamma", "other"]
CallOutcomeOut = Literal["sending", "answered", "cached", "failed", "failed_billed", "refused"]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class PromptMessageOut(_Out):
    role: str = Field(description="system, user, or assistant (for a scoring call: the text it scored)")
    content: str


class ModelCallOut(_Out):
    """One model call of the trace, in the order sent."""

    index: int = Field(ge=0, description="order sent, from 0")
    stage: CallStageOut = Field(
        description="gamma: s(1) and s(0); round1: a layer removed; round2: a source "
        "removed; redundancy: kept alone; spans: a span check; probe: a regeneration"
    )
    mask: str = Field(
        description="what the call was shown, in words: all sources, no sources, without layer "
        "tools, without s2, only s1 of tools, span check of s0"
    )
    kind: Literal["chat", "score"] = Field(
        description="chat: a judge or span-check call; score: a scoring call (log p of the claim)"
    )
    outcome: CallOutcomeOut = Field(
        description="cached: answered from the judgement cache, not sent, $0; sending: in flight (a running "
        "trace); failed_billed: failed, or in flight when the service stopped, and billed"
    )
    attempts: int = Field(
        1, ge=0, description="HTTP requests sent for this call, retries and fallbacks included (each is a made call)"
    )
    prompt: list[PromptMessageOut] = Field(description="the rendered messages as sent")
    prompt_truncated: bool = Field(
        description="the prompt was cut to the service's per-call cap (16,384 "
        "characters in all) for keeping; the model saw it whole"
    )
    reply: str | None = Field(
        description="the model's text (capped at 4,096 characters); null for scoring calls and failures"
    )
    parsed: float | None = Field(
        description="the value the estimator read: a digit 1-9, an expected digit, "
        "log p in nats, or a probe's anchor coverage; null when it read none"
    )
    started_at: datetime
    seconds: float
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = Field(
        description="the tokens at the model's price (the operator's, else litellm's map); 0 for cached, "
        "refused and unbilled failed calls; null when unknown"
    )
    estimated: bool = Field(
        False,
        description="the tokens were counted from the request as sent and the answer as received, because the "
        "provider reported no usage (or the call was in flight when the service stopped)",
    )
    error: str | None


class TraceCallsOut(_Out):
    """A trace's model calls, kept as they are sent (a running trace's calls in flight read ``sending``)."""

    trace_id: str
    total: int = Field(description="calls the trace made, answered from cache or refused")
    kept: int = Field(description="calls kept; fewer than total when the per-trace cap dropped the last ones")
    calls: list[ModelCallOut]
