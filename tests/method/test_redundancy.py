"""Redundancy, named and resolved, through the real driver with plain-function judges.

The fixture ``redundant_sources_turn.json``: three tool returns state the layer id of the claim (a search
result, a details call, a permalink), a fourth (a geocoder) does not. Leave-one-out reads zero on each of
the three, because the other two still say it; the complementary question (keep one at a time) finds that
any one of them is enough.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from estimator.corpus.units import Corpus, Layer
from estimator.fence import split_fenced
from estimator.results.models import TraceResultModel
from estimator.seams.llm import LLMRequest, LLMResponse, Message, ScriptedLLM
from estimator.seams.scorer import ScriptedScorer
from estimator.trace import EstimatorChoice, planned_calls, run_trace
from provenance_api.importers.turn_files import load_turn_file
from provenance_api.providers.free_tier import gate_view, tokenizer

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "redundant_sources_turn.json"
LAYER_ID = "MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual"


def regions(text: str) -> dict[str, str]:
    """Source id -> the content of its data region (the ``[id] label`` line removed)."""
    out = {}
    for region in split_fenced(text)[0]:
        m = re.match(r"\[(s\d+)\] [^\n]*\n(.*)\Z", region.strip("\n"), flags=re.S)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def knows_it(sources: dict[str, str]) -> bool:
    """A judge that knows the claim: it holds when some present source states the layer id."""
    return any(LAYER_ID in text for text in sources.values())


def span_check(request: LLMRequest) -> str:
    """Quotes the line of the source's content that states the id (verbatim), else silent."""
    body = split_fenced(request.messages[-1].content)[0][-1].strip("\n")
    content = body.split("\n", 1)[1] if body.startswith("[") else body
    line = next((x.strip() for x in content.split("\n") if LAYER_ID in x), None)
    if line is None:
        return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.8, "reason": "-"})
    return json.dumps({"verdict": "supported", "evidence_quote": line, "confidence": 0.9, "reason": "states it"})


def judged(request: LLMRequest) -> str:
    if request.purpose != "judge":
        return span_check(request)
    return "9" if knows_it(regions(request.messages[-1].content)) else "1"


def expected(request: LLMRequest) -> str | LLMResponse:
    if request.purpose != "judge":
        return span_check(request)
    assert request.top_logprobs == 20
    digit = "9" if knows_it(regions(request.messages[-1].content)) else "1"
    other = "8" if digit == "9" else "2"
    return LLMResponse(digit, top_logprobs=[{digit: math.log(0.75), other: math.log(0.25)}])


def scored(messages: Sequence[Message], target: str) -> float:
    return -4.0 if knows_it(regions(messages[-1].content)) else -60.0


def load() -> tuple[str, str, Corpus]:
    turn = load_turn_file(FIXTURE)
    view = gate_view(turn)
    claim = next(s.text for s in view.segments if LAYER_ID in s.text)
    return claim, turn.effective_query(), view.corpus


def trace(choice: EstimatorChoice) -> tuple[TraceResultModel, Corpus]:
    claim, query, corpus = load()
    llm = ScriptedLLM(expected if choice == "expected" else judged)
    outcome = anyio.run(
        lambda: run_trace(choice, claim, query, corpus, llm=llm, scorer=ScriptedScorer(scored), tokenizer=tokenizer())
    )
    return outcome.result, corpus


def test_three_tool_returns_that_each_state_the_claim_are_redundant_with_verified_quotes() -> None:
    result, corpus = trace("judged")
    assert [u.id for u in corpus.in_layer(Layer.TOOLS)] == ["s0", "s1", "s2", "s3"]
    assert (result.gamma, result.verdict) == (8.0, "attributed")
    assert result.layer(Layer.TOOLS).delta == 8.0 and result.layer(Layer.TOOLS).role == "grounds"
    for sid in ("s0", "s1", "s3"):
        source = result.source(sid)
        assert source.delta == 0.0 and source.role == "redundant" and source.alone == 9.0
        assert source.support is not None and source.support.verdict == "supported"
        assert source.support.quote is not None and LAYER_ID in source.support.quote
        assert not source.support.downgraded
        assert source.diagnosis == "grounded in your data"
    geocoder = result.source("s2")
    assert geocoder.role == "irrelevant" and geocoder.alone == 1.0 and geocoder.diagnosis is None
    assert result.redundancy == (
        "In the tools layer, any one of s0, s1 and s3 is enough: removing one changes nothing because the others "
        "still say it. s2 does not carry it alone.",
    )
    text = json.dumps(result.to_dict()).lower()
    assert "knew it" not in text and "own knowledge" not in text
    doc = result.to_dict()
    assert {s["source_id"]: s["alone"] for s in doc["sources"] if s["layer"] == "tools"} == {
        "s0": 9.0,
        "s1": 9.0,
        "s2": 1.0,
        "s3": 9.0,
    }


def test_the_redundancy_calls_are_in_the_plan_and_nothing_is_refused() -> None:
    result, corpus = trace("judged")
    # round 1 (3 layers + 2) + round 2 (the 4 tools; s(1) and "without the candidates" = "without the tools
    # layer" come from the memo) + 4 kept alone + 7 span checks
    assert result.calls.made == 5 + 4 + 4 + len(corpus.units) and result.calls.saved == 2
    assert result.calls.refused == 0 and result.calls.made <= result.calls.planned
    assert result.calls.planned == planned_calls("judged", corpus) == 5 + (7 + 2) + 7 + 2 * 7


@pytest.mark.parametrize("choice", ["expected", "logprob"])
def test_every_estimator_runs_the_same_rounds_and_only_the_scalar_differs(choice: EstimatorChoice) -> None:
    reference, _ = trace("judged")
    result, _ = trace(choice)
    assert result.estimator == choice and result.verdict == reference.verdict == "attributed"
    assert [(x.layer, x.role) for x in result.layers] == [(x.layer, x.role) for x in reference.layers]
    assert {s.source_id: s.role for s in result.sources} == {s.source_id: s.role for s in reference.sources}
    assert result.calls.made == reference.calls.made and result.calls.refused == 0
    assert {s.source_id: s.diagnosis for s in result.sources} == {s.source_id: s.diagnosis for s in reference.sources}
    carried = {s.source_id for s in result.sources if s.alone is not None and not math.isnan(s.alone)}
    assert carried == {"s0", "s1", "s2", "s3"}
    if choice == "expected":
        assert result.s_all == pytest.approx(9 * 0.75 + 8 * 0.25) and result.source("s0").alone == result.s_all
