"""Proxy-first tracing at the estimator: a scripted scorer ranks (log p of the claim rises when the planted
source is shown), a scripted judge confirms or disagrees. What must hold: a confirmed ranking costs at most
the confirmation's calls; a disagreement runs the full judged search, says so, and never pays twice for a
measurement; the numbers of the result are the calls that were sent; the gate's worst case covers both
paths; the prefix order reuses what it claims to."""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Callable, Sequence

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_attribution import CLAIM, GROUNDING, QUERY, SILENT, make_corpus, script, standard_corpus

from estimator.audit.agreement import top_source
from estimator.corpus.units import Corpus, Layer
from estimator.cost import plan_calls, quote_cost
from estimator.loo.judged import trace_claim
from estimator.loo.logprob import INSTRUCTIONS_HEADING
from estimator.params import DEFAULT_PARAMS
from estimator.proxy.confirm import ProxyParams
from estimator.proxy.cost import local_prompt_tokens, proxy_capability, quote_proxy
from estimator.proxy.driver import confirm_calls, planned_proxy_calls, trace_proxy
from estimator.proxy.prefix import PrefixOrderedScorer, block_order, evaluated, next_index
from estimator.results.proxy import CONFIRMED_LINE, FALLBACK_LINE
from estimator.seams.llm import LLMError, LLMRequest, Message, ScriptedLLM
from estimator.seams.scorer import ScoredTarget, ScriptedScorer
from estimator.tokens import ApproxTokenizer
from estimator.trace import needs_scorer, planned_calls, run_trace

SUPPORTED = json.dumps({"verdict": "supported", "evidence_quote": GROUNDING[:50], "confidence": 0.9, "reason": "-"})


def shown_ids(messages: Sequence[Message]) -> set[str]:
    ids = set(re.findall(r"^\[(s\d+)\] ", messages[-1].content, flags=re.M))
    return ids | ({"instructions"} if messages[-1].content.startswith(INSTRUCTIONS_HEADING) else set())


def planted_scorer(cause: str = "s1", effect: float = 40.0) -> ScriptedScorer:
    return ScriptedScorer(lambda m, t: -70.0 + (effect if cause in shown_ids(m) else 0.0))


def support(request: LLMRequest) -> str:
    return SUPPORTED if "MODIS_Combined" in request.messages[-1].content.split("SOURCE:")[-1] else SILENT


def judge_of(decide: Callable[[dict[str, str]], str]) -> ScriptedLLM:
    return ScriptedLLM(script(decide, support))


def agreeing() -> ScriptedLLM:
    return judge_of(lambda shown: "9" if "s1" in shown else "2")


def opposite() -> ScriptedLLM:
    return judge_of(lambda shown: "2" if "s1" in shown else "9")


async def test_a_confirmed_ranking_costs_the_confirmation_only_and_its_numbers_are_the_calls_sent() -> None:
    corpus, llm, scorer = standard_corpus(), agreeing(), planted_scorer()
    outcome = await run_trace("proxy", CLAIM, QUERY, corpus, llm=llm, scorer=scorer)
    result = outcome.result
    doc = outcome.to_model().model_dump(mode="json")
    assert doc["estimator"] == "proxy" and doc["confirmed"] is True and doc["confirmation"] == CONFIRMED_LINE
    assert doc["proxy_model"] == scorer.model and doc["units"] == "nats" and doc["verdict"] == "attributed"
    assert top_source(result) == "s1"
    # made: hosted calls only, each one sent; scored: the local passes, each one scored
    assert doc["calls"]["made"] == len(llm.calls) <= confirm_calls() and doc["calls"]["scored"] == len(scorer.calls)
    assert len(scorer.calls) > len(llm.calls)
    assert doc["usage"]["input_tokens"] == sum(int(len(r.prompt_text) * 0.25) for r in llm.calls)
    assert doc["calls"]["planned"] == planned_calls("proxy", corpus)
    # the hosted judge measured s(1), s(0), s(1 − tools), s(1 − s1) and span-checked s1 only
    judged = [r for r in llm.calls if r.purpose == "judge"]
    assert len(judged) == 4 and len({r.prompt_text for r in judged}) == 4
    hosted = doc["proxy"]["hosted"]
    assert (hosted["top_layer"], hosted["top_source"], hosted["span_checked"]) == ("tools", "s1", ["s1"])
    assert hosted["gamma"] == 7.0 and hosted["top_source_drop"] == 7.0
    assert [s["source_id"] for s in doc["sources"] if s["support"]] == ["s1"]
    assert doc["proxy"]["proxy_ranking"][0] == {"id": "s1", "drop": 40.0, "role": "grounds"}
    assert doc["proxy"]["judged_ranking"] is None and doc["proxy"]["disagreements"] == []
    assert not any(w.startswith("No span checks were made") for w in doc["warnings"])


