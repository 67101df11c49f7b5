"""Which judge models return top log-probabilities for the tokens they generate (the expected digit).

The expected-digit estimator reads the judge's digit distribution from the top-k alternatives of its
output tokens. Providers that offer them: OpenAI and Azure OpenAI chat completions (not the reasoning
models, which refuse ``logprobs``), OpenAI-compatible servers such as vLLM and llama.cpp's server, and the
in-process local model. Anthropic, Bedrock, Cohere, Mistral and Ollama's own API do not (litellm drops the
parameter for them); other providers are not known to, and count as not offering them. The estimator
only ever receives the boolean ``offered``.

The answer is from the configuration alone (no call is made). Where it says yes for a server it cannot see (a
self-hosted OpenAI-compatible server), the yes is an assumption (``assumed``): the gate says "unverified", never
"yes", until a probe call has checked it. ``probe_top_logprobs`` and ``probe_scoring`` are those probes: one small
call each, made by ``provenance trace`` before consent (on the user's own server) and outside any trace's ledger,
so never counted or billed in a trace. An answer without log-probabilities during a trace is reported as an
unavailable expected digit, never replaced by the argmax digit.

The ``reason`` is shown to tenants (a quote's ``expected_digit``), so it is built from the model's name and
capability words only: never from ``api_base``, which is the operator's setting (its URL may carry a host, a
path or credentials).

This module imports nothing from the service (it is safe to import from anywhere).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from estimator.seams.llm import LLM, LLMRequest, Message
from estimator.seams.scorer import Scorer, ScorerError

__all__ = [
    "PROBE_MESSAGES",
    "Probed",
    "TopLogprobsCapability",
    "probe_scoring",
    "probe_top_logprobs",
    "top_logprobs_capability",
]

Route = Literal["in-process", "chat-logprobs", "none"]

# litellm provider prefixes whose chat API returns top log-probabilities of generated tokens
_OFFERING_PROVIDERS = frozenset(
    {"openai", "azure", "hosted_vllm", "text-completion-openai", "custom_openai", "llamafile", "lm_studio"}
)
# ... and those whose chat API does not (litellm drops ``logprobs`` for them); any other provider is
# "not known", which the cost gate reads as no
_NOT_OFFERING_PROVIDERS = frozenset(
    {"anthropic", "bedrock", "bedrock_converse", "cohere", "cohere_chat", "mistral", "ollama", "ollama_chat"}
)
# OpenAI reasoning models refuse logprobs (HTTP 400) on OpenAI and Azure alike
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
# unprefixed names litellm routes to OpenAI / Anthropic
_OPENAI_NAMES = ("gpt-", "chatgpt-", "o1", "o3", "o4")
_ANTHROPIC_NAMES = ("claude",)
_OPENAI_HOSTS = ("api.openai.com",)


@dataclass(frozen=True)
class TopLogprobsCapability:
    """Whether the judge model returns top log-probabilities of its output tokens, how, and why."""

    offered: bool
    how: Route
    reason: str
    assumed: bool = False  # a yes read from the configuration for a server this process cannot see

    def to_dict(self) -> dict[str, object]:
        return {"offered": self.offered, "how": self.how, "reason": self.reason}

    @property
    def word(self) -> str:
        """What the gate says: yes, no, or unverified (an assumed yes no probe has checked)."""
        if not self.offered:
            return "no"
        return "unverified" if self.assumed else "yes"

    def verified(self, probed: Probed) -> TopLogprobsCapability:
        """This capability after ``probe_top_logprobs``."""
        return TopLogprobsCapability(probed.ok, self.how if probed.ok else "none", probed.found)


def _split(model: str) -> tuple[str | None, str]:
    name = model.strip()
    if "/" in name:
        provider, rest = name.split("/", 1)
        return provider.lower(), rest
    return None, name


def _is_reasoning(name: str) -> bool:
    base = name.lower().rsplit("/", 1)[-1]
    return base.startswith(_REASONING_PREFIXES)


def top_logprobs_capability(
    model: str, *, local_model: bool = False, api_base: str | None = None
) -> TopLogprobsCapability:
    """Whether ``model`` (a litellm model name) offers top log-probabilities on this configuration.

    ``local_model``: the judge runs in this process (always yes). ``api_base``: the configured base URL of
    the judge's provider; a base other than OpenAI's own is an OpenAI-compatible server (vLLM, llama.cpp)
    unless the model names a provider that does not offer them. It decides the answer and never appears in
    the reason."""
    if local_model:
        return TopLogprobsCapability(
            True,
            "in-process",
            "the local model in this process reports the top log-probabilities of every token it writes",
        )
    provider, name = _split(model)
    if provider is None:
        lowered = name.lower()
        if lowered.startswith(_ANTHROPIC_NAMES):
            provider = "anthropic"
        elif lowered.startswith(_OPENAI_NAMES):
            provider = "openai"
    if provider in _NOT_OFFERING_PROVIDERS:
        return TopLogprobsCapability(
            False,
            "none",
            f"{model}: the {provider} API does not return "
            "log-probabilities of generated tokens; use --estimator judged",
        )
    self_hosted = bool(api_base) and provider != "azure" and not any(host in (api_base or "") for host in _OPENAI_HOSTS)
    if self_hosted and provider in (None, *_OFFERING_PROVIDERS):
        return TopLogprobsCapability(
            True,
            "chat-logprobs",
            f"{model} on a self-hosted OpenAI-compatible server (vLLM, llama.cpp): they answer "
            "logprobs/top_logprobs (unverified: a server this process cannot see, known to offer them only once it "
            "answers with them)",
            assumed=True,
        )
    if provider in _OFFERING_PROVIDERS:
        if _is_reasoning(name):
            return TopLogprobsCapability(
                False, "none", f"{model} is a reasoning model: its API refuses logprobs; use --estimator judged"
            )
        where = "Azure OpenAI" if provider == "azure" else "OpenAI"
        return TopLogprobsCapability(
            True,
            "chat-logprobs",
            f"{model}: {where} chat completions return the top log-probabilities of generated tokens (up to 20)",
        )
    return TopLogprobsCapability(
        False,
        "none",
        f"no top log-probabilities are known for {model}: use an "
        "OpenAI or Azure chat model, a self-hosted OpenAI-compatible server (pass its "
        "base URL) or a local model, or --estimator judged",
    )


# --------------------------------------------------------------------------- probes: one small call, before consent

PROBE_MESSAGES = (
    Message("system", "Answer with one word."),
    Message("user", "What colour is a clear daytime sky?"),
)
PROBE_TARGET = "Blue"
"""The probe's question and, for a scorer, the answer whose log-probability it asks for: short, so the probe costs
a few dozen tokens."""


@dataclass(frozen=True)
class Probed:
    """What a probe call found: ``ok`` whether the model returned what the capability needs, and ``found`` in
    words (with the scorer's own error when it failed: a client built for a service scrubs its address from it)."""

    ok: bool
    found: str


async def probe_scoring(scorer: Scorer) -> Probed:
    """One scoring call of a short text, outside any ledger: does the server return its echoed log-probabilities?
    A ``ScorerError`` says no, in the scorer's own words; anything else is raised."""
    try:
        scored = await scorer.score(PROBE_MESSAGES, PROBE_TARGET)
    except ScorerError as exc:
        return Probed(False, f"{scorer.model}: a probe call before the trace found no score: {exc}")
    if not math.isfinite(scored.logprob_total):
        return Probed(False, f"{scorer.model}: a probe call before the trace returned no finite log-probability")
    return Probed(
        True,
        f"{scorer.model}: verified by a probe call before the trace (echoed log-probabilities; not counted in it)",
    )


async def probe_top_logprobs(llm: LLM) -> Probed:
    """One chat call of one output token asking for its top log-probabilities, outside any ledger: does the
    judge return them? An ``LLMError`` (the provider failed) is raised: it is not an answer about logprobs."""
    response = await llm.complete(LLMRequest(messages=PROBE_MESSAGES, max_tokens=1, top_logprobs=5))
    if not response.top_logprobs:
        return Probed(
            False,
            f"{llm.model}: a probe call before the trace was answered without top log-probabilities (the server "
            "ignores or refuses logprobs); use --estimator judged",
        )
    return Probed(
        True,
        f"{llm.model}: verified by a probe call before the trace (top log-probabilities returned; not counted in it)",
    )
