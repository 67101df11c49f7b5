"""On every fixture, a trace never makes more calls than the cost gate quoted — even under a
judge that makes every layer contribute and a support model whose quotes never verify."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from estimator.attribution import trace_claim
from estimator.llm import LLMRequest, ScriptedLLM
from provenance_api.free_tier import cost_quote, gate_view, tokenizer
from provenance_api.turn_files import load_turn_file

FIXTURES = sorted((Path(__file__).resolve().parents[1] / "fixtures").glob("*_turn.json"))


_PRESENT: dict[str, int] = {}


def _all_present(text: str) -> bool:
    ids = {line.split("]", 1)[0] for line in text.splitlines() if line.startswith("[s")}
    return len(ids) == _PRESENT["n"]


def _worst_case(request: LLMRequest) -> str:
    if request.purpose == "judge":
        # 9 only with every source present: removing anything at all "matters", so every layer
        # contributes and round 2 tests every source.
        return "9" if _all_present(request.messages[-1].content) else "1"
    return json.dumps({"verdict": "supported", "evidence_quote": "a sentence no source contains at all",
                       "confidence": 0.9, "reason": "fabricated"})


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_calls_made_never_exceed_the_quoted_plan(path: Path) -> None:
    assert FIXTURES, "no fixtures found"
    turn = load_turn_file(path)
    view = gate_view(turn)
    _PRESENT["n"] = len(view.corpus.units)
    claim = view.segments[0].text
    quote = cost_quote(turn, view.corpus, claim, model="openai/gpt-4o")
    llm = ScriptedLLM(_worst_case)
    result = anyio.run(lambda: trace_claim(llm, claim, turn.effective_query(), view.corpus, tokenizer=tokenizer()))
    assert len(llm.calls) == result.calls.made
    assert result.calls.made <= quote.planned_calls
    assert result.calls.planned == quote.planned_calls
    if result.verdict == "attributed":
        # the worst case really was exercised: round 2 ran and every span check retried
        assert sum(1 for c in llm.calls if c.purpose == "support") == 2 * min(len(view.corpus.units), 12)
