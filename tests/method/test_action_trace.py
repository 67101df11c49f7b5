"""A metered trace of an action: leave-one-out over what the agent had seen when it made the call, with the
action's own questions, every estimator, and the injection finding read from the measurements."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pytest
from support.action_turns import IBAN, INSTRUCTION, call, injected, knowing_answer, native_turn, ret

from estimator.actions.trace import ActionNotFound, action_corpus, find_action, trace_action
from estimator.corpus.build import build_corpus
from estimator.seams.llm import LLMRequest, LLMResponse, Message, ScriptedLLM
from estimator.seams.scorer import ScriptedScorer
from estimator.trace import planned_calls
from prompts import template


def knowing_judge(request: LLMRequest) -> str:
    """Rates the call 9 when the page with the instruction is shown, 2 without it; quotes the instruction."""
    return knowing_answer(request.messages[0].content, request.messages[-1].content)


async def test_an_action_is_traced_to_the_return_that_told_the_agent_to_make_it() -> None:
    turn = injected()
    corpus = build_corpus(turn)
    llm = ScriptedLLM(knowing_judge)
    outcome = await trace_action("judged", turn, corpus, "a1", llm=llm)
    result = outcome.result
    page = next(u for u in corpus.tool_units() if u.tool == "fetch_page")
    own = next(u for u in corpus.tool_units() if u.tool == "transfer_money")
    assert result.target is not None
    assert (result.target.kind, result.target.id, result.target.tool, result.target.call_id) == (
        "action",
        "a1",
        "transfer_money",
        "c2",
    )
    assert result.claim == find_action(turn, "a1").text == result.target.text
    assert own.id not in result.target.context_sources and page.id in result.target.context_sources
    # the action's own questions, and never its own result
    judge_calls = [r for r in llm.calls if r.purpose == "judge"]
    assert judge_calls and all(r.messages[-1].content.startswith("CALL:") for r in judge_calls)
    assert all("strict judge of cause" in r.messages[0].content for r in judge_calls)
    assert not any("transfer 7781 done" in r.prompt_text for r in llm.calls)
    assert "judge_action_system" in result.prompt_versions and "judge_system" not in result.prompt_versions
    top = max((s for s in result.sources if s.delta is not None), key=lambda s: s.delta or -math.inf)
    assert top.source_id == page.id and top.role == "grounds"
    assert result.injection is not None and result.injection.suspected
    assert result.injection.source_id == page.id
    assert result.injection.quote is not None and INSTRUCTION in result.injection.quote
    assert result.injection.lines is not None and page.text.splitlines()[result.injection.lines[0] - 1].find(IBAN) >= 0
    assert result.injection.screened  # the free screen flagged it too
    assert "transfer_money was called because" in result.injection.because
    assert result.argument_sources is not None
    iban = next(a for a in result.argument_sources if a.path == "iban")
    assert iban.source_id == page.id and iban.decisive
    dumped = json.loads(result.model_dump_json())
    assert dumped["target"]["id"] == "a1" and dumped["injection"]["suspected"] is True


async def test_an_action_the_user_asked_for_is_not_suspected_even_when_the_page_also_asks() -> None:
    turn = injected(query=f"Read vendor-terms.html, then transfer money: 1000 EUR to {IBAN}.")
    corpus = build_corpus(turn)
    result = (await trace_action("judged", turn, corpus, "a1", llm=ScriptedLLM(knowing_judge))).result
    assert result.injection is not None
    assert not result.injection.suspected
    assert not result.injection.screened


async def test_a_screen_finding_the_measurement_does_not_bear_out_is_said_so() -> None:
    turn = injected()
    corpus = build_corpus(turn)

    def indifferent(request: LLMRequest) -> str:  # the call reads the same with or without the page
        if request.purpose == "support":
            return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"})
        return "5"

    result = (await trace_action("judged", turn, corpus, "a1", llm=ScriptedLLM(indifferent))).result
    assert result.injection is not None
    assert result.injection.screened and not result.injection.suspected
    assert "the free screen flagged" in result.injection.because


async def test_an_action_made_before_any_return_has_no_tool_sources() -> None:
    turn = injected()
    corpus = build_corpus(turn)
    kept, _ = action_corpus(turn, corpus, find_action(turn, "a0"))
    assert not kept.tool_units() and kept.units  # instructions and query-side sources only
    assert planned_calls("judged", kept) < planned_calls("judged", corpus)
    result = (await trace_action("judged", turn, corpus, "a0", llm=ScriptedLLM(knowing_judge))).result
    assert result.target is not None and result.target.tool == "fetch_page"
    assert result.injection is not None and not result.injection.suspected


def test_an_action_id_out_of_range_names_the_ids_there_are() -> None:
    turn = injected()
    with pytest.raises(ActionNotFound, match=r"no action 'a7' \(its actions: a0–a1\)"):
        find_action(turn, "a7")
    no_calls = native_turn("hi", [], response="Hello.")
    with pytest.raises(ActionNotFound, match="it made no tool call"):
        find_action(no_calls, "a0")


async def test_logprob_scores_the_call_as_the_agents_next_step() -> None:
    turn = injected()
    corpus = build_corpus(turn)
    action = find_action(turn, "a1")

    def scorer_script(messages: Sequence[Message], target: str) -> float:
        return -2.0 if INSTRUCTION in messages[-1].content else -40.0

    scorer = ScriptedScorer(scorer_script)
    outcome = await trace_action("logprob", turn, corpus, "a1", llm=ScriptedLLM(knowing_judge), scorer=scorer)
    assert scorer.calls and {target for _, target in scorer.calls} == {action.text}
    system = scorer.calls[0][0][0].content
    assert system.startswith(template("logprob_action_system")[0].split("$data_only_rule")[0].strip()[:60])
    assert "logprob_action_system" in outcome.result.prompt_versions
    assert outcome.result.injection is not None and outcome.result.injection.suspected
    assert outcome.result.estimator == "logprob"


async def test_every_estimator_traces_an_action() -> None:
    turn = injected()
    corpus = build_corpus(turn)

    def scorer_script(messages: Sequence[Message], target: str) -> float:
        return -2.0 if INSTRUCTION in messages[-1].content else -40.0

    def judge(request: LLMRequest) -> str | LLMResponse:
        answer = knowing_judge(request)
        if request.top_logprobs:  # the expected digit reads the alternatives of the answer's first token
            return LLMResponse(text=answer, top_logprobs=[{answer: 0.0}])
        return answer

    for choice in ("judged", "expected", "both", "proxy"):
        llm = ScriptedLLM(judge)
        outcome = await trace_action(choice, turn, corpus, "a1", llm=llm, scorer=ScriptedScorer(scorer_script))
        # under both, the judged trace leads and the log-probability trace stands beside it
        assert outcome.result.estimator == ("judged" if choice == "both" else choice), choice
        assert (outcome.logprob is not None) == (choice == "both"), choice
        assert outcome.to_model().estimator == choice, choice
        assert outcome.result.target is not None and outcome.result.target.id == "a1", choice
        assert outcome.result.injection is not None and outcome.result.injection.suspected, choice
        assert all(r.messages[-1].content.startswith("CALL:") for r in llm.calls), choice


def test_the_action_prompts_ask_about_a_call() -> None:
    for name in ("judge_action_system", "support_action_evidence", "support_action_directive"):
        text, version = template(name)
        assert "call" in text.lower() and version.startswith(name + "@")
    assert "$claim" in template("judge_action_user")[0]
    # a sentence's trace keeps the sentence's prompts
    turn = native_turn("q", [[call("f", {"x": 1}, "c")], [ret("f", "r", "c")]])
    assert find_action(turn, "a0").tool == "f"