def elsewhere() -> ScriptedLLM:
    """Disagrees coherently: the claim holds on s2 for this judge, not on the proxy's s1."""
    return judge_of(lambda shown: "9" if "s2" in shown else "2")


async def test_when_the_judge_disagrees_the_full_search_runs_says_so_and_matches_the_judged_trace() -> None:
    corpus, llm = standard_corpus(), elsewhere()
    outcome = await run_trace("proxy", CLAIM, QUERY, corpus, llm=llm, scorer=planted_scorer())
    doc = outcome.to_model().model_dump(mode="json")
    assert doc["confirmed"] is False and doc["confirmation"] == FALLBACK_LINE
    assert doc["proxy"]["disagreements"] and "units" not in doc  # the judge's digits, not the proxy's nats
    assert doc["proxy"]["proxy_ranking"][0]["id"] == "s1" and doc["proxy"]["judged_ranking"]
    plain = await trace_claim(elsewhere(), CLAIM, QUERY, corpus)
    assert doc["verdict"] == plain.verdict and doc["gamma"] == plain.gamma
    assert {s["source_id"]: s["delta"] for s in doc["sources"]} == {s.source_id: s.delta for s in plain.sources}
    # never twice for one measurement: no judge prompt and no span check is sent twice
    prompts = [r.prompt_text for r in llm.calls]
    assert len(prompts) == len(set(prompts))
    assert doc["calls"]["made"] == len(llm.calls) <= plain.calls.made + 1 <= doc["calls"]["planned"]


def share_judge(without_s1: str) -> ScriptedLLM:
    """9 with everything, 1 with nothing, ``without_s1`` without s1 (others removed: 9)."""
    return judge_of(lambda shown: "1" if not shown else ("9" if "s1" in shown else without_s1))


@pytest.mark.parametrize(("margin", "confirmed"), [(0.5, False), (0.9, True)])
async def test_the_stated_margin_decides_between_confirming_and_widening(margin: float, confirmed: bool) -> None:
    """The judge finds s1 grounds the claim (drop 2 ≥ τ) but carries a quarter of Γ; the proxy, all of it."""
    result = await trace_proxy(
        planted_scorer(), share_judge("7"), CLAIM, QUERY, standard_corpus(), pp=ProxyParams(share_margin=margin)
    )
    assert result.confirmed is confirmed
    assert result.proxy is not None
    reasons = result.proxy.disagreements
    assert (not reasons) if confirmed else any("margin" in r for r in reasons)
    assert result.params["proxy"]["share_margin"] == margin


async def test_a_source_the_proxy_could_not_single_out_is_checked_by_the_judge() -> None:
    """Any two of three messages carry the claim for the proxy: the history layer grounds it, no message does
    alone or by its removal. The judge finds the first message grounds it: the search widens."""
    corpus = make_corpus(["unrelated weather data"], history=("first", "second", "third"))
    messages = [u.id for u in corpus.in_layer(Layer.HISTORY)]
    scorer = ScriptedScorer(lambda m, t: -70.0 + (40.0 if len(set(messages) & shown_ids(m)) >= 2 else 0.0))
    llm = judge_of(lambda shown: "9" if messages[0] in shown else "2")
    result = await trace_proxy(scorer, llm, CLAIM, QUERY, corpus)
    assert result.proxy is not None and result.proxy.proxy_verdict == "attributed"
    assert result.proxy.hosted.top_source == messages[0] and result.proxy.hosted.top_source_drop == 7.0
    assert not result.confirmed and any("no single source" in r for r in result.proxy.disagreements)
    assert top_source(result) == messages[0]


