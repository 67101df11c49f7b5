"""The scalar protocol: "measure the claim under this mask" → a float (NaN: no information).

The leave-one-out driver (``loo.py``) owns the rounds, the memo, progress, warnings and assembly; an
estimator differs only in how it measures one mask. Three do:

* ``JudgedDigit`` — §6.2: a forced-choice judge's digit 1–9, parsed strictly.
* ``ExpectedDigit`` — the same judge call asking for the top log-probabilities of its output, the
  scalar being the expected digit over 1–9 (renormalised): continuous, fewer ties, still black-box.
* ``logprob.LogprobScalar`` — log p(claim | query, ABLATE(C, v)) in nats from a scoring-capable model.

Every call goes through the trace's ``CallLedger``. Each measure also says what it sent
(``sent``: the request or messages of a mask), for inspection and tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from estimator.corpus.units import Corpus
from estimator.judge import Mask, build_judge_request, parse_digit
from estimator.ledger import CallLedger
from estimator.loo.expected_digit import expected_digit
from estimator.params import Params
from estimator.results.models import TraceResultModel
from estimator.seams.llm import LLM, LLMError, LLMRequest, LLMResponse
from estimator.target import SENTENCE, Wording

__all__ = ["TOP_LOGPROBS", "ExpectedDigit", "JudgedDigit", "Measured", "Scalar", "present_texts"]

TOP_LOGPROBS = 20


@dataclass(frozen=True)
class Measured:
    """One measurement: the value (NaN: no information) and, when NaN, why."""

    value: float
    failure: str | None = None


class Scalar(Protocol):
    """What the driver needs from an estimator."""

    name: str
    unit: str
    """How a value is shown after its number: "" for digits, " nats" for log-probabilities."""

    async def measure(self, mask: Mask) -> Measured: ...

    def thresholds(self, gamma: float, params: Params) -> tuple[float, float]:
        """(τ, τ_Γ) for this claim once Γ is known."""
        ...

    def describe(self, tau: float, tau_gamma: float) -> list[str]:
        """Notes on the scalar for the result (what it is, how its thresholds were set)."""
        ...

    def extra_params(self) -> dict[str, Any]: ...

    def finish(self, result: TraceResultModel) -> TraceResultModel:
        """The assembled result, with whatever this scalar adds to it."""
        ...


def present_texts(corpus: Corpus, texts: Mapping[str, str], mask: Mask) -> list[tuple[str, str, str]]:
    ordered = sorted(corpus.units, key=lambda u: u.ordinal)
    return [(u.id, u.label, texts[u.id]) for u in ordered if u.id not in mask]


@dataclass
class JudgedDigit:
    """§6.2: the judge's single digit 1–9, or NaN."""

    llm: LLM
    ledger: CallLedger
    claim: str
    query: str
    corpus: Corpus
    texts: Mapping[str, str]
    name: str = "judged"
    unit: str = ""
    wording: Wording = SENTENCE

    def sent(self, mask: Mask) -> LLMRequest:
        return build_judge_request(self.claim, self.query, present_texts(self.corpus, self.texts, mask), self.wording)

    async def measure(self, mask: Mask) -> Measured:
        try:
            response = await self.ledger.call(self.llm, self.sent(mask), parse=lambda answer: self.read(answer).value)
        except LLMError as exc:
            billed = " (billed)" if exc.billed else ""
            return Measured(math.nan, f"the call failed{billed}: {exc}")
        return self.read(response)

    def read(self, response: LLMResponse) -> Measured:
        """The scalar of one answer: its single digit."""
        value = parse_digit(response.text)
        if math.isnan(value):
            shown = response.text.strip()
            shown = shown if len(shown) <= 40 else shown[:39] + "…"
            return Measured(value, f"the answer {shown!r} is not a single digit 1–9")
        return Measured(value)

    def thresholds(self, gamma: float, params: Params) -> tuple[float, float]:
        return params.tau, params.tau_gamma

    def describe(self, tau: float, tau_gamma: float) -> list[str]:
        return []

    def extra_params(self) -> dict[str, Any]:
        return {}

    def finish(self, result: TraceResultModel) -> TraceResultModel:
        return result


@dataclass
class ExpectedDigit(JudgedDigit):
    """The judge call with ``top_logprobs``: the expected digit over 1–9, renormalised."""

    name: str = "expected"

    def sent(self, mask: Mask) -> LLMRequest:
        request = super().sent(mask)
        return LLMRequest(
            messages=request.messages,
            purpose=request.purpose,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            top_logprobs=TOP_LOGPROBS,
        )

    def read(self, response: LLMResponse) -> Measured:
        """The scalar of one answer: the expected digit over its first digit position's alternatives."""
        value = expected_digit(response.top_logprobs)
        if value is None:
            why = (
                "the provider returned no top log-probabilities"
                if not response.top_logprobs
                else "no digit 1–9 among the top alternatives of the answer's first token"
            )
            return Measured(math.nan, why)
        return Measured(value)

    def describe(self, tau: float, tau_gamma: float) -> list[str]:
        return [
            f"scalar: the judge's expected digit over 1–9 (top {TOP_LOGPROBS} log-probabilities of its "
            "answer, renormalised), not the argmax digit"
        ]
