"""The estimator's only I/O seam: a small async chat-model protocol, and a scripted fake.

The estimator never imports a provider library. A real client (the service's litellm
adapter) and ``ScriptedLLM`` satisfy the same protocol; a failed call raises ``LLMError``,
which every tier reads as "no information", never as a verdict.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import anyio

Role = Literal["system", "user", "assistant"]
Purpose = Literal["judge", "support", "probe", "other"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class Usage:
    """Usage of one call: what the provider reported, or — ``estimated`` — the tokens counted from the request
    as sent and the answer as received, when the provider reported none."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost_usd: float | None = None
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        cost = (
            None
            if self.cost_usd is None and other.cost_usd is None
            else ((self.cost_usd or 0.0) + (other.cost_usd or 0.0))
        )
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            cost,
            self.estimated or other.estimated,
        )


@dataclass(frozen=True)
class LLMRequest:
    """One chat call. ``json_schema`` asks for structured output; ``temperature`` None means the
    provider default (sampled calls), 0 means deterministic."""

    messages: tuple[Message, ...]
    purpose: Purpose = "other"
    temperature: float | None = 0.0
    max_tokens: int | None = None
    json_schema: dict[str, Any] | None = None
    schema_name: str = "output"
    top_logprobs: int | None = None  # ask for k alternatives (token text -> logprob) per output token
    sample: int = 0
    """Which sample of a repeated measurement this call is (``Params.repeats``; 0 the first). Never sent to the
    provider: a judgement cache keys on it, so a repeat is a fresh answer, not the first sample's again."""

    @property
    def deterministic(self) -> bool:
        return self.temperature == 0.0

    @property
    def prompt_text(self) -> str:
        return "\n\n".join(m.content for m in self.messages)


@dataclass(frozen=True)
class LLMResponse:
    """One answer. ``top_logprobs`` holds, per output token position, the alternatives the provider
    reported (token text -> log-probability); None when they were not asked for or not offered."""

    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    cached: bool = False
    top_logprobs: list[dict[str, float]] | None = None


class LLMError(Exception):
    """A model call that produced no usable answer. Read as "no information"."""

    def __init__(self, message: str, *, billed: bool = False, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.billed = billed
        self.usage = usage  # what a billed failure used, when known


@runtime_checkable
class LLM(Protocol):
    """What the estimator needs from a chat model."""

    @property
    def model(self) -> str: ...

    async def complete(self, request: LLMRequest) -> LLMResponse: ...


Script = Callable[[LLMRequest], "str | LLMResponse | Awaitable[str | LLMResponse]"]


class ScriptedLLM:
    """A plain Python function behind the LLM protocol: the test double for a model's judgement.

    The function receives each request and returns the answer text (or a full response, e.g. one
    carrying ``top_logprobs`` for a request that asked for them); raising ``LLMError`` simulates a
    failed call. Every request is recorded in ``calls``.
    ``latency`` (seconds) is awaited before answering, so concurrency can be observed.
    """

    def __init__(
        self,
        script: Script,
        *,
        model: str = "scripted-judge",
        latency: float = 0.0,
        input_tokens_per_char: float = 0.25,
    ) -> None:
        self._script = script
        self._model = model
        self.latency = latency
        self.calls: list[LLMRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._ratio = input_tokens_per_char

    @property
    def model(self) -> str:
        return self._model

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency:
                await anyio.sleep(self.latency)
            out = self._script(request)
            if inspect.isawaitable(out):
                out = await out
        finally:
            self.in_flight -= 1
        if isinstance(out, LLMResponse):
            return out
        usage = Usage(input_tokens=int(len(request.prompt_text) * self._ratio), output_tokens=max(1, len(out) // 4))
        return LLMResponse(text=str(out), usage=usage, model=self._model)