async def test_a_source_the_proxy_found_redundant_is_checked_by_the_judge() -> None:
    """Each of two tool returns carries the claim alone for the proxy (a look-alike); only s0 does for the judge."""
    corpus = make_corpus(["the original record", "a look-alike of it"], system=None)
    scorer = ScriptedScorer(lambda m, t: -70.0 + (40.0 if {"s0", "s1"} & shown_ids(m) else 0.0))
    llm = judge_of(lambda shown: "9" if "s0" in shown else "2")
    result = await trace_proxy(scorer, llm, CLAIM, QUERY, corpus)
    assert result.proxy is not None and result.proxy.proxy_verdict == "attributed"
    assert {s.role for s in result.proxy.proxy_ranking} == {"redundant"}
    assert not result.confirmed and top_source(result) == "s0"


async def test_a_redundant_ranking_is_checked_on_every_layer_not_only_its_top_one() -> None:
    """For the proxy a tool return and a message each carry the claim (no single layer matters), the message
    a little more, so its top layer is history. For the judge only the tool return does: removing history
    changes nothing for it, removing the tools does. Checking the top layer alone would confirm."""
    corpus = make_corpus(["the carrier record", "unrelated weather data"], history=("the carrier again", "ok"))
    tool = corpus.in_layer(Layer.TOOLS)[0].id
    message = next(u.id for u in corpus.in_layer(Layer.HISTORY) if "carrier" in u.text)

    def logp(messages: Sequence[Message], target: str) -> float:
        shown = shown_ids(messages)
        return -70.0 + (40.0 if {tool, message} & shown else 0.0) + (3.0 if message in shown else 0.0)

    llm = judge_of(lambda shown: "9" if tool in shown else "2")
    result = await trace_proxy(ScriptedScorer(logp), llm, CLAIM, QUERY, corpus)
    report = result.proxy
    assert report is not None and report.proxy_verdict == "redundant" and report.hosted.top_layer == "history"
    assert not result.confirmed and result.verdict == "attributed" and top_source(result) == tool
    assert any("removing the tools layer moves the hosted judge" in d for d in report.disagreements)
    assert result.calls.made <= planned_proxy_calls(corpus)


async def test_internal_knowledge_is_confirmed_by_gamma_alone() -> None:
    llm = judge_of(lambda shown: "8")
    result = await trace_proxy(ScriptedScorer(lambda m, t: -12.0), llm, CLAIM, QUERY, standard_corpus())
    assert result.verdict == "internal_knowledge" and result.confirmed
    assert result.calls.made == 2 and all(r.purpose == "judge" for r in llm.calls)


async def test_a_judge_that_cannot_answer_never_confirms() -> None:
    def failing(request: LLMRequest) -> str:
        raise LLMError("the provider is down")

    llm = ScriptedLLM(failing)
    result = await trace_proxy(planted_scorer(), llm, CLAIM, QUERY, standard_corpus())
    assert not result.confirmed and result.proxy is not None
    assert "no information" in result.proxy.disagreements[0]
    assert result.calls.made == len(llm.calls) <= result.calls.planned


