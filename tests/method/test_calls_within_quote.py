"""On every fixture, for every estimator, under worst-case judges, a trace makes no more calls than the
cost gate planned AND none is refused: the ledger refuses a call over the plan, so ``made <= planned``
alone holds by construction; ``refused == 0`` is what shows the plan really covers the trace.

The worst cases: a judge for which removing anything matters (every layer contributes, round 2 tests
every source), one for which a layer matters but no single source does (redundancy resolution inside
every layer), and one for which only removing everything matters (the *redundant* verdict, resolved
one level up); span checks whose quotes never verify (every span check retried).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import pytest

from estimator.corpus.units import Corpus
from estimator.fence import split_fenced
from estimator.loo.rounds import select_units
from estimator.seams.llm import LLMRequest, LLMResponse, Message, ScriptedLLM
from estimator.seams.scorer import ScriptedScorer
from estimator.trace import EstimatorChoice, planned_calls, run_trace
from provenance_api.importers.turn_files import load_turn_file
from provenance_api.providers.free_tier import cost_quote, gate_view, tokenizer

FIXTURES = sorted((Path(__file__).resolve().parents[2] / "fixtures").glob("*_turn.json"))

Holds = Callable[[Corpus, set[str]], bool]


def present_ids(text: str) -> set[str]:
    return {m.group(1) for region in split_fenced(text)[0] if (m := re.match(r"\[(s\d+)\] ", region.strip("\n")))}


def every_source(corpus: Corpus, present: set[str]) -> bool:
    return len(present) == len(corpus.units)


def one_per_layer(corpus: Corpus, present: set[str]) -> bool:
    return all(any(u.id in present for u in corpus.in_layer(layer)) for layer in corpus.layers_present())


def any_source(corpus: Corpus, present: set[str]) -> bool:
    return bool(present)


FABRICATED = json.dumps(
    {
        "verdict": "supported",
        "evidence_quote": "a sentence no source contains at all",
        "confidence": 0.9,
        "reason": "fabricated",
    }
)


def chat(corpus: Corpus, holds: Holds) -> Callable[[LLMRequest], str | LLMResponse]:
    def answer(request: LLMRequest) -> str | LLMResponse:
        if request.purpose != "judge":
            return FABRICATED
        digit = "9" if holds(corpus, present_ids(request.messages[-1].content)) else "1"
        if request.top_logprobs:
            return LLMResponse(digit, top_logprobs=[{digit: math.log(0.8), "5": math.log(0.2)}])
        return digit

    return answer


def scorer(corpus: Corpus, holds: Holds) -> ScriptedScorer:
    def score(messages: Sequence[Message], target: str) -> float:
        present = set().union(*(present_ids(m.content) for m in messages))  # the instructions' block too
        return -3.0 if holds(corpus, present) else -80.0

    return ScriptedScorer(score)


@pytest.mark.parametrize("holds", [every_source, one_per_layer, any_source], ids=lambda f: f.__name__)
@pytest.mark.parametrize("choice", ["judged", "expected", "logprob", "both"])
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_calls_stay_within_the_plan_and_none_is_refused(path: Path, choice: EstimatorChoice, holds: Holds) -> None:
    assert FIXTURES, "no fixtures found"
    turn = load_turn_file(path)
    view = gate_view(turn)
    corpus = view.corpus
    claim = view.segments[0].text
    quote = cost_quote(turn, corpus, claim, model="openai/gpt-4o")
    llm = ScriptedLLM(chat(corpus, holds))
    score = scorer(corpus, holds)
    outcome = anyio.run(
        lambda: run_trace(choice, claim, turn.effective_query(), corpus, llm=llm, scorer=score, tokenizer=tokenizer())
    )
    calls = outcome.result.calls
    assert calls.planned == planned_calls(choice, corpus)
    if choice in ("judged", "expected"):
        assert calls.planned == quote.planned_calls
    assert calls.refused == 0, f"{calls.refused} call(s) refused: the plan does not cover this trace"
    assert calls.made <= calls.planned
    assert calls.made == len(llm.calls) + len(score.calls)  # scoring calls are model calls too
    result = outcome.result
    d = min(len(corpus.units), 12)
    if choice != "logprob":  # the span checks are the chat model's (shared under both)
        assert sum(1 for c in llm.calls if c.purpose == "support") == 2 * d  # every one retried
    if holds is one_per_layer and quote.calls.redundancy:
        multi = [layer for layer in corpus.layers_present() if len(corpus.in_layer(layer)) >= 2]
        tested = set(select_units(corpus.units, 12)[0])
        # the worst case was exercised: every source of a multi-source layer was kept alone, as many as
        # the plan has room for (the rest named)
        candidates = {u.id for layer in multi for u in corpus.in_layer(layer) if u in tested}
        measured = {s.source_id for s in result.sources if s.alone is not None}
        assert measured <= candidates and len(measured) == min(len(candidates), quote.calls.redundancy)
        if len(measured) < len(candidates):
            assert any("was not measured" in text for text in result.redundancy)
        assert {s.role for s in result.sources if s.alone is not None} <= {"redundant"}
    if holds is any_source and len(corpus.layers_present()) >= 2:
        assert result.verdict == "redundant"
        assert all(x.role == "redundant" for x in result.layers)
