"""Every word of a result agrees with its numbers, whatever the judge answers.

Property tests: for every estimator × kind of judge (random, noisy, adversarial, constant:
``support/noisy_judges.py``) hypothesis draws 8 examples (a fixture turn, one of its sentences, a seed), drives
the real driver through ``run_trace`` and asserts every rule of ``estimator.audit.invariants`` on each result:
160 traces, 192 results (``both`` returns two). Then the rules
themselves are shown to bite: results with one word changed break the rule that guards it.
"""

from __future__ import annotations

import logging
import math
from functools import cache
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.noisy_judges import KINDS, judges
from support.trace_records import succeeded_trace

from estimator.audit.invariants import violations
from estimator.corpus.units import Corpus, Layer
from estimator.loo.coherence import HEDGE
from estimator.results.models import DisagreementModel, TraceResultModel
from estimator.seams.llm import LLMRequest, ScriptedLLM
from estimator.seams.scorer import ScriptedScorer
from estimator.trace import ESTIMATORS, EstimatorChoice, checked, run_trace
from provenance_api.importers.turn_files import load_turn_file
from provenance_api.providers.free_tier import gate_view, tokenizer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TURNS = ("redundant_sources_turn.json", "eo_worldview_turn.json", "vendor_terms_turn.json", "failures_turn.json")


@cache
def claims(name: str) -> tuple[str, Corpus, tuple[str, ...]]:
    turn = load_turn_file(FIXTURES / name)
    view = gate_view(turn)
    traceable = tuple(s.text for s in view.segments if s.text.strip())
    return turn.effective_query(), view.corpus, traceable[:6]


def trace(choice: EstimatorChoice, kind: str, seed: int, name: str, index: int) -> list[TraceResultModel]:
    query, corpus, sentences = claims(name)
    claim = sentences[index % len(sentences)]
    judge = judges(kind, seed, claim)
    outcome = anyio.run(
        lambda: run_trace(
            choice,
            claim,
            query,
            corpus,
            llm=ScriptedLLM(judge.chat),
            scorer=ScriptedScorer(judge.score),
            tokenizer=tokenizer(),
        )
    )
    return [r for r in (outcome.result, outcome.logprob) if r is not None]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("choice", ESTIMATORS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(TURNS), index=st.integers(0, 5))
def test_every_result_keeps_every_rule_whatever_the_judge_answers(
    choice: EstimatorChoice, kind: str, seed: int, name: str, index: int
) -> None:
    results = trace(choice, kind, seed, name, index)
    assert len(results) == (2 if choice == "both" else 1)
    for result in results:
        broken = violations(result)
        assert not broken, "\n".join(map(str, broken))


def test_a_part_that_matters_more_than_the_whole_is_a_disagreement_and_no_verdict_is_stated() -> None:
    """Γ small (internal knowledge by Γ alone) while removing the tools layer drops the score by far more:
    the verdict is downgraded to no information, its text hedged, and the numbers are given."""
    query, corpus, sentences = claims("redundant_sources_turn.json")
    tools = {u.id for u in corpus.in_layer(Layer.TOOLS)}

    def chat(request: LLMRequest) -> str:
        if request.purpose != "judge":
            return '{"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"}'
        text = request.messages[-1].content
        shown = {sid for sid in tools if f"[{sid}]" in text}
        if not any(f"[s{i}]" in text for i in range(20)):
            return "7"  # with no sources at all: Γ = 0, the model's own knowledge by Γ alone
        return "2" if not shown else "7"  # without the tools layer, 2; with it, 7

    outcome = anyio.run(
        lambda: run_trace("judged", sentences[0], query, corpus, llm=ScriptedLLM(chat), tokenizer=tokenizer())
    )
    result = outcome.result
    assert result.gamma == 0.0 and result.layer(Layer.TOOLS).delta == 5.0
    assert result.verdict == "no_information" and result.verdict_text.endswith(HEDGE)
    found = [d for d in result.disagreements if d.kind == "drop_exceeds_gamma" and d.subject == "tools"]
    assert found and found[0].values == {"delta": 5.0, "gamma": 0.0, "tau": 0.5}
    assert "Δ = 5.00" in found[0].text and "Γ = 0.00" in found[0].text
    assert not violations(result)
    assert all(s.diagnosis is None for s in result.sources)  # no "model knew it" under a disagreement