def test_a_proxy_trace_needs_a_scorer() -> None:
    assert needs_scorer("proxy")
    with pytest.raises(ValueError, match="scorer"):
        anyio.run(lambda: run_trace("proxy", CLAIM, QUERY, standard_corpus(), llm=agreeing(), scorer=None))
    assert not proxy_capability(local_model=False, scorer_api_base=None).can_score
    assert proxy_capability(local_model=False, scorer_api_base="http://127.0.0.1:9/v1").can_score


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_tools=st.integers(0, 9),
    n_history=st.integers(0, 9),
    instructions=st.booleans(),
    max_sources=st.integers(1, 12),
    seed=st.integers(0, 10_000),
    judge=st.sampled_from(["agree", "random"]),
)
def test_the_gates_worst_case_covers_what_either_path_makes(
    n_tools: int, n_history: int, instructions: bool, max_sources: int, seed: int, judge: str
) -> None:
    if n_tools + n_history == 0 and not instructions:
        n_tools = 1
    params = DEFAULT_PARAMS.override({"max_sources": max_sources, "history_max_messages": 14})
    corpus = make_corpus(
        [f"return {i}" for i in range(n_tools)],
        system="rules" if instructions else None,
        history=tuple(f"message {i}" for i in range(n_history)),
        params=params,
    )
    carrier = corpus.units[seed % len(corpus.units)].id
    scorer = ScriptedScorer(lambda m, t: -70.0 + (30.0 if carrier in shown_ids(m) else 0.0))

    def digit(shown: dict[str, str]) -> str:
        if judge == "agree":
            return "9" if carrier in shown else "2"
        return str(1 + zlib.crc32(f"{seed}:{sorted(shown)}".encode()) % 9)

    fabricate = '{"verdict": "supported", "evidence_quote": "words that are nowhere at all", "confidence": 1}'
    llm = ScriptedLLM(script(digit, lambda r: fabricate))  # every span check retries: the worst case
    result = anyio.run(lambda: trace_proxy(scorer, llm, CLAIM, QUERY, corpus, params=params))
    planned = planned_proxy_calls(corpus, params)
    assert len(llm.calls) == result.calls.made <= planned == result.calls.planned
    assert result.calls.refused == 0
    if result.confirmed:
        assert result.calls.made <= confirm_calls(corpus=corpus)
    quote = quote_proxy(
        corpus,
        CLAIM,
        proxy_capability(local_model=True, scorer_api_base=None),
        quote_cost(corpus, CLAIM, model="m", params=params),
        params=params,
    ).to_model()
    assert quote.worst_case_calls == planned >= quote.fallback_calls == plan_calls(corpus, params).total
    assert result.calls.scored is not None  # trace_proxy's account carries the scoring passes
    assert quote.local_passes == plan_calls(corpus, params).ablation >= result.calls.scored


async def test_the_plan_covers_a_fallback_that_cannot_reuse_the_confirmation() -> None:
    """MAX_SOURCES=3 over three tool returns and four messages. The proxy finds the oldest tool return s0
    carries the claim; the judge needs a tool return and a message (any of each): it disagrees, and its
    full search tests and span-checks the most recent sources of both layers, not s0. The confirmation's
    s(1 − s0) and its span check of s0 (retried) come on top of what the full search spends."""
    params = DEFAULT_PARAMS.override({"max_sources": 3})
    corpus = make_corpus(
        ["return 0", "return 1", "return 2"],
        system=None,
        history=("message 0", "message 1", "message 2", "message 3"),
        params=params,
    )
    tools = {u.id for u in corpus.in_layer(Layer.TOOLS)}
    history = {u.id for u in corpus.in_layer(Layer.HISTORY)}
    oldest = min(corpus.in_layer(Layer.TOOLS), key=lambda u: u.ordinal).id
    scorer = ScriptedScorer(lambda m, t: -70.0 + (30.0 if oldest in shown_ids(m) else 0.0))

    def digit(shown: dict[str, str]) -> str:
        return str(round(2 + 3.5 * bool(tools & set(shown)) + 3.5 * bool(history & set(shown))))

    fabricate = '{"verdict": "supported", "evidence_quote": "words that are nowhere at all", "confidence": 1}'
    llm = ScriptedLLM(script(digit, lambda r: fabricate))
    result = await trace_proxy(scorer, llm, CLAIM, QUERY, corpus, params=params)
    assert result.proxy is not None and result.proxy.hosted.top_source == oldest
    assert not result.confirmed and result.calls.refused == 0
    assert plan_calls(corpus, params).total < result.calls.made <= planned_proxy_calls(corpus, params)


