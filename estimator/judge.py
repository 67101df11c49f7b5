"""§6.2 — the judged scalar's request and its strict parse, and the shape of a mask.

The judge sees the claim and query first and the present sources after them, always in ordinal
order, so every mask of one trace shares the longest possible prompt prefix. Its answer is parsed
strictly: exactly one digit 1–9, or NaN. NaN means "no information", never a guess. The measurement
itself is ``measure.JudgedDigit``; the memo and the rounds are the driver's (``loo.py``); every call
goes through the trace's ``ledger.CallLedger`` (re-exported here).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from estimator.fence import Fence
from estimator.ledger import CallBudgetExceeded, CallLedger
from estimator.seams.llm import LLMRequest, Message
from estimator.target import SENTENCE, Wording
from estimator.tokens import Tokenizer
from prompts import render

__all__ = [
    "JUDGE_MAX_TOKENS",
    "NO_QUERY",
    "NO_SOURCES",
    "CallBudgetExceeded",
    "CallLedger",
    "Mask",
    "build_judge_request",
    "cut_to_budget",
    "parse_digit",
]

Mask = frozenset[str]
"""The ids of the sources a mask REMOVES: ``frozenset()`` is 1 (all present), every id is 0."""

JUDGE_MAX_TOKENS = 4
NO_SOURCES = "(none: every source has been removed)"
NO_QUERY = "(the query was not recorded)"


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


def build_judge_request(
    claim: str, query: str, sources: Iterable[tuple[str, str, str]], wording: Wording = SENTENCE
) -> LLMRequest:
    """The judge call for the sources present: (id, label, already-truncated shown text), in ordinal order;
    ``wording`` asks about a sentence (the claim) or an action (the call's text).

    Claim, query and every source travel in data regions of their own, fenced by a marker derived from
    the claim and query: one marker for every mask of a trace, so their shared prefix stays identical."""
    fenced = Fence.for_inputs(claim, query)
    blocks = [fenced.block(source_id, label, text) for source_id, label, text in sources]
    system = render(wording.judge_system, data_only_rule=fenced.rule().strip()).text.strip()
    user = render(
        wording.judge_user,
        claim=fenced.wrap(claim),
        query=fenced.wrap(query.strip()) if query.strip() else NO_QUERY,
        sources="\n\n".join(blocks) if blocks else NO_SOURCES,
    ).text.rstrip()
    return LLMRequest(
        messages=(Message("system", system), Message("user", user)),
        purpose="judge",
        temperature=0.0,
        max_tokens=JUDGE_MAX_TOKENS,
    )