def coherent() -> TraceResultModel:
    query, corpus, sentences = claims("redundant_sources_turn.json")
    judge = judges("noisy", 7, sentences[0])
    return anyio.run(
        lambda: run_trace("judged", sentences[0], query, corpus, llm=ScriptedLLM(judge.chat), tokenizer=tokenizer())
    ).result


def test_each_rule_bites_on_a_result_with_one_word_changed() -> None:
    result = coherent()
    assert not violations(result)
    layer = result.layers[0]
    other = "grounds" if layer.role != "grounds" else "irrelevant"
    cases = {
        1: result.model_copy(update={"verdict_text": "attributed"})
        if result.verdict != "attributed"
        else result.model_copy(update={"verdict_text": "carried by several sources"}),
        4: result.model_copy(update={"layers": (layer.model_copy(update={"role": other}), *result.layers[1:])}),
        9: result.model_copy(
            update={
                "disagreements": (
                    DisagreementModel(
                        kind="drop_exceeds_gamma", subject="s0", values={"delta": 0.0, "gamma": 9.0}, text="x"
                    ),
                ),
                "verdict_text": f"{result.verdict_text} — {HEDGE}",
            }
        ),
    }
    for rule, broken in cases.items():
        assert rule in {v.rule for v in violations(broken)}, rule


def test_a_violation_at_run_time_is_logged_and_the_result_kept(caplog: pytest.LogCaptureFixture) -> None:
    from estimator.trace import TraceOutcome

    result = coherent()
    broken = result.model_copy(update={"verdict_text": "nonsense"})
    with caplog.at_level(logging.ERROR, logger="estimator.invariants"):
        out = checked(TraceOutcome(broken))
    assert out.result is broken
    assert any("breaks an invariant" in r.getMessage() and "rule 1" in r.getMessage() for r in caplog.records)


def test_nan_scores_never_break_a_rule() -> None:
    """Every call failing is not a contradiction: every number unknown, verdict no information."""
    query, corpus, sentences = claims("eo_worldview_turn.json")
    outcome = anyio.run(
        lambda: run_trace(
            "judged", sentences[0], query, corpus, llm=ScriptedLLM(lambda r: "no digit"), tokenizer=tokenizer()
        )
    )
    assert math.isnan(outcome.result.gamma) and outcome.result.verdict == "no_information"
    assert not violations(outcome.result)


def test_the_markdown_citation_hedges_the_verdict_and_lists_each_disagreement() -> None:
    """The export says what the result says: the disagreement with its numbers, the verdict hedged."""
    from datetime import UTC, datetime

    from provenance_api.core.glossary import GLOSSARY
    from provenance_api.operations.citation_markdown import citation_markdown

    query, corpus, sentences = claims("redundant_sources_turn.json")
    tools = {u.id for u in corpus.in_layer(Layer.TOOLS)}

    def chat(request: LLMRequest) -> str:  # Γ = 0, yet removing the tools layer drops the score by 5
        if request.purpose != "judge":
            return '{"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"}'
        text = request.messages[-1].content
        if not any(f"[s{i}]" in text for i in range(20)):
            return "7"
        return "7" if {sid for sid in tools if f"[{sid}]" in text} else "2"

    result = anyio.run(
        lambda: run_trace("judged", sentences[0], query, corpus, llm=ScriptedLLM(chat), tokenizer=tokenizer())
    ).result
    assert result.disagreements and result.verdict_text.endswith(HEDGE) and not violations(result)
    at = datetime(2025, 3, 3, 12, 0, tzinfo=UTC)
    trace = succeeded_trace(result, turn_id="t", claim=sentences[0], at=at)
    md = citation_markdown(trace)
    hedge = GLOSSARY["disagreement"].label
    (verdict,) = [line for line in md.splitlines() if line.startswith("**Verdict:")]
    assert f"({hedge})" in verdict, verdict
    for d in result.disagreements:
        assert d.text in md.replace("\\", "")
