"""The probability-based estimator on planted-cause turns, driven by a scripted scorer."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence

import pytest
from test_attribution import CLAIM, QUERY, SILENT, make_corpus, script, standard_corpus

from estimator.audit.agreement import agreement, spearman, top_layer, top_source
from estimator.corpus.units import Layer
from estimator.cost import plan_calls
from estimator.fence import split_fenced
from estimator.loo.judged import trace_claim
from estimator.loo.logprob import INSTRUCTIONS_HEADING, LogprobParams, build_messages, thresholds, trace_logprob
from estimator.seams.llm import Message, ScriptedLLM
from estimator.seams.scorer import QWEN_TEMPLATE, ScoredTarget, Scorer, ScorerError, ScriptedScorer


def present(messages: Sequence[Message]) -> set[str]:
    """The source ids a scoring chat shows (the instructions' fenced block counts as "instructions" too)."""
    ids = set(re.findall(r"^\[(s\d+)\] ", messages[-1].content, flags=re.M))
    if messages[-1].content.startswith(INSTRUCTIONS_HEADING):
        ids.add("instructions")
    return ids


def planted(
    cause: str, *, effect: float = 40.0, noise: dict[str, float] | None = None, base: float = -70.0
) -> Callable[[Sequence[Message], str], float]:
    """log p(claim) = base + effect when ``cause`` is present, plus small per-source wiggles."""
    wiggle = noise or {}

    def score(messages: Sequence[Message], target: str) -> float:
        shown = present(messages)
        return base + (effect if cause in shown else 0.0) + sum(v for k, v in wiggle.items() if k in shown)

    return score


def silent_llm() -> ScriptedLLM:
    return ScriptedLLM(lambda r: SILENT)


async def test_the_planted_cause_dominates_and_is_the_top_source() -> None:
    corpus = standard_corpus()
    scorer = ScriptedScorer(planted("s1", noise={"s0": 3.0, "s2": -2.5, "s4": 1.2}))
    result = await trace_logprob(scorer, silent_llm(), CLAIM, QUERY, corpus)
    assert result.estimator == "logprob" and result.verdict == "attributed"
    assert result.gamma == pytest.approx(40.0 + 3.0 - 2.5 + 1.2)
    assert result.thresholds.tau_nats == pytest.approx(0.2 * result.gamma)
    assert top_layer(result) == "tools" and top_source(result) == "s1"
    s1 = result.source("s1")
    assert s1.role == "grounds" and s1.delta == pytest.approx(40.0)
    others = [s for s in result.sources if s.delta is not None and s.source_id != "s1"]
    assert others and all(s.role == "irrelevant" for s in others)  # 3 nats is below 0.2·Γ
    assert s1.delta is not None
    assert max(abs(s.delta or 0.0) for s in others) < s1.delta / 10


async def test_an_absolute_one_nat_threshold_would_have_called_noise_grounds() -> None:
    """The pilot's failure: a no-cause claim with drops of 0.6–0.9 against a total effect of 1.4–1.9."""
    corpus = standard_corpus()
    scorer = ScriptedScorer(planted("nothing", noise={"s1": 0.9, "instructions": 0.6, "s4": 0.2}))
    result = await trace_logprob(scorer, silent_llm(), CLAIM, QUERY, corpus)
    assert result.gamma == pytest.approx(1.7)
    assert result.verdict == "internal_knowledge"
    assert result.thresholds.tau_gamma_nats >= 2.0
    assert result.round2_skipped_reason is not None and "τ_Γ" in result.round2_skipped_reason
    assert all(layer.role == "irrelevant" for layer in result.layers)
    # The same drops under a fixed 1-nat τ (no relative part, no Γ floor) are read as a grounding layer.
    loose = LogprobParams(tau_rel=0.01, tau_floor=0.5, gamma_per_token=0.0, gamma_floor=0.5)
    naive = await trace_logprob(ScriptedScorer(scorer.script), silent_llm(), CLAIM, QUERY, corpus, lp=loose)
    assert naive.verdict == "attributed"


async def test_a_mandated_rule_is_found_in_the_instructions_layer() -> None:
    corpus = make_corpus(
        ["weather for Paris", "a bounding box"],
        system="Always end with: Not financial advice.",
        history=("hello", "hi"),
    )
    scorer = ScriptedScorer(planted("instructions", effect=25.0, noise={"s0": 0.4}))
    result = await trace_logprob(scorer, silent_llm(), "Not financial advice.", QUERY, corpus)
    assert result.verdict == "attributed"
    assert top_layer(result) == "instructions"
    instructions = next(u.id for u in corpus.units if u.layer == Layer.INSTRUCTIONS)
    assert top_source(result) == instructions


async def test_a_claim_carried_by_two_layers_is_redundant() -> None:
    corpus = standard_corpus()  # s1 tools, s4/s5 history

    def score(messages: Sequence[Message], target: str) -> float:
        shown = present(messages)
        return -50.0 + (30.0 if {"s1", "s5"} & shown else 0.0)

    result = await trace_logprob(ScriptedScorer(score), silent_llm(), CLAIM, QUERY, corpus)
    assert result.verdict == "redundant"
    assert result.contributing_layers == ()
    assert result.sources and all(s.delta is None for s in result.sources)  # span checks still ran
    assert all(s.support is not None for s in result.sources)


async def test_failed_scoring_calls_are_no_information_never_a_score() -> None:
    corpus = standard_corpus()

    def score(messages: Sequence[Message], target: str) -> float:
        if not present(messages):
            raise ScorerError("server went away")
        return -10.0

    result = await trace_logprob(ScriptedScorer(score), silent_llm(), CLAIM, QUERY, corpus)
    assert result.verdict == "no_information" and math.isnan(result.gamma)
    assert result.to_dict()["gamma"] is None
    assert any("with no sources" in w and "server went away" in w for w in result.warnings)
    assert result.calls.failed == 1


async def test_calls_stay_within_the_quoted_plan_and_repeats_are_not_paid_twice() -> None:
    corpus = standard_corpus()
    scorer = ScriptedScorer(planted("s1"))
    llm = silent_llm()
    result = await trace_logprob(scorer, llm, CLAIM, QUERY, corpus)
    plan = plan_calls(corpus)
    assert result.calls.made == len(scorer.calls) + len(llm.calls) <= plan.total
    assert result.calls.saved >= 1  # round 2's all-present mask is round 1's s(1)
    masks = [tuple(sorted(present(m))) for m, _ in scorer.calls]
    assert len(masks) == len(set(masks))
    assert all(target == CLAIM for _, target in scorer.calls)


async def test_span_checks_can_be_shared_with_a_judged_trace() -> None:
    corpus = standard_corpus()
    judged = await trace_claim(ScriptedLLM(script(lambda s: "9" if "s1" in s else "2")), CLAIM, QUERY, corpus)
    scorer = ScriptedScorer(planted("s1"))
    supports = {s.source_id: s.support for s in judged.sources if s.support is not None}
    result = await trace_logprob(scorer, None, CLAIM, QUERY, corpus, supports=supports)
    assert {s.source_id: s.support for s in result.sources} == supports
    agree = agreement(judged, result)
    assert agree.same_verdict and agree.same_top_layer and agree.same_top_source
    assert agree.spearman is not None and agree.spearman > 0
    assert set(agree.compared_sources) == {"s0", "s1", "s2"}


def test_build_messages_fences_the_instructions_and_shares_prefixes() -> None:
    corpus = standard_corpus()
    texts = {u.id: u.text for u in corpus.units}
    full = build_messages(corpus, QUERY, frozenset(), texts)
    assert [m.role for m in full] == ["system", "user"]
    assert "Answer briefly." not in full[0].content  # the agent's instructions are data, never the system role
    regions, outside = split_fenced(full[-1].content)
    assert full[-1].content.startswith("AGENT INSTRUCTIONS:\n\n") and "CONTEXT:" in outside and "QUESTION:" in outside
    heads = [r.strip("\n").split(" ", 1)[0] for r in regions]
    assert heads == ["[s3]", "[s0]", "[s1]", "[s2]", "[s4]", "[s5]", QUERY.split()[0]]
    assert "Answer briefly." in regions[0]
    without_last = build_messages(corpus, QUERY, frozenset({"s5"}), texts)
    assert without_last[0] == full[0]  # one system message for every mask of a trace
    common = 0
    a, b = full[-1].content, without_last[-1].content
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    assert "[s4]" in a[:common]  # everything before the removed source is shared
    nothing = build_messages(corpus, QUERY, frozenset(u.id for u in corpus.units), texts)
    assert [m.role for m in nothing] == ["system", "user"] and nothing[0] == full[0]
    assert [r.strip("\n") for r in split_fenced(nothing[-1].content)[0]] == [QUERY]
    # The template renders the project's system message, not the model's default one.
    prefix = QWEN_TEMPLATE.render_prefix(nothing)
    assert prefix.startswith("<|im_start|>system\nYou are the assistant of an agent")
    assert prefix.endswith("<|im_start|>assistant\n")


def test_thresholds_are_relative_to_the_total_effect_with_floors() -> None:
    assert thresholds(40.0, 12).tau == pytest.approx(8.0)
    assert thresholds(-40.0, 12).tau == pytest.approx(8.0)
    assert thresholds(2.0, 12).tau == pytest.approx(2.0)  # the floor (calibrated: 2 nats)
    assert thresholds(40.0, 4).tau_gamma == pytest.approx(3.0)  # the floor (calibrated: 3 nats)
    assert thresholds(40.0, 40).tau_gamma == pytest.approx(10.0)
    assert thresholds(math.nan, 10).tau == pytest.approx(2.0)


def test_spearman() -> None:
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 4], [1, 3, 3, 4]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [5, 5, 5]) is None
    assert spearman([1], [2]) is None
    with pytest.raises(ValueError):
        spearman([1, 2], [1])


