"""The three recorded outcomes of §8, replayed on the project fixtures with scripted judges.

§8.1 attributed (a hedge resolved to the governing rule of the system prompt), §8.2 redundant
(round 2 skipped, quotes from a JSON-escaped tool return and a history reply), §8.3 internal knowledge.
The paper's corpora keep the system prompt whole (the seed's Algorithm 1, ``instructions_as_rules=False``):
its figures — 8 sources and 31 calls, 11 and 39 — are counted on them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus, Layer
from estimator.cost import plan_calls
from estimator.fence import split_fenced
from estimator.loo.judged import trace_claim
from estimator.params import Params
from estimator.results.models import TraceResultModel
from estimator.seams.llm import LLMRequest, ScriptedLLM
from estimator.spans.support import DIRECTIVE_HEADING

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SEED = Params(instructions_as_rules=False)
HEDGE = (
    "Non-authoritative note: classification maps can change due to real land change or mapping "
    "uncertainty (especially near edges/mixed landscapes), so treat this as an exploratory visual "
    "comparison rather than a definitive change calculation."
)
LAYER_CLAIM = "Layer: MODIS Annual Land Cover Type (IGBP classification)."
TOOL_QUOTE = (
    '"layer_id": "MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual",\n  "platform": "",\n  '
    '"bm25_score": 1.0, "instrument": "modis", "description": "The Terra and Aqua combined '
    "Moderate Resolution Imaging Spectroradiometer (MODIS) Land Cover Type (MCD12Q1) Version 6.1 "
    "data product provides global land cover types at yearly intervals."
)
HISTORY_QUOTE = "showing the MODIS annual land cover classification (IGBP)"


def load(name: str) -> tuple[StoredTurn, Corpus]:
    turn = StoredTurn.model_validate_json((FIXTURES / name).read_text(encoding="utf-8"))
    return turn, build_corpus(turn, SEED)


def shown(request: LLMRequest) -> dict[str, str]:
    """The sources a judge request shows: id -> the text of its data region (after the header line)."""
    regions, _ = split_fenced(request.messages[-1].content)
    return {
        m.group(1): m.group(2)
        for region in regions
        if (m := re.match(r"\[(s\d+)\] [^\n]*\n(.*)\Z", region.strip("\n"), flags=re.S))
    }


def reply(verdict: str, quote: str = "", confidence: float = 0.8, reason: str = "-") -> str:
    return json.dumps({"verdict": verdict, "evidence_quote": quote, "confidence": confidence, "reason": reason})


def scripted(judge: Callable[[dict[str, str]], str], support: Callable[[str], str]) -> ScriptedLLM:
    def script(request: LLMRequest) -> str:
        if request.purpose == "judge":
            return judge(shown(request))
        return support(request.messages[-1].content)

    return ScriptedLLM(script)


def rule_lines(corpus: Corpus) -> tuple[int, str]:
    """The 1-based line of the '## Non-authoritative communication' rule, and the rule (3 lines)."""
    lines = corpus.in_layer(Layer.INSTRUCTIONS)[0].lines
    start = lines.index("## Non-authoritative communication")
    return start + 1, "\n".join(lines[start : start + 3])


def hedge_judge(corpus: Corpus) -> Callable[[dict[str, str]], str]:
    tools = {u.id for u in corpus.in_layer(Layer.TOOLS)}
    instructions = corpus.in_layer(Layer.INSTRUCTIONS)[0].id

    def judge(sources: dict[str, str]) -> str:
        if not sources:
            return "1"
        if not tools & set(sources) or instructions not in sources:
            return "9"
        return "5"

    return judge


def hedge_support(corpus: Corpus) -> Callable[[str], str]:
    _, rule = rule_lines(corpus)
    return lambda prompt: (
        reply("supported", rule, 0.72, "directs this response")
        if f"\n{DIRECTIVE_HEADING}:\n" in prompt
        else reply("silent")
    )


async def trace_hedge(*, dedupe: bool = True) -> tuple[TraceResultModel, Corpus]:
    turn, corpus = load("eo_worldview_turn.json")
    llm = scripted(hedge_judge(corpus), hedge_support(corpus))
    return await trace_claim(llm, HEDGE, turn.effective_query(), corpus, dedupe=dedupe), corpus


async def test_8_1_the_hedge_is_attributed_to_the_governing_rule() -> None:
    turn, corpus = load("eo_worldview_turn.json")
    assert HEDGE in turn.response and len(corpus) == 8 and len(corpus.layers_present()) == 3
    result, _ = await trace_hedge()
    assert (result.s_all, result.s_none, result.gamma, result.verdict) == (5.0, 1.0, 4.0, "attributed")
    assert [(x.layer, x.delta, x.role) for x in result.layers] == [
        (Layer.TOOLS, -4.0, "distractor"),
        (Layer.INSTRUCTIONS, -4.0, "distractor"),
        (Layer.HISTORY, 0.0, "irrelevant"),
    ]
    instructions = result.source(corpus.in_layer(Layer.INSTRUCTIONS)[0].id)
    line, rule = rule_lines(corpus)
    support = instructions.support
    assert support is not None and support.verdict == "supported" and not support.downgraded
    assert support.quote == rule and (support.line_start, support.line_end) == (line, line + 2)
    assert support.confidence == 0.72 and instructions.diagnosis == "grounded in your data"
    assert instructions.delta == -4.0 and instructions.role == "distractor"
    assert all(s.delta == 0.0 for s in result.sources if s.layer == Layer.TOOLS)
    assert any(w.endswith("current text; an edit since this turn can't be detected") for w in result.warnings)
    assert len([w for w in result.warnings if "700-token scoring window" in w]) == 2
    # The paper's tally for this corpus is 31 (§8.1: "8 sources, 31 calls"); the plan here is 39 because it
    # also reserves redundancy resolution (each candidate kept alone once, 8 calls). This claim needs none
    # (no layer grounds it without a source that does), so the calls made are the paper's terms only.
    plan = plan_calls(corpus)
    assert plan.round1 + plan.round2 + plan.spans == 31 and plan.redundancy == 8
    assert result.calls.planned == plan.total == 39
    assert result.calls.made == 5 + 6 + 8 <= 31 and result.calls.refused == 0


async def test_8_1_deduplication_saves_at_least_two_calls_with_verdicts_unchanged() -> None:
    fast, _ = await trace_hedge()
    slow, _ = await trace_hedge(dedupe=False)
    assert fast.calls.saved >= 2 and slow.calls.made - fast.calls.made == fast.calls.saved
    assert fast.calls.made <= slow.calls.made <= 31  # the paper's tally: no redundancy resolution needed here
    for key in ("gamma", "verdict", "layers", "sources", "diagnosis"):
        assert fast.to_dict()[key] == slow.to_dict()[key]


def layer_judge(sources: dict[str, str]) -> str:
    return "9" if any("IGBP" in text for text in sources.values()) else "1"


def layer_support(prompt: str) -> str:
    body = split_fenced(prompt)[0][-1].strip("\n")  # the source's region: the claim's comes first
    if f"\n{DIRECTIVE_HEADING}:\n" in prompt:
        return reply("silent", "", 0.77, "no instruction here bears on this")
    if "search_worldview_layers(" in body.split("\n", 1)[0]:
        return reply("supported", TOOL_QUOTE, 0.86, "states the claim")
    if "agent replied" in body.split("\n", 1)[0] and HISTORY_QUOTE in body:
        return reply("supported", HISTORY_QUOTE, 0.86, "states the claim")
    return reply("silent")


async def test_8_2_the_layer_claim_is_redundant_and_the_quotes_carry_the_answer() -> None:
    turn, corpus = load("eo_worldview_turn.json")
    assert LAYER_CLAIM in turn.response
    llm = scripted(layer_judge, layer_support)
    result = await trace_claim(llm, LAYER_CLAIM, turn.effective_query(), corpus)
    assert (result.s_all, result.s_none, result.gamma, result.verdict) == (9.0, 1.0, 8.0, "redundant")
    assert [x.delta for x in result.layers] == [0.0, 0.0, 0.0]
    assert result.round2_skipped_reason is not None and "independently" in result.round2_skipped_reason
    assert all(s.delta is None for s in result.sources)
    tool = next(s for s in result.sources if s.label.startswith("search_worldview_layers"))
    assert tool.support is not None and tool.support.verdict == "supported"
    assert tool.support.quote == TOOL_QUOTE and not tool.support.downgraded
    stored_line = corpus.by_id(tool.source_id).lines[(tool.support.line_start or 0) - 1]
    escaped = '\\"layer_id\\": \\"MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual\\"'
    assert escaped in stored_line and TOOL_QUOTE not in stored_line  # JSON-in-JSON: verified via Normalise
    reply_ = next(s for s in result.sources if s.layer == Layer.HISTORY and s.support and s.support.quote)
    assert reply_.support is not None and reply_.support.quote == HISTORY_QUOTE
    assert reply_.support.line_start == 1  # the message's own first line, not our header above it
    instructions = result.source(corpus.in_layer(Layer.INSTRUCTIONS)[0].id)
    assert instructions.support is not None and instructions.support.verdict == "silent"
    assert {tool.diagnosis, reply_.diagnosis} == {"grounded in your data"}
    # The paper stops here (§8.2: round 2 skipped, "the quotes are the answer"), at 5 + 8 = 13 calls of a
    # 31-call plan. This project asks the complementary question the paper leaves open: each layer alone
    # (3 calls; the tools and history layers carry it, instructions does not), then each source of those
    # layers alone (5 tools + 2 history = 7 calls): 13 + 10 = 23 calls of a 39-call plan.
    assert [(x.layer, x.role) for x in result.layers] == [
        (Layer.TOOLS, "redundant"),
        (Layer.INSTRUCTIONS, "irrelevant"),
        (Layer.HISTORY, "redundant"),
    ]
    assert tool.role == "redundant" and tool.alone == 9.0 and reply_.role == "redundant"
    assert result.calls.made == 5 + len(corpus) + 3 + 7 == 23 and result.calls.planned == 39
    assert result.calls.refused == 0
    assert not any("model knew it" in (s.diagnosis or "") for s in result.sources)


@pytest.mark.parametrize("digit", ["1", "5", "9"])
async def test_8_3_the_acronym_is_internal_knowledge(digit: str) -> None:
    turn, corpus = load("ndvi_parametric_turn.json")
    assert len(corpus) == 11 and corpus.layers_present() == (Layer.INSTRUCTIONS, Layer.HISTORY)
    result = await trace_claim(
        scripted(lambda s: digit, lambda p: reply("silent")), turn.response, turn.effective_query(), corpus
    )
    assert (result.gamma, result.verdict) == (0.0, "internal_knowledge")
    assert result.verdict_text == "model's own knowledge"
    assert [x.delta for x in result.layers] == [0.0, 0.0]
    assert result.diagnosis == "unverifiable model knowledge" and result.round2_skipped_reason
    # §8.3: "(2+2) + (11+2) + 2 × 11 = 39 — exactly the figure the cost gate reported". The gate here adds
    # the redundancy resolution that fits under MAX_CALLS (9 of 11 sources): 48. This claim needs none.
    plan = plan_calls(corpus)
    assert plan.round1 + plan.round2 + plan.spans == 39 and plan.redundancy == 9
    assert result.calls.planned == plan.total == 48 and result.calls.made == 4 + 11
    assert result.calls.refused == 0
