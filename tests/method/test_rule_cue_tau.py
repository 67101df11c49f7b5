"""The rule cue on the real τ-bench airline policy (issue 28): a sentence that restates a rule of the policy with no
anchor is offered for tracing, its reason naming the policy statement it restates — also when the policy says the
rule over two of its items ("24 hours" in one, "refund" in another) — while a request, a report of what was done
and a greeting that use the rule's words are not. Each sentence is added as an answer sentence to a stored
τ-bench reply and the whole turn goes through the free tier (corpus, segmenter, gate)."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import pytest

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.free_tier.gating import GateClass, GateStatus, SegmentGate, gate_turn
from estimator.free_tier.restates import MIN_SHARED, THRESHOLD, RuleIndex
from estimator.free_tier.segment import segment_response

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from tau_turns import tau_turns  # noqa: E402  (the importer the benchmarks use)

CANCELLATION = "tau-18-t0-c18-m8"  # a basic economy booking past 24 hours, no insurance: not cancelled
COMPENSATION = "tau-16-t0-c16-m8"  # compensation for a delayed flight
INSURANCE = "tau-1-t0-c1-m6"  # a traveller with travel insurance who is unwell


@lru_cache(maxsize=1)
def turns() -> dict[str, StoredTurn]:
    return {t.turn_id: t for t in tau_turns(ROOT / "tests" / "data" / "tau-bench" / "airline-gpt-4o-dev.json")}


def answered(turn_id: str, sentence: str) -> tuple[Corpus, SegmentGate]:
    """The turn's stored reply with ``sentence`` added as its last paragraph, through the free tier; the gate of
    that sentence."""
    turn = turns()[turn_id]
    response = f"{turn.response.rstrip()}\n\n{sentence}"
    corpus = build_corpus(turn.model_copy(update={"response": response}))
    (found,) = [g for g in gate_turn(corpus, segment_response(response)).segments if g.segment.text == sentence]
    return corpus, found


@pytest.mark.parametrize(
    ("turn_id", "sentence", "section", "statement"),
    [
        (
            INSURANCE,
            "The travel insurance only covers cancellations for health or weather reasons.",
            '"Book flight"',
            "enables full refund if the user needs to cancel the flight given health or weather reasons",
        ),
        (
            CANCELLATION,
            "A full refund is not available beyond the 24-hour window.",
            '"Cancel flight"',
            "All reservations can be cancelled within 24 hours of booking",
        ),
        (
            COMPENSATION,
            "As a Gold member you may be eligible for compensation.",
            '"Refund"',
            "explicitly asks for some compensation",
        ),
    ],
)
def test_the_issues_sentences_are_offered_naming_the_policy_statement_they_restate(
    turn_id: str, sentence: str, section: str, statement: str
) -> None:
    corpus, found = answered(turn_id, sentence)
    assert (found.status, found.klass) == (GateStatus.TRACEABLE, GateClass.RULE_RESTATEMENT)
    (cite,) = found.citations
    rule = corpus.by_id(cite.source_id)
    assert rule.layer.value == "instructions" and section in rule.label
    assert cite.line_start == cite.line_end and statement in rule.lines[cite.line_start - 1]
    assert found.reason == f"restates an instruction rule ({rule.id} {rule.label}, line {cite.line_start})"


@pytest.mark.parametrize(
    "sentence",
    [
        "Please provide the reason for cancellation: change of plan, airline cancelled flight, or other reasons.",
        "To cancel within the 24-hour window for a full refund, I'll need your reservation ID.",  # a request
        "Your reservation has been cancelled and the refund will go to your original payment method.",  # done
        "Hi there, welcome to the airline desk for booking, modifying or cancelling flight reservations.",  # hello
    ],
)
def test_requests_reports_and_greetings_in_the_policys_words_are_not_offered(sentence: str) -> None:
    corpus, found = answered(CANCELLATION, sentence)
    (words_alone,) = RuleIndex.of(corpus).rules(sentence, MIN_SHARED)[:1]
    assert words_alone.score >= THRESHOLD  # its words alone would clear the bar: the sentence's form keeps it out
    assert found.klass != GateClass.RULE_RESTATEMENT and found.reason is None
    assert found.status in (GateStatus.UNANCHORED, GateStatus.AGENT_VOICE)
