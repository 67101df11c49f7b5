"""The free tier's rule cue (``estimator/free_tier/restates.py``): a sentence with no anchor that restates a rule of
the instructions is offered for tracing, with the reason naming the rule; requests, reports and list items of what
the agent asks for are not. Its two constants were measured on the dev split of ``tests/data/gating/rules.jsonl``
(``bench/free_tier.py`` prints the sweep); the figures here are what it does on that set."""

from __future__ import annotations

import hashlib
import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.free_tier.gating import GateClass, GateReport, GateStatus, SegmentGate, gate_turn
from estimator.free_tier.restates import (
    MIN_IN_STATEMENT,
    MIN_SHARED,
    THRESHOLD,
    RuleIndex,
    content_words,
    is_statement,
)
from estimator.free_tier.segment import segment_response

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "gating"
sys.path.insert(0, str(ROOT / "bench"))
from tau_turns import tau_turns  # noqa: E402  (the importer the benchmarks use)

POLICY = """# Travel Agent Policy

You help travellers book and change their trips.

## Insurance
- The travel insurance covers cancellations only for health or weather reasons.
- Insurance cannot be added after the initial booking.

## Refunds
- A full refund is available only within the 24-hour window after booking.
- Refunds go back to the original payment method within 5 to 7 business days.

## Loyalty
- Gold members are eligible for compensation when their flight is delayed.
- Never offer compensation unless the traveller asks for it.
"""
RESOLVED = (GateStatus.TRACEABLE, GateStatus.QUOTED, GateStatus.ACTION)


def corpus_of(prompt: str = POLICY) -> Corpus:
    return build_corpus(StoredTurn.model_validate({"turn_id": "t", "response": "-", "system_prompt": prompt}))


def gate(sentence: str, corpus: Corpus | None = None) -> SegmentGate:
    (segment,) = segment_response(sentence)
    return gate_turn(corpus or corpus_of(), [segment]).segments[0]


@pytest.mark.parametrize(
    ("sentence", "section"),
    [
        ("The travel insurance only covers cancellations for health or weather reasons.", '"Insurance"'),
        ("A full refund is not available beyond the 24-hour window.", '"Refunds"'),
        ("As a Gold member you may be eligible for compensation.", '"Loyalty"'),  # an offer's words, a rule's content
    ],
)
def test_a_sentence_that_restates_a_rule_is_offered_naming_the_rule(sentence: str, section: str) -> None:
    corpus = corpus_of()
    found = gate(sentence, corpus)
    assert (found.status, found.klass) == (GateStatus.TRACEABLE, GateClass.RULE_RESTATEMENT)  # no strong anchor
    (cite,) = found.citations
    rule = corpus.by_id(cite.source_id)
    assert section in rule.label and cite.line_start == cite.line_end and cite.quote is None
    assert found.reason == f"restates an instruction rule ({rule.id} {rule.label}, line {cite.line_start})"
    assert len(content_words(sentence) & content_words(rule.text)) >= MIN_SHARED
    assert len(content_words(sentence) & content_words(rule.lines[cite.line_start - 1])) >= MIN_IN_STATEMENT
    without = gate_turn(corpus, segment_response(sentence), rule_cue=False).segments[0]
    assert without.status in (GateStatus.UNANCHORED, GateStatus.AGENT_VOICE) and without.reason is None


@pytest.mark.parametrize(
    "sentence",
    [
        "To proceed with a full refund within the 24-hour window, I need the booking reference.",  # a request
        "Please confirm that the travel insurance should cover the weather cancellation.",
        "The refund has been sent back to your original payment method.",  # a report of what was done
        "It seems the travel insurance covers health reasons for this booking.",  # what the data seems to say
        "2. The original payment method and the refund window.",  # an item of a list of what is asked
        "Is the travel insurance valid for health or weather cancellations?",  # a question
        "The weather can be lovely for a trip.",  # shares too little with any rule
    ],
)
def test_requests_reports_list_items_questions_and_loose_overlaps_are_not_offered(sentence: str) -> None:
    found = gate(sentence)
    assert found.klass != GateClass.RULE_RESTATEMENT and found.reason is None


