"""The scalar protocol: "measure the claim under this mask" → a float (NaN: no information).

The leave-one-out driver (``loo.py``) owns the rounds, the memo, progress, warnings and assembly; an
estimator differs only in how it measures one mask. Three do:

* ``JudgedDigit`` — §6.2: a forced-choice judge's digit 1–9, parsed strictly.
* ``ExpectedDigit`` — the same judge call asking for the top log-probabilities of its output, the
  scalar being the expected digit over 1–9 (renormalised): continuous, fewer ties, still black-box.
* ``logprob.LogprobScalar`` — log p(claim | query, ABLATE(C, v)) in nats from a scoring-capable model.

Every call goes through the trace's ``CallLedger``. Each measure also says what it sent
(``sent``: the request or messages of a mask), for inspection and tests.

**Repeats.** A hosted judge is noisy: the same mask can read 6 one time and 8 the next. With
``Params.repeats`` = k > 1 the driver measures each mask k times (``measure_repeated``): k real calls, each
told which sample it is (``sample_index``; a judge request carries it as ``LLMRequest.sample``, so a
judgement cache never answers a repeat with the first sample's answer), and the score is the median of the
samples that gave information, the samples kept beside it (``Measured.samples``) so their spread is reported.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Protocol

import anyio

from estimator.corpus.units import Corpus
from estimator.judge import Mask, build_judge_request, parse_digit
from estimator.ledger import CallLedger
from estimator.loo.expected_digit import expected_digit
from estimator.params import Params
from estimator.results.models import TraceResultModel
from estimator.seams.llm import LLM, LLMError, LLMRequest, LLMResponse
from estimator.target import SENTENCE, Wording

__all__ = [
    "TOP_LOGPROBS",
    "ExpectedDigit",
    "JudgedDigit",
    "Measured",
    "Scalar",
    "measure_repeated",
    "median_of",
    "present_texts",
    "replayed",
    "sample_index",
]

TOP_LOGPROBS = 20


@dataclass(frozen=True)
class Measured:
    """One measurement: the value (NaN: no information) and, when NaN, why. Measured more than once
    (``repeats``), ``samples`` holds each sample in the order asked (one that gave no information is NaN, with
    its reason) and ``value`` is the median of those that gave information."""

    value: float
    failure: str | None = None
    samples: tuple[Measured, ...] = ()


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


_SAMPLE: ContextVar[int] = ContextVar("estimator_sample", default=0)


def sample_index() -> int:
    """Which sample of a repeated measurement the running ``measure`` takes (0 the first, and the only one
    when ``repeats`` is 1)."""
    return _SAMPLE.get()


def median_of(samples: tuple[Measured, ...]) -> Measured:
    """A repeated measurement: the median of the samples that gave information, else no information (the
    first sample's reason, and how many samples said so)."""
    known = [m.value for m in samples if not math.isnan(m.value)]
    if known:
        return Measured(statistics.median(known), None, samples)
    why = next((m.failure for m in samples if m.failure), None) or "no information"
    return Measured(math.nan, f"{why} (each of its {len(samples)} samples)", samples)


async def measure_repeated(scalar: Scalar, mask: Mask, repeats: int) -> Measured:
    """``scalar``'s measurement of ``mask`` taken ``repeats`` times, concurrently (each sample a call of its own,
    told its index by ``sample_index``); one sample is the scalar's own measurement, unchanged."""
    if repeats <= 1:
        return await scalar.measure(mask)
    taken: list[Measured] = [Measured(math.nan, "not measured")] * repeats

    async def one(index: int) -> None:
        token = _SAMPLE.set(index)
        try:
            taken[index] = await scalar.measure(mask)
        finally:
            _SAMPLE.reset(token)

    async with anyio.create_task_group() as tg:
        for index in range(repeats):
            tg.start_soon(one, index)
    return median_of(tuple(taken))


def replayed(measured: Measured) -> Measured:
    """The sample of an earlier repeated measurement that the running ``measure`` stands for (``sample_index``):
    a measurement answered again (the proxy's confirmation, reused by its fallback) gives back the same samples,
    never one value k times."""
    if not measured.samples:
        return measured
    return measured.samples[min(sample_index(), len(measured.samples) - 1)]


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
        request = build_judge_request(
            self.claim, self.query, present_texts(self.corpus, self.texts, mask), self.wording
        )
        return replace(request, sample=sample_index()) if sample_index() else request

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
            sample=request.sample,
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
