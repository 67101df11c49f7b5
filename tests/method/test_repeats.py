"""``repeats``: each mask measured k times by a noisy judge, the median used as its score and the samples kept.

The judge here is a plain function that answers the same prompt differently from one call to the next (a fixed
wobble around the mask's level), so the expected medians and spreads are worked out by hand below, never read
from the code under test."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import anyio
import pytest

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus, Layer
from estimator.cost import plan_calls, quote_cost
from estimator.judge import Mask
from estimator.ledger import CallLedger
from estimator.loo.judged import trace_claim
from estimator.loo.logprob_cost import ScoringCapability, quote_scoring
from estimator.loo.measure import JudgedDigit, Measured, measure_repeated
from estimator.loo.rounds import windowed_texts
from estimator.params import DEFAULT_PARAMS, Params
from estimator.proxy.confirm import DEFAULT_PROXY_PARAMS, Seeded
from estimator.proxy.cost import quote_proxy
from estimator.proxy.driver import confirm_judge_calls, planned_proxy_calls
from estimator.results.models import sampling_note, trace_job_result
from estimator.seams.llm import LLMError, LLMRequest, ScriptedLLM
from estimator.tokens import ApproxTokenizer
from estimator.trace import planned_calls, run_trace

CLAIM = "Order A-1 shipped on 2025-03-03 with DHL."
QUERY = "Where is my order A-1?"
GROUND = "shipped 2025-03-03 with carrier DHL"
SILENT = '{"verdict": "silent", "evidence_quote": "", "confidence": 0.6, "reason": "not about this"}'
STORED = Path(__file__).resolve().parents[1] / "data" / "stored" / "trace_results_before_union.json"

# One prompt asked three times: 9, 6, 8 with the grounding return shown (median 8, spread 6–9), and 2, 5, 3
# without it (median 3, spread 2–5).
WITH = (9, 6, 8)
WITHOUT = (2, 5, 3)


def corpus() -> Corpus:
    """s0 a tool return that says something else, s1 the tool return that grounds the claim, s2 instructions."""
    turn = StoredTurn.model_validate(
        {
            "turn_id": "t-repeats",
            "query": QUERY,
            "response": CLAIM,
            "system_prompt": "You are a support agent.",
            "system_prompt_versioned": True,
            "response_payload": {
                "tool_calls": [
                    {"name": "weather", "arguments": {"city": "Oslo"}, "response": "Oslo: rain, 8 degrees."},
                    {"name": "lookup_order", "arguments": {"order_id": "A-1"}, "response": f"Order A-1 {GROUND}."},
                ]
            },
        }
    )
    return build_corpus(turn, DEFAULT_PARAMS)


class NoisyJudge:
    """The judge's digit for a prompt is the next of ``WITH`` (the grounding return shown) or ``WITHOUT``, by how
    many times that very prompt was asked before; ``fail`` (call number of a prompt → True) makes a call fail."""

    def __init__(self, fail: Any = None) -> None:
        self.asked: Counter[str] = Counter()
        self.samples: defaultdict[str, set[int]] = defaultdict(set)
        self.fail = fail or (lambda prompt, n: False)

    def __call__(self, request: LLMRequest) -> str:
        if request.purpose != "judge":
            return SILENT
        prompt = request.prompt_text
        n = self.asked[prompt]
        self.asked[prompt] += 1
        self.samples[prompt].add(request.sample)
        if self.fail(prompt, n):
            raise LLMError("the provider timed out")
        return str((WITH if GROUND in prompt else WITHOUT)[n % 3])


def params(k: int, **more: Any) -> Params:
    return DEFAULT_PARAMS.override({"repeats": k, **more})


def values(samples: tuple[float, ...]) -> list[float]:
    return sorted(x for x in samples if not math.isnan(x))


async def test_a_noisy_judge_read_three_times_gives_the_median_and_the_spread() -> None:
    judge = NoisyJudge()
    result = await trace_claim(ScriptedLLM(judge), CLAIM, QUERY, corpus(), params=params(3))
    assert result.repeats == 3 and result.params["repeats"] == 3
    assert (result.s_all, result.s_none, result.gamma) == (8.0, 3.0, 5.0)  # medians: 9,6,8 → 8 and 2,5,3 → 3
    assert result.s_all_spread is not None and result.s_none_spread is not None
    assert values(result.s_all_spread.samples) == [6.0, 8.0, 9.0]
    assert (result.s_all_spread.low, result.s_all_spread.high) == (6.0, 9.0)
    assert values(result.s_none_spread.samples) == [2.0, 3.0, 5.0]
    tools = result.layer(Layer.TOOLS)
    assert (tools.s_without, tools.delta, tools.role) == (3.0, 5.0, "grounds")
    assert tools.spread is not None and (tools.spread.low, tools.spread.high) == (2.0, 5.0)
    grounding = result.source("s1")
    assert (grounding.s_without, grounding.delta, grounding.role) == (3.0, 5.0, "grounds")
    assert grounding.spread is not None and values(grounding.spread.samples) == [2.0, 3.0, 5.0]
    other = result.source("s0")
    assert other.delta == 0.0 and other.spread is not None and values(other.spread.samples) == [6.0, 8.0, 9.0]
    # every prompt asked exactly three times, as samples 0, 1 and 2; a mask asked twice (round 2's s(1)) is
    # answered from the memo with the same three samples, never three new ones
    assert set(judge.asked.values()) == {3} and all(s == {0, 1, 2} for s in judge.samples.values())
    assert result.calls.saved >= 1
    assert result.calls.made == 3 * len(judge.asked) + sum(1 for s in result.sources if s.support is not None)
    shown = result.to_dict()
    assert shown["s_all_spread"]["low"] == 6.0 and shown["sources"][1]["spread"]["high"] == 5.0
    assert shown["sampling"] == sampling_note(3) and "3 times" in shown["sampling"]


async def test_one_sample_gives_no_spread_and_says_the_spread_is_unknown() -> None:
    judge = NoisyJudge()
    result = await trace_claim(ScriptedLLM(judge), CLAIM, QUERY, corpus())
    assert (result.s_all, result.s_none) == (9.0, 2.0)  # the first answer of each prompt
    assert set(judge.asked.values()) == {1} and all(s == {0} for s in judge.samples.values())
    assert result.repeats == 1 and result.params["repeats"] == 1
    assert result.s_all_spread is None and result.s_none_spread is None
    assert all(x.spread is None for x in result.layers) and all(s.spread is None for s in result.sources)
    shown = result.to_dict()
    assert "s_all_spread" not in shown and all("spread" not in s for s in shown["sources"] + shown["layers"])
    assert "single sample" in shown["sampling"] and "repeats=1" in shown["sampling"]
    assert "unknown" in shown["sampling"] and "--repeats k" in shown["sampling"]


@pytest.mark.parametrize("k", [2, 3, 5])
def test_the_quote_counts_every_sample_exactly_as_the_trace_then_makes_them(k: int) -> None:
    c = corpus()
    one, many = quote_cost(c, CLAIM, model="m"), quote_cost(c, CLAIM, model="m", params=params(k))
    assert (many.calls.round1, many.calls.round2, many.calls.redundancy) == (
        k * one.calls.round1,
        k * one.calls.round2,
        k * one.calls.redundancy,
    )
    assert many.calls.spans == one.calls.spans  # span checks are not repeated
    assert many.planned_calls == one.planned_calls + (k - 1) * one.calls.ablation
    assert many.input_tokens - one.input_tokens == (k - 1) * one.calls.ablation * many.judge_call_tokens
    assert many.to_dict()["calls"]["repeats"] == k and "repeats" not in one.to_dict()["calls"]
    assert planned_calls("judged", c, params(k)) == many.planned_calls
    assert planned_calls("both", c, params(k)) == many.planned_calls + many.calls.ablation
    scoring = ScoringCapability(True, "in-process", "a local model")
    assert quote_scoring(c, CLAIM, scoring, params=params(k)).scoring_calls == k * one.calls.ablation

    def judge_calls(repeats: int) -> tuple[int, int, int]:
        llm = ScriptedLLM(NoisyJudge())
        outcome = anyio.run(lambda: run_trace("judged", CLAIM, QUERY, c, llm=llm, params=params(repeats)))
        judged = sum(1 for r in llm.calls if r.purpose == "judge")
        return judged, len(llm.calls) - judged, outcome.result.calls.planned

    judged_1, spans_1, _ = judge_calls(1)
    judged_k, spans_k, planned_k = judge_calls(k)
    assert judged_k == k * judged_1 and spans_k == spans_1
    assert judged_k + spans_k <= planned_k == many.planned_calls


def test_the_proxy_quote_prices_every_sample_of_the_judge() -> None:
    c = corpus()
    capability = ScoringCapability(True, "in-process", "a local model")
    one = quote_proxy(c, CLAIM, capability, quote_cost(c, CLAIM, model="m"))
    three = quote_proxy(c, CLAIM, capability, quote_cost(c, CLAIM, model="m", params=params(3)), params=params(3))
    spans = 2 * DEFAULT_PROXY_PARAMS.span_sources
    assert (one.confirm_calls, three.confirm_calls) == (
        confirm_judge_calls(c) + spans,
        3 * confirm_judge_calls(c) + spans,
    )
    assert three.worst_case_calls == planned_proxy_calls(c, params(3)) == plan_calls(c, params(3)).total + 3
    assert three.local_passes == 3 * one.local_passes


def test_the_ledger_refuses_every_call_beyond_the_plan() -> None:
    c = corpus()
    single = plan_calls(c).total
    ledger = CallLedger(planned=single, concurrency=4)  # a plan for one sample, a trace that takes three
    result = anyio.run(lambda: trace_claim(ScriptedLLM(NoisyJudge()), CLAIM, QUERY, c, params=params(3), ledger=ledger))
    assert result.calls.made == single and result.calls.refused > 0
    assert f"{result.calls.refused} call(s) refused: the plan of {single} calls was reached." in result.warnings
    # the ceiling is MAX_CALLS per sample: nine samples of a trace that fits once are priced, not refused
    nine = quote_cost(c, CLAIM, model="m", params=params(9))
    assert nine.planned_calls > DEFAULT_PARAMS.max_calls and nine.refused is None
    # and the cost gate refuses a trace whose samples pass k × MAX_CALLS, naming repeats
    over = quote_cost(c, CLAIM, model="m", params=params(9, max_calls=8))
    assert over.planned_calls > 9 * 8
    assert over.refused is not None and "repeats=9" in over.refused and "MAX_CALLS ceiling of 72" in over.refused


def test_redundancy_resolution_is_cut_to_what_fits_when_samples_fill_the_plan() -> None:
    c = corpus()
    # two layers (round 1: 4 masks), three sources (round 2: 5 masks; redundancy: 3), six span checks
    base = plan_calls(c, params(3, max_calls=100))
    assert base.redundancy == 3 and base.total == 3 * (4 + 5 + 3) + 6 == 42  # all of it fits
    # a ceiling of 3 × 12 = 36 calls, 33 without redundancy: room for one source kept alone (3 calls)
    tight = plan_calls(c, params(3, max_calls=12))
    assert (tight.redundancy, tight.total) == (1, 36)
    assert tight.redundancy_note is not None and "1 of 3 sources" in tight.redundancy_note


async def test_a_sample_without_information_is_left_out_of_the_median_and_shown_in_the_spread() -> None:
    def fail(prompt: str, n: int) -> bool:
        no_sources = GROUND not in prompt and "Oslo" not in prompt and "support agent" not in prompt
        return no_sources or n == 1  # s(0) fails every time; every other prompt fails its second call

    result = await trace_claim(ScriptedLLM(NoisyJudge(fail)), CLAIM, QUERY, corpus(), params=params(3))
    assert result.s_all == 8.5  # 9 and 8 (the 6 failed): the median of two is their mean
    assert result.s_all_spread is not None and values(result.s_all_spread.samples) == [8.0, 9.0]
    assert sum(1 for x in result.s_all_spread.samples if math.isnan(x)) == 1
    assert result.to_dict()["s_all_spread"]["samples"].count(None) == 1
    assert math.isnan(result.s_none) and math.isnan(result.gamma)  # no sample of s(0) gave information
    assert result.s_none_spread is not None and math.isnan(result.s_none_spread.low)
    assert any("(each of its 3 samples)" in w and "with no sources" in w for w in result.warnings)


async def test_answers_reused_from_an_earlier_measurement_give_back_its_samples_not_one_value_k_times() -> None:
    c = corpus()
    llm = ScriptedLLM(NoisyJudge())
    ledger = CallLedger(planned=0, concurrency=2)
    texts, _ = windowed_texts(c, DEFAULT_PARAMS, ApproxTokenizer())
    mask: Mask = frozenset({"s1"})
    known = Measured(3.0, None, (Measured(2.0), Measured(math.nan, "the call failed"), Measured(5.0)))
    seeded = Seeded(JudgedDigit(llm, ledger, CLAIM, QUERY, c, texts), {mask: known})
    again = await measure_repeated(seeded, mask, 3)
    assert [m.value for m in again.samples][::2] == [2.0, 5.0] and math.isnan(again.samples[1].value)
    assert again.value == 3.5 and (ledger.saved, ledger.made, len(llm.calls)) == (1, 0, 0)


def test_params_and_results_stored_before_repeats_existed_still_load() -> None:
    old = {k: v for k, v in DEFAULT_PARAMS.model_dump().items() if k != "repeats"}
    assert Params.stored(old).repeats == 1
    assert Params.stored({**old, "repeats": 4}).repeats == 4
    with pytest.raises(ValueError):
        params(0)
    with pytest.raises(ValueError):
        params(10)
    row = json.loads(STORED.read_text(encoding="utf-8"))["judged"]
    assert "repeats" not in row and "sampling" not in row
    loaded = trace_job_result(row)
    assert loaded.repeats is None and loaded.sampling is None and loaded.s_all_spread is None
    dumped = loaded.model_dump(mode="json")
    assert not {"repeats", "sampling", "s_all_spread", "s_none_spread"} & set(dumped)
    assert all("spread" not in s for s in dumped["sources"])