def test_the_cue_needs_enough_shared_content_words_and_a_statement() -> None:
    index = RuleIndex.of(corpus_of())
    weak = "Lovely weather for a trip."
    assert index.restated(weak) is None and all(len(m.shared) < MIN_SHARED for m in index.matches(weak))
    assert not is_statement("Let me check the insurance rules for weather cancellations.")
    assert is_statement("Insurance cannot be added after the initial booking.")
    # a limit in the first person is a rule, not an offer
    assert is_statement("Unfortunately, I can only assist with adding checked bags, not removing them.")
    assert is_statement("I cannot assist with removing a passenger from an existing reservation.")
    assert RuleIndex(()).restated("Insurance cannot be added after the initial booking.") is None  # no rules


@pytest.mark.parametrize(
    "sentence",
    [
        "I can help you with a full refund within the 24-hour window after booking.",  # an offer
        "We can handle the refund to the original payment method within 5 to 7 business days.",
        "I recommend the travel insurance, which covers cancellations for health or weather reasons.",  # advice
        "Hello, and welcome: the travel insurance covers cancellations for health or weather reasons.",  # greeting
        "I cannot proceed with a full refund within the 24-hour window without the booking reference.",  # request
        "Here's the refund window: a full refund is available within 24 hours after booking.",
        "### Travel insurance covers cancellations for health or weather reasons",  # a heading of the reply
        "2. **Keep the insurance**: it will cover cancellations for health or weather reasons.",  # a listed option
    ],
)
def test_offers_advice_greetings_headings_and_listed_options_are_not_statements(sentence: str) -> None:
    index = RuleIndex.of(corpus_of())
    (words_alone,) = index.rules(sentence, MIN_SHARED)[:1]  # its words alone would clear the bar ...
    assert words_alone.score >= THRESHOLD
    assert not is_statement(sentence) and index.restated(sentence) is None  # ... but it restates nothing
    assert gate(sentence).klass != GateClass.RULE_RESTATEMENT


def test_numbers_are_content_words_and_a_list_items_own_number_is_not() -> None:
    assert {"24", "hour", "windo"} <= content_words("A full refund is not available beyond the 24-hour window.")
    assert {"24", "hour"} <= content_words("- All reservations can be cancelled within 24 hours of booking.")
    assert "3" not in content_words("3. **MasterCard**: the remaining balance is charged to it.")
    assert "3" in content_words("You can use up to 3 gift cards.")


SPREAD = """# Airline policy

## Cancellation
- Reservations can be cancelled within 24 hours of booking.
- The refund goes to the original payment method.

## Booking
- Travel insurance enables a full refund for health reasons.
- Seats are assigned at check-in.
"""


def test_a_rule_is_read_whole_and_the_statement_named_is_the_one_carrying_most_of_the_sentence() -> None:
    corpus = corpus_of(SPREAD)
    index = RuleIndex.of(corpus)
    sentence = "A full refund is not available beyond the 24-hour window."
    assert all(len(m.shared) < MIN_SHARED for m in index.matches(sentence))  # no one statement carries 3 words
    found = index.restated(sentence)
    assert found is not None and found.shared == ("24", "hour", "refun")  # "refund" from the other item
    rule = corpus.by_id(found.source_id)
    assert '"Cancellation"' in rule.label and "24 hours" in rule.lines[found.line - 1]
    assert gate(sentence, corpus).reason == found.reason
    # three words of one rule, but no two of them in one statement: not a restatement of it
    scattered = "Booking seats with insurance."
    assert index.rules(scattered) == [] and index.restated(scattered) is None
    assert index.rules(scattered, in_statement=1)[0].shared == ("booki", "insur", "seat")


TWO_RULES = """# Airline policy

## Booking
- Payment: the original payment method is kept for the booking.
- Refund requests take seven days.
- Cancellation fees apply to changes.

## Cancellation
- After a cancellation, the refund goes to the original payment method.
"""


