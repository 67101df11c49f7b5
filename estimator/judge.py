"""§6.2 — the judged scalar s(v), and the per-trace call ledger every model call goes through.

The judge sees the claim and query first and the present sources after them, always in ordinal
order, so every mask of one trace shares the longest possible prompt prefix. Its answer is parsed
strictly: exactly one digit 1–9, or NaN. NaN means "no information", never a guess. Identical
(mask, claim) measurements are made once per trace: a measurement is never paid for twice.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import anyio

from prompts import render

from .fence import data_only_rule, fenced_block
from .llm import LLM, LLMError, LLMRequest, LLMResponse, Message, Usage
from .params import DEFAULT_PARAMS, Params
from .tokens import ApproxTokenizer, Tokenizer
from .units import Corpus

Mask = frozenset[str]
"""The ids of the sources a mask REMOVES: ``frozenset()`` is 1 (all present), every id is 0."""

JUDGE_MAX_TOKENS = 4
NO_SOURCES = "(none: every source has been removed)"
NO_QUERY = "(the query was not recorded)"


class CallBudgetExceeded(LLMError):
    """A call the plan did not allow for; refused before it was sent (so never billed)."""


class CallLedger:
    """Every model call of one trace: the per-trace concurrency cap (an anyio CapacityLimiter), the hard
    ceiling of the cost gate's plan, and the provider-reported usage and cost."""

    def __init__(self, *, planned: int | None, concurrency: int) -> None:
        self.planned = planned
        self.limiter = anyio.CapacityLimiter(concurrency)
        self.made = 0
        self.saved = 0
        self.cached = 0
        self.failed = 0
        self.failed_billed = 0
        self.refused = 0
        self.usage = Usage()
        self._cost = 0.0
        self._cost_known = True

    @property
    def cost_usd(self) -> float | None:
        """Sum of provider-reported costs; None when any call's cost is unknown."""
        return self._cost if self._cost_known else None

    async def call(self, llm: LLM, request: LLMRequest) -> LLMResponse:
        """Send one request under the cap. Raises LLMError (a failed call) or CallBudgetExceeded."""
        borrower = object()
        await self.limiter.acquire_on_behalf_of(borrower)
        try:
            if self.planned is not None and self.made >= self.planned:
                self.refused += 1
                raise CallBudgetExceeded(f"call refused: the plan allows {self.planned} calls")
            self.made += 1
            try:
                response = await llm.complete(request)
            except LLMError as exc:
                self.failed += 1
                if exc.billed:
                    self.failed_billed += 1
                    self._cost_known = False  # billed, at a price the provider did not report
                raise
        finally:
            self.limiter.release_on_behalf_of(borrower)
        self.usage = self.usage + response.usage
        if response.cached:
            self.cached += 1
        if response.usage.cost_usd is None:
            self._cost_known = False
        else:
            self._cost += response.usage.cost_usd
        return response


def cut_to_budget(text: str, max_tokens: int, tokenizer: Tokenizer) -> tuple[str, bool]:
    """Truncate ``text`` to ``max_tokens``; a cut is marked in the text so the reader knows it is partial."""
    kept = tokenizer.truncate(text, max_tokens)
    if kept == text:
        return text, False
    return kept.rstrip() + f"\n[… cut at {max_tokens} tokens: the rest of this source is not shown]", True


def parse_digit(text: str | None) -> float:
    """Strict parse: the stripped answer must be exactly one digit 1–9; anything else is NaN."""
    answer = (text or "").strip()
    if len(answer) == 1 and answer in "123456789":
        return float(answer)
    return math.nan


def build_judge_request(claim: str, query: str, sources: Iterable[tuple[str, str, str]]) -> LLMRequest:
    """The judge call for the sources present: (id, label, already-truncated text), in ordinal order."""
    blocks = [fenced_block(source_id, label, text) for source_id, label, text in sources]
    system = render("judge_system", data_only_rule=data_only_rule().strip()).text.strip()
    user = render("judge_user", claim=claim, query=query.strip() or NO_QUERY,
                  sources="\n\n".join(blocks) if blocks else NO_SOURCES).text.rstrip()
    return LLMRequest(messages=(Message("system", system), Message("user", user)), purpose="judge",
                      temperature=0.0, max_tokens=JUDGE_MAX_TOKENS)


@dataclass
class _Entry:
    done: anyio.Event
    value: float = math.nan


@dataclass(frozen=True)
class JudgeFailure:
    """A measurement that produced no information, and why (disclosed in the result)."""

    mask: Mask
    reason: str


@dataclass
class Judge:
    """s(v) for one claim over one corpus, with the per-trace memo."""

    llm: LLM
    claim: str
    query: str
    corpus: Corpus
    ledger: CallLedger
    params: Params = DEFAULT_PARAMS
    tokenizer: Tokenizer = field(default_factory=ApproxTokenizer)
    dedupe: bool = True
    failures: list[JudgeFailure] = field(default_factory=list)
    _memo: dict[tuple[Mask, str], _Entry] = field(default_factory=dict)
    _texts: dict[str, str] = field(default_factory=dict)
    truncated: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        cut: list[str] = []
        for unit in self.corpus.units:
            text, was_cut = cut_to_budget(unit.text, self.params.source_token_cap, self.tokenizer)
            self._texts[unit.id] = text
            if was_cut:
                cut.append(unit.id)
        self.truncated = tuple(cut)

    def request(self, mask: Mask) -> LLMRequest:
        ordered = sorted(self.corpus.units, key=lambda u: u.ordinal)
        present = [(u.id, u.label, self._texts[u.id]) for u in ordered if u.id not in mask]
        return build_judge_request(self.claim, self.query, present)

    async def score(self, mask: Mask) -> float:
        """s(mask): a digit 1–9, or NaN for no information. Made at most once per (mask, claim)."""
        key = (mask, self.claim)
        if self.dedupe:
            entry = self._memo.get(key)
            if entry is not None:
                self.ledger.saved += 1
                await entry.done.wait()
                return entry.value
            entry = _Entry(anyio.Event())
            self._memo[key] = entry
            try:
                entry.value = await self._measure(mask)
            finally:
                entry.done.set()
            return entry.value
        return await self._measure(mask)

    async def _measure(self, mask: Mask) -> float:
        try:
            response = await self.ledger.call(self.llm, self.request(mask))
        except LLMError as exc:
            billed = " (billed)" if exc.billed else ""
            self.failures.append(JudgeFailure(mask, f"the call failed{billed}: {exc}"))
            return math.nan
        value = parse_digit(response.text)
        if math.isnan(value):
            shown = response.text.strip()
            shown = shown if len(shown) <= 40 else shown[:39] + "…"
            self.failures.append(JudgeFailure(mask, f"the answer {shown!r} is not a single digit 1–9"))
        return value
