"""Algorithm 4 / 4a — TraceClaim on small synthetic turns, driven by scripted judges."""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus, Evidence, Layer, Unit, sha256_hex
from estimator.cost import plan_calls
from estimator.fence import split_fenced
from estimator.loo.judged import ProgressEvent, drop, role_of, select_sources, trace_claim
from estimator.params import DEFAULT_PARAMS, Params
from estimator.seams.llm import LLMRequest, ScriptedLLM

CLAIM = "The annual layer is MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual."
QUERY = "Which layer shows annual land cover?"
GROUNDING = '{"layer_id": "MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual", "period": "yearly"}'
SILENT = '{"verdict": "silent", "evidence_quote": "", "confidence": 0.6, "reason": "not about this"}'


def make_corpus(
    tools: list[str],
    *,
    system: str | None = "Answer briefly.",
    history: tuple[str, ...] = (),
    versioned: bool = False,
    params: Params = DEFAULT_PARAMS,
) -> Corpus:
    messages: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(history)
    ]
    messages.append({"role": "user", "content": QUERY})
    turn = StoredTurn.model_validate(
        {
            "turn_id": "t-attr",
            "response": CLAIM,
            "system_prompt": system,
            "system_prompt_versioned": versioned,
            "response_payload": {
                "tool_calls": [
                    {"name": "lookup", "arguments": {"query": f"q{i}"}, "response": text}
                    for i, text in enumerate(tools)
                ]
            },
            "request_payload": {"messages": messages},
        }
    )
    return build_corpus(turn, params)


def standard_corpus() -> Corpus:
    """s0-s2 tools (s1 grounds the claim), s3 instructions, s4-s5 history."""
    return make_corpus(
        ["unrelated weather data", GROUNDING, "a bounding box for Alabama"], history=("hello", "hi, how can I help?")
    )


def shown(request: LLMRequest) -> dict[str, str]:
    """The sources a judge request shows: id -> the text of its data region (after the header line)."""
    regions, _ = split_fenced(request.messages[-1].content)
    return {
        m.group(1): m.group(2)
        for region in regions
        if (m := re.match(r"\[(s\d+)\] [^\n]*\n(.*)\Z", region.strip("\n"), flags=re.S))
    }


def script(
    judge: Callable[[dict[str, str]], str], support: Callable[[LLMRequest], str] = lambda r: SILENT
) -> Callable[[LLMRequest], str]:
    return lambda r: judge(shown(r)) if r.purpose == "judge" else support(r)


def grounded_by_s1(sources: dict[str, str]) -> str:
    return "9" if "s1" in sources else "1"


def test_select_sources_is_layer_balanced_round_robin_by_recency() -> None:
    def u(i: int, layer: Layer) -> Unit:
        return Unit(f"s{i}", "k", "t", f"label {i}", "x", i, layer, Evidence(sha256_hex("x"), "t", 1))

    units = (
        [u(i, Layer.TOOLS) for i in range(6)] + [u(6, Layer.INSTRUCTIONS)] + [u(i, Layer.HISTORY) for i in range(7, 12)]
    )
    kept, omitted = select_sources(units, 5)
    assert [k.id for k in kept] == ["s4", "s5", "s6", "s10", "s11"]  # ordinal order; newest of each layer
    assert omitted == tuple(f"label {i}" for i in (0, 1, 2, 3, 7, 8, 9))
    assert select_sources(units, 12) == (tuple(units), ())


def test_drop_reads_nan_as_no_information_and_roles_use_tau() -> None:
    assert drop(9.0, 1.0) == 8.0 and drop(math.nan, 1.0) == 0.0 and drop(5.0, math.nan) == 0.0
    assert [role_of(d, 0.5) for d in (0.5, 0.49, -0.5, -0.49, 0.0)] == [
        "grounds",
        "irrelevant",
        "distractor",
        "irrelevant",
        "irrelevant",
    ]


async def test_an_attributed_claim_is_localised_to_its_tool_return() -> None:
    corpus = standard_corpus()
    llm = ScriptedLLM(script(grounded_by_s1))
    result = await trace_claim(llm, CLAIM, QUERY, corpus)
    assert (result.s_all, result.s_none, result.gamma, result.verdict) == (9.0, 1.0, 8.0, "attributed")
    assert result.verdict_text == "attributed" and result.contributing_layers == (Layer.TOOLS,)
    assert [(x.layer, x.delta, x.role) for x in result.layers] == [
        (Layer.TOOLS, 8.0, "grounds"),
        (Layer.INSTRUCTIONS, 0.0, "irrelevant"),
        (Layer.HISTORY, 0.0, "irrelevant"),
    ]
    tested = {s.source_id: (s.delta, s.role) for s in result.sources if s.delta is not None}
    assert tested == {"s0": (0.0, "irrelevant"), "s1": (8.0, "grounds"), "s2": (0.0, "irrelevant")}
    assert result.round2_skipped_reason is None and len(result.sources) == len(corpus.units)
    # round 1: 5 masks; round 2: 3 singles (s(1) and the candidates mask equal round-1 masks); 6 span checks
    judge_calls = [c for c in llm.calls if c.purpose == "judge"]
    assert len(judge_calls) == 8 and len({c.prompt_text for c in judge_calls}) == 8
    assert (result.calls.made, result.calls.saved, result.calls.planned) == (14, 2, plan_calls(corpus).total)