def test_the_quote_prices_both_sides() -> None:
    corpus = standard_corpus()

    class Flat:
        def price(self, model: str) -> tuple[float, float]:
            return (1e-6, 2e-6)

    judged = quote_cost(corpus, CLAIM, model="m", pricing=Flat(), query=QUERY)
    q = quote_proxy(
        corpus, CLAIM, proxy_capability(local_model=True, scorer_api_base=None), judged, query=QUERY, pricing=Flat()
    ).to_model()
    assert q.confirm_calls == confirm_calls(corpus=corpus) < q.worst_case_calls == planned_calls("proxy", corpus)
    assert q.confirm_cost_usd is not None and q.worst_case_cost_usd is not None and judged.cost_usd is not None
    assert q.confirm_cost_usd < judged.cost_usd <= q.worst_case_cost_usd
    assert 0 < q.local_prompt_tokens < q.local_prompt_tokens_without_reuse
    assert q.local_seconds == round(q.local_prompt_tokens / q.local_tokens_per_second, 1)


def test_the_next_prompt_shares_the_longest_prefix_and_small_branches_go_first() -> None:
    # after "abX", the longest shared prefix wins
    assert next_index(["abc", "abXd", "zz"], "abXe") == 1
    # from an empty cache: the branch {"b1", "b2"} is smaller than {"a1", "a2", "a3"}, so it goes first
    waiting = ["a1", "a2", "a3", "b1", "b2"]
    order: list[str] = []
    last = ""
    while waiting:
        order.append(last := waiting.pop(next_index(waiting, last)))
    assert order == ["b1", "b2", "a1", "a2", "a3"]


def test_the_evaluated_tokens_count_only_what_follows_the_shared_prefix() -> None:
    sizes = {"sys": 100, "a": 10, "b": 20, "tail": 5}
    spent, last = evaluated([("sys", "a", "b", "tail"), ("sys", "b", "tail"), ("sys", "a", "tail")], sizes)
    # the smaller branch after "sys" first: ("sys","b","tail") 125; then ("sys","a","b","tail") 35 (all but
    # "sys"), then ("sys","a","tail") 5 (all but "sys","a")
    assert (spent, last) == (165, ("sys", "a", "tail"))


async def test_the_scorer_sends_a_round_in_the_order_that_reuses_most() -> None:
    seen: list[str] = []

    async def record(messages: Sequence[Message], target: str) -> float:
        seen.append(messages[-1].content)
        return -1.0

    ordered = PrefixOrderedScorer(ScriptedScorer(record))
    prompts = ["a1", "b2", "a3", "b1", "a2"]
    async with anyio.create_task_group() as tg:
        for text in prompts:
            tg.start_soon(ordered.score, (Message("user", text),), "claim")
    assert seen == ["b1", "b2", "a1", "a2", "a3"]


def test_the_size_order_groups_layers_and_puts_the_largest_first() -> None:
    corpus = make_corpus(["x " * 5, "y " * 300, "z " * 40], history=("hello", "hi " * 30))
    texts = {u.id: u.shown for u in corpus.units}
    order = block_order(corpus, texts, ApproxTokenizer(), "size")
    layers = [corpus.by_id(uid).layer for uid in order]
    assert layers == sorted(layers, key=lambda x: layers.index(x))  # each layer contiguous
    tools = [uid for uid in order if corpus.by_id(uid).layer == Layer.TOOLS]
    assert [corpus.by_id(uid).text.split()[0] for uid in tools] == ["y", "z", "x"]
    assert block_order(corpus, texts, ApproxTokenizer(), "ordinal") == tuple(
        u.id for u in sorted(corpus.units, key=lambda u: u.ordinal)
    )


def test_reuse_evaluates_fewer_prompt_tokens_than_no_reuse_on_the_plan() -> None:
    corpus: Corpus = standard_corpus()
    with_reuse, without = local_prompt_tokens(corpus, CLAIM, QUERY)
    assert 0 < with_reuse < without


async def test_a_scorer_that_fails_is_no_information_and_the_judge_decides() -> None:
    async def broken(messages: Sequence[Message], target: str) -> ScoredTarget:
        from estimator.seams.scorer import ScorerError

        raise ScorerError("the local model is gone")

    result = await trace_proxy(ScriptedScorer(broken), agreeing(), CLAIM, QUERY, standard_corpus())
    assert not result.confirmed and result.verdict == "attributed" and top_source(result) == "s1"
    assert result.proxy is not None and math.isnan(result.proxy.proxy_layers[0].drop or math.nan)