async def test_result_json_names_the_estimator_and_units() -> None:
    corpus = standard_corpus()
    result = await trace_logprob(ScriptedScorer(planted("s1")), silent_llm(), CLAIM, QUERY, corpus)
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["estimator"] == "logprob" and data["units"] == "nats"
    assert data["thresholds"]["tau_nats"] == pytest.approx(8.0)
    assert data["params"]["logprob"]["tau_rel"] == 0.2
    judged = await trace_claim(ScriptedLLM(script(lambda s: "9" if "s1" in s else "2")), CLAIM, QUERY, corpus)
    assert judged.to_dict()["estimator"] == "judged"


def test_scripted_scorer_satisfies_the_protocol() -> None:
    scorer: Scorer = ScriptedScorer(lambda m, t: ScoredTarget.of([-1.0, -2.0], ["a", "b"]))
    assert isinstance(scorer, Scorer)
    assert ScoredTarget.of([-1.0, -2.0]).logprob_total == -3.0


async def test_an_unmeasured_layer_is_no_information_not_redundant() -> None:
    # A failed measurement of "without the tools layer" reads as a 0 drop. With no other layer
    # contributing, that must not be reported as "carried by several layers": it was never measured.
    def score(messages: Sequence[Message], target: str) -> float:
        shown = present(messages)
        if shown and not shown & {"s0", "s1", "s2"}:
            raise ScorerError("provider failed")
        return -70.0 + (40.0 if "s1" in shown else 0.0)

    result = await trace_logprob(ScriptedScorer(score), silent_llm(), CLAIM, QUERY, standard_corpus())
    tools = next(x for x in result.layers if x.layer == Layer.TOOLS)
    assert tools.no_information and tools.delta == 0.0
    assert result.gamma == pytest.approx(40.0)
    assert result.verdict == "no_information"


async def test_every_scoring_call_is_counted_by_the_one_ledger() -> None:
    corpus = standard_corpus()
    scorer = ScriptedScorer(planted("s1"))
    llm = silent_llm()
    result = await trace_logprob(scorer, llm, CLAIM, QUERY, corpus)
    assert scorer.calls and result.calls.made == len(scorer.calls) + len(llm.calls)
    assert result.calls.billed == result.calls.made and result.calls.refused == 0
    assert result.calls.planned == plan_calls(corpus).total
