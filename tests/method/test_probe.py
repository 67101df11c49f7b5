"""Algorithm 6 (the contributive probe) against scripted models: every branch, the prompt, the spend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import cycle
from pathlib import Path

import pytest

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.fence import MARKER_RE
from estimator.params import DEFAULT_PARAMS, Params
from estimator.probe import probe_source
from estimator.results.models import ProbeResultModel, UsageModel
from estimator.seams.llm import LLMError, LLMRequest, LLMResponse, ScriptedLLM, Usage

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TURN = StoredTurn.model_validate_json((FIXTURES / "eo_worldview_turn.json").read_text(encoding="utf-8"))
CORPUS = build_corpus(TURN)
QUERY = TURN.effective_query()
TARGET = "s4"  # the permalink tool's return, which carries the padded box
CLAIM = "In practice, I would start with an Alabama bounding box: west −88.6, south 30.1, east −84.9, north 35.1."
ANSWER_PARTS = ("I searched the Worldview layer catalogue", "Open the link.", "Non-authoritative note")
WITH_CLAIM = "Use the box west -88.6, south 30.1, east -84.9, north 35.1 for Alabama."
HALF_CLAIM = "Start around west -88.6 and south 30.1."  # 2 of the 4 anchors: coverage exactly θ
WITHOUT_CLAIM = "Alabama spans roughly west -88.47 to east -84.89."


def target_present(request: LLMRequest) -> bool:
    return f"[{TARGET}] " in request.messages[-1].content


def sides(full: list[str], without: list[str]) -> Callable[[LLMRequest], str]:
    """Answers drawn in turn from one list for full-context calls and one for calls without the target."""
    full_answers: Iterator[str] = cycle(full)
    without_answers: Iterator[str] = cycle(without)

    def script(request: LLMRequest) -> str:
        return next(full_answers) if target_present(request) else next(without_answers)

    return script


async def probe(
    llm: ScriptedLLM, *, claim: str = CLAIM, corpus: Corpus = CORPUS, params: Params = DEFAULT_PARAMS
) -> ProbeResultModel:
    return await probe_source(llm, claim, QUERY, corpus, TARGET, params=params, tokenizer=None)


async def test_required_when_the_claim_is_always_there_and_never_without_the_source() -> None:
    llm = ScriptedLLM(sides([WITH_CLAIM], [WITHOUT_CLAIM]))
    result = await probe(llm)
    assert result.anchors == ("88.6", "30.1", "84.9", "35.1")
    assert (result.verdict, result.note) == ("required", None)
    assert (result.baseline, result.without, result.k) == (3, 0, 3)
    assert result.calls.made == len(llm.calls) == 6 and result.calls.failed == 0
    assert result.usage.output_tokens > 0 and result.prompt_version.startswith("probe_regenerate@")


async def test_not_required_when_the_claim_survives_without_the_source() -> None:
    result = await probe(ScriptedLLM(sides([WITH_CLAIM], [WITH_CLAIM])))
    assert (result.verdict, result.baseline, result.without) == ("not_required", 3, 3)


async def test_a_mixed_result_without_the_source_is_inconclusive() -> None:
    result = await probe(ScriptedLLM(sides([WITH_CLAIM], [WITH_CLAIM, WITHOUT_CLAIM, WITHOUT_CLAIM])))
    assert (result.verdict, result.note, result.baseline, result.without) == (
        "inconclusive",
        "mixed result without the source",
        3,
        1,
    )


async def test_an_unstable_baseline_is_inconclusive_and_reports_b_over_k() -> None:
    # Without the source the claim never appears — which alone would read "required" — but one of the
    # three full-context runs lost it too, so the guard refuses to call it.
    result = await probe(ScriptedLLM(sides([WITH_CLAIM, WITHOUT_CLAIM, WITH_CLAIM], [WITHOUT_CLAIM])))
    assert (result.verdict, result.note) == ("inconclusive", "baseline unstable: 2/3 full-context runs")
    assert (result.baseline, result.without) == (2, 0)
    assert result.to_dict()["note"] == "baseline unstable: 2/3 full-context runs"


async def test_presence_is_coverage_at_or_above_theta() -> None:
    result = await probe(ScriptedLLM(sides([HALF_CLAIM], ["Start around west -88.6."])))
    assert (result.verdict, result.baseline, result.without) == ("required", 3, 0)
    stricter = DEFAULT_PARAMS.override({"presence_threshold": 0.75})
    result = await probe(ScriptedLLM(sides([HALF_CLAIM], [WITHOUT_CLAIM])), params=stricter)
    assert (result.verdict, result.baseline) == ("inconclusive", 0)


async def test_too_few_anchors_bails_out_before_any_call() -> None:
    llm = ScriptedLLM(sides([WITH_CLAIM], [WITHOUT_CLAIM]))
    result = await probe(llm, claim="Layer: MODIS Annual Land Cover Type.")
    assert (result.verdict, result.note) == ("inconclusive", "claim carries only 1 distinctive anchor(s)")
    assert result.calls.made == 0 and llm.calls == [] and result.usage == UsageModel()
    assert (result.baseline, result.without) == (None, None)


def _shared_anchor_corpus() -> Corpus:
    calls = [
        {"name": f"lookup_{i}", "arguments": {"n": i}, "response": f"Record {i}: QX_7731 since 2024-02-29."}
        for i in range(6)
    ]
    turn = StoredTurn.model_validate(
        {
            "turn_id": "shared",
            "response": "QX_7731 since 2024-02-29.",
            "query": "When did QX_7731 start?",
            "response_payload": {"tool_calls": calls},
        }
    )
    return build_corpus(turn)


async def test_anchors_every_source_carries_are_not_distinctive() -> None:
    corpus = _shared_anchor_corpus()
    assert len(corpus) == 6  # ⌈0.8·6⌉ = 5 < 6: an anchor in all six sources discriminates nothing
    llm = ScriptedLLM(lambda r: "QX_7731 since 2024-02-29.")
    result = await probe_source(llm, "QX_7731 has run since 2024-02-29.", "q", corpus, "s0")
    assert (result.verdict, result.note, result.anchors) == (
        "inconclusive",
        "claim carries only 0 distinctive anchor(s)",
        (),
    )
    assert llm.calls == []


async def test_a_failed_regeneration_makes_the_verdict_inconclusive_not_partial() -> None:
    seen = 0

    def script(request: LLMRequest) -> str:
        nonlocal seen
        seen += 1
        if seen == 2:
            raise LLMError("provider returned 500", billed=True)
        return WITH_CLAIM if target_present(request) else WITHOUT_CLAIM

    llm = ScriptedLLM(script)
    result = await probe(llm)
    assert result.verdict == "inconclusive" and result.calls.failed == 1
    assert result.note is not None and "failed" in result.note and "provider returned 500" in result.note
    assert (result.baseline, result.without) == (None, None)
    assert result.calls.made == len(llm.calls) <= 6


async def test_after_a_failure_no_further_call_is_sent() -> None:
    def script(request: LLMRequest) -> str:
        raise LLMError("rate limited")

    llm = ScriptedLLM(script)
    result = await probe(llm, params=DEFAULT_PARAMS.override({"concurrency": 1}))
    assert result.verdict == "inconclusive" and len(llm.calls) == result.calls.made == 1


async def test_the_regeneration_prompt_has_no_response_prefix_and_omits_exactly_the_target() -> None:
    llm = ScriptedLLM(sides([WITH_CLAIM], [WITHOUT_CLAIM]))
    await probe(llm)
    everyone = {f"[{u.id}] " for u in CORPUS.units}
    full = [r for r in llm.calls if target_present(r)]
    ablated = [r for r in llm.calls if not target_present(r)]
    assert len(full) == len(ablated) == 3
    for request in llm.calls:
        text = request.prompt_text
        assert "using ONLY the SOURCES" in text and QUERY in text and MARKER_RE.search(text)
        assert CLAIM not in text and "bounding box" not in text.split("SOURCES:")[0]
        for sentence in ANSWER_PARTS:
            assert sentence not in text  # no part of the answer is ever supplied
    for request in full:
        assert {h for h in everyone if h in request.prompt_text} == everyone
    for request in ablated:
        assert {h for h in everyone if h in request.prompt_text} == everyone - {f"[{TARGET}] "}


async def test_probe_calls_are_sampled_capped_and_never_more_than_2k() -> None:
    params = DEFAULT_PARAMS.override({"causal_samples": 5, "causal_max_output": 900})
    llm = ScriptedLLM(sides([WITH_CLAIM], [WITHOUT_CLAIM]))
    result = await probe(llm, params=params)
    assert result.verdict == "required" and len(llm.calls) == result.calls.made == 10 == 2 * result.k
    for request in llm.calls:
        assert request.temperature is None and not request.deterministic
        assert (request.purpose, request.max_tokens) == ("probe", 900)


async def test_sources_are_cut_to_the_source_token_cap() -> None:
    params = DEFAULT_PARAMS.override({"source_token_cap": 40})
    llm = ScriptedLLM(sides([WITH_CLAIM], [WITHOUT_CLAIM]))
    await probe(llm, params=params)
    text = llm.calls[0].prompt_text
    assert "# Land cover change playbook" in text and "Notes from past sessions" not in text


async def test_calls_run_concurrently_under_the_cap() -> None:
    llm = ScriptedLLM(sides([WITH_CLAIM], [WITHOUT_CLAIM]), latency=0.01)
    await probe(llm, params=DEFAULT_PARAMS.override({"concurrency": 2}))
    assert llm.max_in_flight == 2
    llm = ScriptedLLM(sides([WITH_CLAIM], [WITHOUT_CLAIM]), latency=0.01)
    await probe(llm)
    assert llm.max_in_flight == 6


async def test_usage_and_cost_are_summed_over_the_calls() -> None:
    llm = ScriptedLLM(
        lambda r: LLMResponse(WITH_CLAIM if target_present(r) else WITHOUT_CLAIM, Usage(100, 20, 0, 0.001))
    )
    result = await probe(llm)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (600, 120)
    assert result.cost_usd == pytest.approx(0.006)
    data = result.to_dict()
    assert data["calls"] == {"planned": 6, "made": 6, "failed": 0} and data["cost_usd"] == 0.006
    assert data["verdict"] == "required" and data["anchors"] == ["88.6", "30.1", "84.9", "35.1"]


async def test_an_unknown_target_is_rejected_before_any_call() -> None:
    llm = ScriptedLLM(sides([WITH_CLAIM], [WITHOUT_CLAIM]))
    with pytest.raises(KeyError):
        await probe_source(llm, CLAIM, QUERY, CORPUS, "s99")
    assert llm.calls == []
