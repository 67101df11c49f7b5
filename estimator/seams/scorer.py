"""The second I/O seam: a teacher-forced scorer, log p(target | messages), and a scripted fake.

A hosted chat API cannot return this quantity (§4): it needs the probability of a *supplied*
string. Self-hosted endpoints and local models can. A ``Scorer`` takes chat messages and a target
text that the assistant is made to say, and returns the target's total log-probability in nats
with the per-token values. A failed call raises ``ScorerError``, read as "no information".

``ChatTemplate`` turns messages + target into the exact text a completion-style endpoint or a
local model scores; the target begins right after the assistant header and is scored without the
end-of-turn marker (the claim may be one sentence of a longer answer).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import anyio

from estimator.seams.llm import Message

__all__ = [
    "QWEN_TEMPLATE",
    "ChatTemplate",
    "ScoredTarget",
    "Scorer",
    "ScorerError",
    "ScriptedScorer",
]


@dataclass(frozen=True)
class ScoredTarget:
    """log p(target | messages) in nats: the total, the per-token values, and the token count."""

    logprob_total: float
    token_logprobs: tuple[float, ...]
    n_tokens: int
    tokens: tuple[str, ...] = ()
    prompt_tokens: int = 0

    @staticmethod
    def of(token_logprobs: Sequence[float], tokens: Sequence[str] = (), prompt_tokens: int = 0) -> ScoredTarget:
        values = tuple(float(x) for x in token_logprobs)
        return ScoredTarget(math.fsum(values), values, len(values), tuple(tokens), prompt_tokens)


class ScorerError(Exception):
    """A scoring call that produced no usable value. Read as "no information"."""

    def __init__(self, message: str, *, billed: bool = False) -> None:
        super().__init__(message)
        self.billed = billed


@runtime_checkable
class Scorer(Protocol):
    """What the probability-based estimator needs from a scoring-capable model."""

    @property
    def model(self) -> str: ...

    async def score(self, messages: Sequence[Message], target: str) -> ScoredTarget: ...


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template in the ChatML family: ``{start}{role}\\n{content}{end}\\n`` per message.

    ``default_system`` is what the model's own template inserts when no system message is given
    (so the rendered prompt matches what the model was trained on); ``bos_text`` is the text of the
    beginning-of-sequence token for models whose tokenizer does not add one (llama.cpp's echo
    aligns log-probabilities one token late without it)."""

    name: str
    turn_start: str
    turn_end: str
    default_system: str | None = None
    bos_text: str | None = None

    def header(self, role: str) -> str:
        return f"{self.turn_start}{role}\n"

    def render_prefix(self, messages: Sequence[Message]) -> str:
        """The prompt up to (and including) the assistant header: the target follows it directly."""
        parts: list[str] = []
        if self.default_system is not None and not any(m.role == "system" for m in messages):
            parts.append(f"{self.header('system')}{self.default_system}{self.turn_end}\n")
        parts += [f"{self.header(m.role)}{m.content}{self.turn_end}\n" for m in messages]
        parts.append(self.header("assistant"))
        return "".join(parts)


QWEN_TEMPLATE = ChatTemplate(
    name="chatml-qwen2.5",
    turn_start="<|im_start|>",
    turn_end="<|im_end|>",
    default_system="You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
    bos_text="<|endoftext|>",
)


ScoreScript = Callable[[Sequence[Message], str], "float | ScoredTarget | Awaitable[float | ScoredTarget]"]


@dataclass
class ScriptedScorer:
    """A plain Python function behind the Scorer protocol: the test double for a model's probabilities.

    The function receives (messages, target) and returns the total log-probability (or a full
    ``ScoredTarget``); raising ``ScorerError`` simulates a failed call. Calls are recorded."""

    script: ScoreScript
    model_name: str = "scripted-scorer"
    latency: float = 0.0
    calls: list[tuple[tuple[Message, ...], str]] = field(default_factory=list)

    @property
    def model(self) -> str:
        return self.model_name

    async def score(self, messages: Sequence[Message], target: str) -> ScoredTarget:
        self.calls.append((tuple(messages), target))
        if self.latency:
            await anyio.sleep(self.latency)
        out = self.script(messages, target)
        if inspect.isawaitable(out):
            out = await out
        if isinstance(out, ScoredTarget):
            return out
        n = max(1, len(target.split()))
        return ScoredTarget(float(out), tuple([float(out) / n] * n), n)
