"""The cost gate's view of the probability-based estimator: can the chosen model score, and what does
scoring cost?

A scoring call is prompt-only: the chat-templated context plus the claim, teacher-forced, no output.
The plan is the same ablation count as the judge's ((|L|+2) + (d'+2) + d' redundancy at the worst case, each
measurement ``params.repeats`` scoring calls); the span checks are chat calls as before, made once (shared with a
judged trace of the same claim under ``both``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from estimator.corpus.units import Corpus
from estimator.cost import MESSAGE_OVERHEAD_TOKENS, plan_calls
from estimator.params import DEFAULT_PARAMS, Params
from estimator.results.models import DumpsAsModel, ScoringQuoteModel
from estimator.tokens import ApproxTokenizer, Tokenizer

__all__ = [
    "UNVERIFIED",
    "EstimatorChoice",
    "ScoringCapability",
    "ScoringQuote",
    "quote_scoring",
    "scoring_capability",
]

EstimatorChoice = Literal["judged", "expected", "logprob", "both", "proxy"]

# Hosted chat APIs: log-probabilities only for generated tokens, no echo (seed §4).
_CHAT_ONLY_PREFIXES = (
    "anthropic/",
    "claude",
    "gemini/",
    "vertex_ai/",
    "bedrock/",
    "azure/",
    "cohere/",
    "mistral/",
    "groq/",
    "gpt-",
    "o1",
    "o3",
    "o4",
    "openai/gpt-",
    "openai/o",
)


UNVERIFIED = (
    "unverified: a server this process cannot see, known to score only once it answers with echoed log-probabilities"
)
"""Said of a scoring server the configuration names: whether it scores is an assumption until a probe call answers."""


@dataclass(frozen=True)
class ScoringCapability:
    """Whether a model can score a supplied text, how, and why. ``assumed``: the answer is read from the
    configuration for a server this process cannot see (``completions-echo``), so ``can_score`` is unverified
    until a probe call answers (``verified``) — the gate says "unverified", never "yes"."""

    can_score: bool
    how: Literal["in-process", "completions-echo", "none"]
    reason: str
    assumed: bool = False

    @property
    def word(self) -> str:
        """What the gate says: yes, no, or unverified (an assumed yes no probe has checked)."""
        if not self.can_score:
            return "no"
        return "unverified" if self.assumed else "yes"

    def verified(self, ok: bool, found: str) -> ScoringCapability:
        """This capability after a probe call: ``ok`` whether the server returned echoed log-probabilities for a
        supplied text, ``found`` what the probe found, in words."""
        return ScoringCapability(ok, self.how if ok else "none", found)


def scoring_capability(
    model: str, *, local_model: bool = False, scorer_api_base: str | None = None, api_base: str | None = None
) -> ScoringCapability:
    """Whether ``model`` can return log p(supplied text): an in-process local model can; a self-hosted
    OpenAI-compatible server (vLLM, llama.cpp) can through ``/v1/completions`` with echo; a hosted chat
    API cannot (it returns log-probabilities only for tokens it generates). ``api_base`` decides the answer and
    never appears in the reason (a service shows the reason to its tenants; the URL is the operator's)."""
    if local_model:
        return ScoringCapability(True, "in-process", "a local model in this process: one forward pass per mask")
    if scorer_api_base:
        return ScoringCapability(
            True,
            "completions-echo",
            f"a self-hosted OpenAI-compatible server: /v1/completions with echo ({UNVERIFIED})",
            assumed=True,
        )
    hosted = api_base is None or "api.openai.com" in api_base
    if hosted and model.lower().startswith(_CHAT_ONLY_PREFIXES):
        return ScoringCapability(
            False,
            "none",
            f"{model} is a hosted chat API: it returns log-probabilities only "
            "for tokens it generates, never for a supplied claim (no echo)",
        )
    if api_base:
        return ScoringCapability(
            True,
            "completions-echo",
            f"{model} on a self-hosted OpenAI-compatible server: scored through /v1/completions with echo "
            f"({UNVERIFIED})",
            assumed=True,
        )
    return ScoringCapability(
        False,
        "none",
        f"no scoring endpoint is known for {model}: pass a local model or a self-hosted server's base URL",
    )


@dataclass(frozen=True)
class ScoringQuote(DumpsAsModel):
    capability: ScoringCapability
    scoring_calls: int
    span_calls: int
    prompt_tokens: int

    @property
    def can_score(self) -> bool:
        return self.capability.can_score

    def to_model(self) -> ScoringQuoteModel:
        return ScoringQuoteModel(
            can_score=self.capability.can_score,
            how=self.capability.how,
            reason=self.capability.reason,
            scoring_calls=self.scoring_calls,
            span_calls=self.span_calls,
            scoring_prompt_tokens=self.prompt_tokens,
            scoring_output_tokens=0,
        )


def quote_scoring(
    corpus: Corpus,
    claim: str,
    capability: ScoringCapability,
    *,
    query: str = "",
    params: Params = DEFAULT_PARAMS,
    tokenizer: Tokenizer | None = None,
) -> ScoringQuote:
    """Prompt-only scoring calls and their tokens for one logprob trace (worst case, like the judge's plan: every
    sample of every measurement when ``params.repeats`` > 1)."""
    from estimator.loo.logprob import (  # the scoring chat as sent (logprob imports the plan)
        build_messages,
        scored_claim,
    )
    from estimator.loo.rounds import windowed_texts

    tok = tokenizer or ApproxTokenizer()
    plan = plan_calls(corpus, params)
    # Every call at the size of the largest, s(1): the chat as rendered with every source in its window, and
    # the claim as the assistant's answer (every other mask shows a subset of it).
    chat = build_messages(corpus, query, frozenset(), windowed_texts(corpus, params, tok)[0])
    per_call = sum(tok.count(m.content) + MESSAGE_OVERHEAD_TOKENS for m in chat)
    per_call += tok.count(scored_claim(claim)) + MESSAGE_OVERHEAD_TOKENS
    calls = plan.ablation
    return ScoringQuote(capability, calls, plan.spans, calls * per_call if capability.can_score else 0)
