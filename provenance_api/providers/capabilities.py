"""Which judge models return top log-probabilities for the tokens they generate (the expected digit).

The expected-digit estimator reads the judge's digit distribution from the top-k alternatives of its
output tokens. Providers that offer them: OpenAI and Azure OpenAI chat completions (not the reasoning
models, which refuse ``logprobs``), OpenAI-compatible servers such as vLLM and llama.cpp's server, and the
in-process local model. Anthropic, Bedrock, Cohere, Mistral and Ollama's own API do not (litellm drops the
parameter for them); other providers are not known to, and count as not offering them. The estimator
only ever receives the boolean ``offered``.

The answer is from the configuration alone (no call is made): where it says yes for a server it cannot
see, the client verifies on the first call, and an answer without log-probabilities is reported as an
unavailable expected digit, never replaced by the argmax digit.

The ``reason`` is shown to tenants (a quote's ``expected_digit``), so it is built from the model's name and
capability words only: never from ``api_base``, which is the operator's setting (its URL may carry a host, a
path or credentials).

This module imports nothing from the service (it is safe to import from anywhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["TopLogprobsCapability", "top_logprobs_capability"]

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

    def to_dict(self) -> dict[str, object]:
        return {"offered": self.offered, "how": self.how, "reason": self.reason}


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
            f"{model} on a self-hosted OpenAI-compatible server (vLLM, llama.cpp): it answers "
            "logprobs/top_logprobs (verified on the first call)",
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