def test_of_two_rules_that_clear_the_bar_the_one_saying_it_in_one_statement_is_named() -> None:
    corpus = corpus_of(TWO_RULES)
    index = RuleIndex.of(corpus)
    sentence = "After a cancellation, the refund goes to the original payment method within seven days."
    scattered, whole = index.rules(sentence, MIN_SHARED)  # best first by the share of the whole rule
    assert scattered.score > whole.score >= THRESHOLD and whole.line_score > scattered.line_score
    assert '"Booking"' in scattered.label and '"Cancellation"' in whole.label
    assert index.restated(sentence) == whole


# ---- the labelled set ---------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def rows() -> tuple[dict[str, Any], ...]:
    lines = (DATA / "rules.jsonl").read_text(encoding="utf-8").splitlines()
    return tuple(json.loads(line) for line in lines if line.strip())


@lru_cache(maxsize=1)
def turns_by_id() -> dict[str, StoredTurn]:
    return {t.turn_id: t for t in tau_turns(ROOT / "tests" / "data" / "tau-bench" / "airline-gpt-4o-dev.json")}


def _turn(source: str) -> StoredTurn:
    name, _, rest = source.rpartition(" ")
    if name.startswith("fixtures/"):
        return StoredTurn.model_validate_json((ROOT / name).read_text(encoding="utf-8"))
    return turns_by_id()[rest]


def test_the_rule_set_extends_the_labelled_set_with_a_fixed_split() -> None:
    data = rows()
    labelled = [json.loads(line) for line in (DATA / "labelled.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(set(r) == {"text", "restates", "source", "split"} for r in data)
    assert [r["text"] for r in data[: len(labelled)]] == [r["text"] for r in labelled]
    assert len(data) == len(labelled) + 300 and len({r["text"] for r in data}) == len(data)
    for r in data:
        held = hashlib.sha256(r["text"].encode()).hexdigest()[0] in "01234"
        assert r["split"] == ("held_out" if held else "dev"), r["text"]
    assert sum(bool(r["restates"]) for r in data) >= 50
    assert "Restates a rule" in (DATA / "GUIDE.md").read_text(encoding="utf-8")


@lru_cache(maxsize=2)
def gates(rule_cue: bool) -> tuple[SegmentGate, ...]:
    reports: dict[str, GateReport] = {}
    out = []
    for r in rows():
        turn = _turn(r["source"])
        if turn.turn_id not in reports:
            reports[turn.turn_id] = gate_turn(build_corpus(turn), segment_response(turn.response), rule_cue=rule_cue)
        out.append(next(g for g in reports[turn.turn_id].segments if g.segment.text == r["text"]))
    return tuple(out)


def figures(rule_cue: bool, split: str) -> tuple[int, int, int, int]:
    """(restating sentences, of them offered or resolved, offered by the cue, of those restating)."""
    pairs = [(r, g) for r, g in zip(rows(), gates(rule_cue), strict=True) if r["split"] == split]
    restating = [g for r, g in pairs if r["restates"]]
    cue = [r for r, g in pairs if g.klass == GateClass.RULE_RESTATEMENT]
    return len(restating), sum(g.status in RESOLVED for g in restating), len(cue), sum(bool(r["restates"]) for r in cue)


def test_on_the_dev_split_the_cue_lifts_recall_at_the_measured_precision() -> None:
    # bench/free_tier.py: best F1 on dev (3 and 4 words tie: the fewer), the highest threshold at it
    assert (MIN_SHARED, MIN_IN_STATEMENT, THRESHOLD) == (3, 2, 0.20)
    assert figures(False, "dev") == (40, 25, 0, 0)
    assert figures(True, "dev") == (40, 39, 15, 14)  # recall 0.62 → 0.97, cue precision 0.93 (was 0.81)


def test_on_the_held_out_split_it_does_what_bench_readme_reports() -> None:
    assert figures(False, "held_out") == (17, 10, 0, 0)
    assert figures(True, "held_out") == (17, 14, 6, 4)  # recall 0.59 → 0.82, cue precision 0.67 (was 0.50)
