"""Proxy-first tracing when the hosted judge contradicts the local measurement: a judge whose own answers cannot
all be true (the claim likelier with nothing shown than with its cause, so every irrelevant part "matters more
than the whole") does not overrule a coherent ranking — the result is the proxy's, unconfirmed, with the judge's
contradictions listed — while a judge that disagrees coherently still decides, as before."""

from __future__ import annotations

import json
from collections.abc import Sequence

from support.action_turns import injected
from test_attribution import CLAIM, QUERY, standard_corpus
from test_proxy import agreeing, judge_of, opposite, planted_scorer, shown_ids

from estimator.actions.trace import trace_action
from estimator.audit.agreement import top_source
from estimator.audit.invariants import violations
from estimator.corpus.build import build_corpus
from estimator.loo.coherence import HEDGE
from estimator.proxy.driver import rank, self_contradictions, trace_proxy
from estimator.proxy.result import ProxyTraceResultModel
from estimator.results.proxy import CONFIRMED_LINE, CONTRADICTED_LINE, CONTRADICTED_WARNING, FALLBACK_LINE
from estimator.seams.llm import LLMRequest, Message, ScriptedLLM
from estimator.seams.scorer import ScriptedScorer

SILENT = json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"})


async def test_a_judge_whose_answers_contradict_each_other_does_not_overrule_a_coherent_ranking() -> None:
    llm = opposite()  # 2 while the cause s1 is shown, 9 without it
    result = await trace_proxy(planted_scorer(), llm, CLAIM, QUERY, standard_corpus())
    assert result.proxy is not None and result.proxy.judged_ranking  # the full judged search ran
    assert not result.confirmed and result.confirmation == CONTRADICTED_LINE
    # the result is the local measurement: its verdict, its top source, its nats
    assert result.verdict == "attributed" and top_source(result) == "s1" and result.gamma == 40.0
    assert result.model_dump(mode="json")["units"] == "nats"
    # the judge's story is not stated: neither its verdict nor its distractor reading of s1
    assert result.source("s1").role == "grounds" and HEDGE not in result.verdict_text
    said = [d for d in result.proxy.disagreements if d.startswith("the hosted judge's own measurements contradict")]
    assert said and all("a part cannot matter more than the whole" in d for d in said)
    assert CONTRADICTED_WARNING in result.warnings
    assert "its own answers contradicting each other" in result.notes[-1]
    assert violations(result) == []  # every word still agrees with the result's own numbers
    assert result.calls.made == len(llm.calls) <= result.calls.planned


async def test_a_judge_that_disagrees_coherently_still_decides() -> None:
    """The judge holds the claim on s2, not s1: a different, consistent reading; the full search is the answer."""
    llm = judge_of(lambda shown: "9" if "s2" in shown else "2")
    result = await trace_proxy(planted_scorer(), llm, CLAIM, QUERY, standard_corpus())
    assert not result.confirmed and result.confirmation == FALLBACK_LINE
    assert top_source(result) == "s2" and not self_contradictions(result)
    assert CONTRADICTED_WARNING not in result.warnings


async def test_an_incoherent_ranking_gives_no_precedence_over_the_judge() -> None:
    """Both sides contradict themselves: nothing is coherent to rank by, so the judge's search stays the answer."""

    def wild(messages: Sequence[Message], target: str) -> float:  # removing s1 costs 50 nats, everything 20
        shown = shown_ids(messages)
        return -10.0 if "s1" in shown else -60.0 if shown else -30.0

    ranking = await rank(ScriptedScorer(wild), CLAIM, QUERY, standard_corpus(), model="judge")
    assert ranking.result.verdict == "attributed" and self_contradictions(ranking.result)
    result = await trace_proxy(ScriptedScorer(wild), opposite(), CLAIM, QUERY, standard_corpus(), ranking=ranking)
    assert not result.confirmed and result.confirmation == FALLBACK_LINE
    assert CONTRADICTED_WARNING not in result.warnings


async def test_a_knowing_judge_still_confirms() -> None:
    result = await trace_proxy(planted_scorer(), agreeing(), CLAIM, QUERY, standard_corpus())
    assert result.confirmed and result.confirmation == CONFIRMED_LINE


async def test_an_adversarial_judge_of_an_action_leaves_the_injected_return_on_top() -> None:
    """The judge rates the obeying call 2 while the injected page is shown and 9 without it; the local model's
    probability of the call rises with the page. The injection is still found, and not confirmed."""
    turn = injected()
    corpus = build_corpus(turn)
    page = next(u for u in corpus.tool_units() if u.tool == "fetch_page")

    def adversary(request: LLMRequest) -> str:
        if request.purpose != "judge":
            return SILENT
        return "2" if f"[{page.id}] " in request.messages[-1].content else "9"

    def scorer(messages: Sequence[Message], target: str) -> float:
        return -30.0 + (20.0 if page.id in shown_ids(messages) else 0.0)

    outcome = await trace_action("proxy", turn, corpus, "a1", llm=ScriptedLLM(adversary), scorer=ScriptedScorer(scorer))
    result = outcome.result
    assert isinstance(result, ProxyTraceResultModel)
    assert top_source(result) == page.id and result.confirmation == CONTRADICTED_LINE
    assert result.injection is not None and result.injection.suspected and result.injection.source_id == page.id