async def test_deduplication_saves_calls_and_changes_no_verdict() -> None:
    corpus = standard_corpus()
    fast = await trace_claim(ScriptedLLM(script(grounded_by_s1)), CLAIM, QUERY, corpus)
    slow = await trace_claim(ScriptedLLM(script(grounded_by_s1)), CLAIM, QUERY, corpus, dedupe=False)
    assert fast.calls.saved >= 2 and slow.calls.saved == 0
    assert slow.calls.made - fast.calls.made == fast.calls.saved
    for key in ("gamma", "verdict", "layers", "sources", "diagnosis"):
        assert fast.to_dict()[key] == slow.to_dict()[key]


FABRICATE = '{"verdict": "supported", "evidence_quote": "words that are nowhere at all", "confidence": 1}'


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_tools=st.integers(0, 14),
    n_history=st.integers(0, 14),
    instructions=st.booleans(),
    max_sources=st.integers(1, 12),
    seed=st.integers(0, 10_000),
)
def test_calls_made_never_exceed_the_plan(
    n_tools: int, n_history: int, instructions: bool, max_sources: int, seed: int
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

    def judge(sources: dict[str, str]) -> str:  # an arbitrary (but deterministic) judge of the mask
        return str(1 + zlib.crc32(f"{seed}:{sorted(sources)}".encode()) % 9)

    llm = ScriptedLLM(script(judge, lambda r: FABRICATE))  # every span check retries: the worst case
    result = anyio.run(lambda: trace_claim(llm, CLAIM, QUERY, corpus, params=params))
    assert len(llm.calls) == result.calls.made <= plan_calls(corpus, params).total == result.calls.planned
    spans = [c for c in llm.calls if c.purpose == "support"]
    assert len(spans) == 2 * min(len(corpus.units), max_sources)


@pytest.mark.parametrize("cap", [1, 3, 6])
async def test_concurrency_never_exceeds_the_cap(cap: int) -> None:
    llm = ScriptedLLM(script(grounded_by_s1), latency=0.005)
    params = DEFAULT_PARAMS.override({"concurrency": cap})
    await trace_claim(llm, CLAIM, QUERY, standard_corpus(), params=params)
    assert llm.max_in_flight == cap


async def test_span_checks_overlap_the_ablation_rounds() -> None:
    # Ordering, not timing: with room for every call, the first span check must start before any
    # round-1 judgement has finished — span localisation does not wait for the rounds.
    log: list[tuple[str, str]] = []

    async def ordered(request: LLMRequest) -> str:
        log.append(("start", request.purpose))
        await anyio.sleep(0.01)
        log.append(("end", request.purpose))
        return grounded_by_s1(shown(request)) if request.purpose == "judge" else SILENT

    await trace_claim(
        ScriptedLLM(ordered), CLAIM, QUERY, standard_corpus(), params=DEFAULT_PARAMS.override({"concurrency": 64})
    )
    first_span_start = log.index(("start", "support"))
    first_judge_end = log.index(("end", "judge"))
    last_judge_start = max(i for i, e in enumerate(log) if e == ("start", "judge"))
    assert first_span_start < first_judge_end
    assert first_span_start < last_judge_start  # round 2 had not even begun


async def test_an_unreadable_judge_answer_is_a_disclosed_no_information_drop() -> None:
    def judge(sources: dict[str, str]) -> str:
        if "s0" not in sources and "s1" not in sources and sources:
            return "I think 7"  # the tools-removed mask
        return grounded_by_s1(sources)

    result = await trace_claim(ScriptedLLM(script(judge)), CLAIM, QUERY, standard_corpus())
    tools = result.layer(Layer.TOOLS)
    assert tools.no_information and tools.delta == 0.0 and tools.role == "irrelevant"
    assert math.isnan(tools.s_without)
    assert any("No information without the tools layer" in w and "not a single digit" in w for w in result.warnings)
    # no layer contributes, but the tools layer was not measured: "redundant" would be a guess
    assert result.verdict == "no_information" and result.round2_skipped_reason is not None
    assert "could not be measured" in result.round2_skipped_reason
    as_json = json.dumps(result.to_dict(), allow_nan=False)
    assert json.loads(as_json)["layers"][0]["s_without"] is None


@pytest.mark.parametrize("answer", ["", "I think 7"])
async def test_no_score_with_everything_present_means_gamma_is_unknown(answer: str) -> None:
    result = await trace_claim(
        ScriptedLLM(script(lambda s: answer if len(s) == 6 else "3")), CLAIM, QUERY, standard_corpus()
    )
    assert math.isnan(result.gamma) and result.verdict == "no_information"
    assert result.to_dict()["gamma"] is None and result.to_dict()["s_all"] is None
    assert any("No information with every source present" in w for w in result.warnings)
    json.dumps(result.to_dict(), allow_nan=False)


def support_for(unit_marker: str, reply: str) -> Callable[[LLMRequest], str]:
    return lambda r: reply if unit_marker in r.messages[-1].content else SILENT


async def test_a_contradiction_of_a_grounding_source_is_a_misread() -> None:
    contradicted = (
        '{"verdict": "contradicted", "evidence_quote": "\\"period\\": \\"yearly\\"", '
        '"confidence": 0.8, "reason": "the claim says monthly"}'
    )
    llm = ScriptedLLM(script(grounded_by_s1, support_for(GROUNDING, contradicted)))
    result = await trace_claim(llm, "The layer is updated monthly.", QUERY, standard_corpus())
    s1 = result.source("s1")
    assert s1.support is not None and s1.support.verdict == "contradicted" and s1.support.quote
    assert s1.role == "grounds" and s1.diagnosis == "agent misread the source"


async def test_a_contradiction_without_attribution_is_the_model_overriding_the_data() -> None:
    contradicted = (
        '{"verdict": "contradicted", "evidence_quote": "unrelated weather data", "confidence": 0.7, "reason": "-"}'
    )
    llm = ScriptedLLM(script(lambda s: "5", support_for("unrelated weather data", contradicted)))
    result = await trace_claim(llm, CLAIM, QUERY, standard_corpus())
    assert result.verdict == "internal_knowledge" and result.diagnosis is None
    assert result.source("s0").diagnosis == "model overrode your data"


async def test_a_redundant_claim_skips_round_2_says_why_and_still_quotes() -> None:
    corpus = make_corpus(["unrelated", GROUNDING], history=("which layer?", "Use the IGBP annual layer."))
    supported = (
        '{"verdict": "supported", "evidence_quote": "Use the IGBP annual layer", '
        '"confidence": 0.86, "reason": "states it"}'
    )
    llm = ScriptedLLM(
        script(lambda s: "9" if {"s1", "s4"} & set(s) else "1", support_for("Use the IGBP annual layer", supported))
    )
    result = await trace_claim(llm, CLAIM, QUERY, corpus)
    assert (result.gamma, result.verdict) == (8.0, "redundant")
    assert result.verdict_text == "carried by several sources"
    assert all(x.delta == 0.0 for x in result.layers) and result.contributing_layers == ()
    assert result.round2_skipped_reason and "carries this claim independently" in result.round2_skipped_reason
    # round 2 is skipped; the complementary question is asked instead: which layers carry it alone
    # (tools: s1; history: s4), then which of their sources (s1, s4), with every other source removed
    assert all(s.delta is None for s in result.sources)
    assert [(x.layer.value, x.role, x.alone) for x in result.layers] == [
        ("tools", "redundant", 9.0),
        ("instructions", "irrelevant", 1.0),
        ("history", "redundant", 9.0),
    ]
    assert {s.source_id: (s.role, s.alone) for s in result.sources} == {
        "s0": (None, 1.0),
        "s1": ("redundant", 9.0),
        "s2": (None, None),
        "s3": (None, 1.0),
        "s4": ("redundant", 9.0),
    }
    assert "Any one of the tools, history layers is enough" in result.redundancy[0]
    assert "s1 alone is enough" in " ".join(result.redundancy)
    s4 = result.source("s4")
    assert s4.support is not None and s4.support.line_start == 1 and s4.diagnosis == "grounded in your data"
    # round 1, each layer alone, each source of a carrying layer alone, one span check per source
    assert result.calls.made == 5 + 3 + 4 + len(corpus.units) and result.calls.refused == 0


async def test_internal_knowledge_with_every_source_silent_is_unverifiable() -> None:
    result = await trace_claim(ScriptedLLM(script(lambda s: "7")), CLAIM, QUERY, standard_corpus())
    assert (result.gamma, result.verdict) == (0.0, "internal_knowledge")
    assert result.verdict_text == "model's own knowledge"
    assert result.diagnosis == "unverifiable model knowledge"
    assert result.round2_skipped_reason and "survives the removal" in result.round2_skipped_reason
    assert {s.diagnosis for s in result.sources} == {"unverifiable model knowledge"}


async def test_warnings_disclose_unversioned_instructions_truncation_and_omissions() -> None:
    long = " ".join(f"token{i}" for i in range(300))
    corpus = make_corpus([long, "b", "c", "d"], history=("x", "y"))
    params = DEFAULT_PARAMS.override({"source_token_cap": 40, "max_sources": 3})
    result = await trace_claim(
        ScriptedLLM(script(lambda s: "9" if "s0" in s else "1")), CLAIM, QUERY, corpus, params=params
    )
    warnings = "\n".join(result.warnings)
    unversioned = "s4 (agent instructions (system prompt)): current text; an edit since this turn can't be detected"
    assert unversioned in warnings
    assert re.search(r"^s0 \(lookup: q0\) is \d+ tokens, larger than the 40-token scoring window", warnings, re.M)
    assert result.omitted and all(label in warnings for label in result.omitted)
    versioned = make_corpus(["a"], versioned=True)
    clean = await trace_claim(ScriptedLLM(script(lambda s: "5")), CLAIM, QUERY, versioned)
    assert not any("edit since this turn" in w for w in clean.warnings)


async def test_progress_reports_every_stage_against_the_plan() -> None:
    events: list[ProgressEvent] = []
    corpus = standard_corpus()
    await trace_claim(ScriptedLLM(script(grounded_by_s1)), CLAIM, QUERY, corpus, on_progress=events.append)
    assert {e.round for e in events} == {"round1", "round2", "spans"}
    done = [e.made for e in events]
    assert done == sorted(done) and done[-1] == 14
    assert all(e.planned == plan_calls(corpus).total for e in events)
    last_round1 = [e for e in events if e.round == "round1"][-1]
    assert last_round1.layer_scores == {"tools": 8.0, "instructions": 0.0, "history": 0.0}


async def test_the_result_serialises_to_the_stable_contract() -> None:
    result = await trace_claim(ScriptedLLM(script(grounded_by_s1)), CLAIM, QUERY, standard_corpus())
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert {"gamma", "s_all", "s_none", "verdict", "layers", "sources", "omitted", "calls", "usage", "cost_usd"} <= set(
        data
    )
    assert {"layer", "delta", "role"} <= set(data["layers"][0])
    assert {"source_id", "layer", "delta", "role", "support"} <= set(data["sources"][0])
    assert {"verdict", "quote", "line_start", "line_end", "confidence", "downgraded"} <= set(
        data["sources"][0]["support"]
    )
    assert {"planned", "made", "saved", "cached"} <= set(data["calls"])
    assert data["cost_usd"] is None  # the scripted provider reports no price: unknown, not zero
    assert data["params"] == DEFAULT_PARAMS.model_dump() and data["prompt_versions"]["judge_user"]


async def test_an_empty_corpus_is_refused() -> None:
    with pytest.raises(ValueError, match="no sources"):
        await trace_claim(ScriptedLLM(lambda r: "5"), CLAIM, QUERY, Corpus(units=()))


async def test_round_2_is_capped_by_recency_and_names_every_omitted_candidate() -> None:
    corpus = make_corpus([f"return {i}" for i in range(5)] + [GROUNDING], system=None)
    params = DEFAULT_PARAMS.override({"max_sources": 3})
    llm = ScriptedLLM(script(lambda s: "9" if "s5" in s else "1"))
    result = await trace_claim(llm, CLAIM, QUERY, corpus, params=params)
    assert [s.source_id for s in result.sources if s.delta is not None] == ["s3", "s4", "s5"]
    assert result.source("s5").role == "grounds"
    assert result.omitted == ("lookup: q0", "lookup: q1", "lookup: q2")
    # round 1: 1, 0, 1-tools(=0) -> 2 calls; round 2: the 3-candidate mask is new, plus 3 singles
    assert sum(c.purpose == "judge" for c in llm.calls) == 2 + 4
    assert result.calls.made <= plan_calls(corpus, params).total


async def test_an_attributed_claim_never_reads_model_knew_it() -> None:
    """§9 follows Γ: with Γ ≥ τ_Γ a source whose own removal changed nothing and that does not carry the
    claim alone gets no diagnosis (its part is not established), never "model knew it"."""
    supported = (
        '{"verdict": "supported", "evidence_quote": "a bounding box for Alabama", "confidence": 0.7, "reason": "-"}'
    )
    llm = ScriptedLLM(script(grounded_by_s1, support_for("a bounding box for Alabama", supported)))
    result = await trace_claim(llm, CLAIM, QUERY, standard_corpus())
    assert result.verdict == "attributed" and result.source("s1").role == "grounds"
    s2 = result.source("s2")
    assert s2.role == "irrelevant" and s2.support is not None and s2.support.verdict == "supported"
    assert s2.diagnosis is None
    assert not any(s.diagnosis == "model knew it, data agrees" for s in result.sources)
