"""Failed calls are evidence too (issue 29, item 4, the corpus): a failed or denied call's error text is a source of
what follows it — a tools-layer unit of kind ``tool_error`` in the turn, a ``tool error`` history item in later
turns — and ``Params(failed_calls_as_sources=False)`` is the seed's Algorithm 1, which excludes it.

The free tier (no model) shows it: "The 12:00 slot was already taken by another patient." is quoted from the error
text, and the next call's argument (12:30) is found in it. A scripted judge stands in for the model where a trace
runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from estimator.actions.report import screen_actions
from estimator.actions.targets import whole_history
from estimator.corpus.build import build_corpus, history_messages
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import TOOL_ERROR, Corpus, Layer
from estimator.cost import quote_cost
from estimator.free_tier.gating import GateStatus, gate_turn
from estimator.free_tier.segment import segment_response
from estimator.loo.judged import trace_claim
from estimator.params import DEFAULT_PARAMS, Params
from estimator.seams.llm import LLMRequest, ScriptedLLM

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SEED = Params(failed_calls_as_sources=False)
TAKEN = "Booking failed: the 12:00 slot was already taken by another patient. The next free slot is 12:30."
SENTENCE = "The 12:00 slot was already taken by another patient."
RESPONSE = f"{SENTENCE} I booked you at 12:30 with Dr. Rao instead."


def request(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "request", "parts": list(parts)}


def response(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "response", "parts": list(parts)}


def call(call_id: str, time: str) -> dict[str, Any]:
    return {"part_kind": "tool-call", "tool_name": "book_slot", "tool_call_id": call_id, "args": {"time": time}}


def returned(call_id: str, content: Any, outcome: str | None = None) -> dict[str, Any]:
    part = {"part_kind": "tool-return", "tool_name": "book_slot", "tool_call_id": call_id, "content": content}
    return {**part, "outcome": outcome} if outcome else part


def booking_turn(failure: dict[str, Any] | None = None) -> StoredTurn:
    """The agent asks for 12:00, is told the slot is taken (the next free one is 12:30), books 12:30."""
    return StoredTurn.model_validate(
        {
            "turn_id": "booking",
            "response": RESPONSE,
            "system_prompt": "You book appointments for the clinic.",
            "model_messages": [
                request({"part_kind": "user-prompt", "content": "Book me the 12:00 slot with Dr. Rao."}),
                response(call("c1", "12:00")),
                request(failure or returned("c1", TAKEN, "failed")),
                response(call("c2", "12:30")),
                request(returned("c2", "Booked: 12:30 with Dr. Rao, room 4.")),
                response({"part_kind": "text", "content": RESPONSE}),
            ],
        }
    )


def gate(corpus: Corpus, text: str = RESPONSE) -> dict[str, Any]:
    return {g.segment.text: g for g in gate_turn(corpus, segment_response(text)).segments}


def test_the_error_text_of_a_failed_call_is_a_tool_error_unit_that_says_it_failed() -> None:
    corpus = build_corpus(booking_turn())
    error, booked = corpus.tool_units()
    assert (error.kind, error.tool, error.label, error.text) == (
        TOOL_ERROR,
        "book_slot",
        "book_slot(time=12:00) — failed",
        TAKEN,
    )
    assert error.header == 'book_slot({"time": "12:00"})\n[the call failed; its error text follows]'
    assert (error.call_id, error.returned_at) == ("c1", 2)  # its return came back before the 12:30 call (at 3)
    assert "error text of a failed call (outcome=failed)" in error.evidence.transformations
    assert (booked.kind, booked.label) == ("user_tool", "book_slot(time=12:30)")
    assert corpus.excluded == ()  # the failure is a source now, not an excluded call


def test_the_free_tier_quotes_the_sentence_from_the_error_text_and_the_seed_has_no_source_for_it() -> None:
    sentence = SENTENCE
    corpus = build_corpus(booking_turn())
    quoted = gate(corpus)[sentence]
    assert quoted.status == GateStatus.QUOTED
    (citation,) = quoted.citations
    assert corpus.by_id(citation.source_id).kind == TOOL_ERROR and citation.line_start == 1

    seed = build_corpus(booking_turn(), SEED)
    assert gate(seed)[sentence].status != GateStatus.QUOTED and not gate(seed)[sentence].citations
    (left_out,) = seed.excluded
    assert left_out.reason == "failed: outcome=failed (failure is not evidence)"


def test_the_action_after_a_failed_call_takes_its_argument_from_the_error_text() -> None:
    turn = booking_turn()
    corpus = build_corpus(turn)
    first, second = screen_actions(turn, corpus).findings
    error = corpus.tool_units()[0]
    # the 12:30 booking was made after the error came back: the error is where 12:30 comes from
    (slot,) = second.arguments
    assert (slot.value, slot.first and slot.first.source_id) == ("12:30", error.id)
    assert second.origin.value == "data"
    # the 12:00 booking was made before: its own failure can never have caused it
    (asked,) = first.arguments
    assert asked.first is not None and asked.first.source_id == "query"


@pytest.mark.parametrize(
    ("failure", "reason", "word"),
    [
        (returned("c1", TAKEN, "denied"), "outcome=denied", "denied"),
        (
            {"part_kind": "retry-prompt", "tool_name": "book_slot", "tool_call_id": "c1", "content": TAKEN},
            "retry-prompt (tool call rejected)",
            "failed",
        ),
        (returned("c1", {"content": [{"type": "text", "text": TAKEN}], "isError": True}), "MCP isError", "failed"),
        (
            returned("c1", json.dumps({"content": [{"type": "text", "text": TAKEN}], "isError": True})),
            "MCP isError",
            "failed",
        ),
    ],
    ids=["denied", "retry-prompt", "mcp-is-error", "mcp-is-error-as-a-json-string"],
)
def test_every_failure_mark_keeps_its_text(failure: dict[str, Any], reason: str, word: str) -> None:
    error = build_corpus(booking_turn(failure)).tool_units()[0]
    assert (error.kind, error.text, error.label) == (TOOL_ERROR, TAKEN, f"book_slot(time=12:00) — {word}")
    assert f"error text of a failed call ({reason})" in error.evidence.transformations


def test_a_failed_call_with_no_text_stays_excluded_with_its_reason() -> None:
    corpus = build_corpus(booking_turn(returned("c1", None, "failed")))
    assert [u.label for u in corpus.tool_units()] == ["book_slot(time=12:30)"]
    (left_out,) = corpus.excluded
    assert left_out.reason.startswith("failed: outcome=failed, no error text recorded")


def test_a_flat_call_whose_response_is_an_mcp_error_is_a_tool_error() -> None:
    turn = StoredTurn.model_validate(
        {
            "turn_id": "flat",
            "response": RESPONSE,
            "response_payload": {
                "tool_calls": [
                    {
                        "name": "clinic.book_slot",
                        "arguments": {"time": "12:00"},
                        "response": {"content": [{"type": "text", "text": TAKEN}], "isError": True},
                    }
                ]
            },
        }
    )
    (unit,) = build_corpus(turn).tool_units()
    assert (unit.kind, unit.text, unit.returned_at) == (TOOL_ERROR, TAKEN, 0)
    assert [e.tool for e in build_corpus(turn, SEED).excluded] == ["clinic.book_slot"]


MCP_TAKEN = {"content": [{"type": "text", "text": "taken"}], "isError": True}
EARLIER_FAILURES = [
    {"role": "user", "content": "Book me the 12:00 slot."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": "book_slot", "arguments": '{"time": "12:00"}'}}
            for n in range(4)
        ],
    },
    {"role": "tool", "tool_call_id": "c0", "content": "slot taken", "is_error": True},
    {"role": "tool", "tool_call_id": "c1", "content": "Error: slot taken", "status": "error"},
    {"role": "tool", "tool_call_id": "c2", "content": json.dumps(MCP_TAKEN)},
    {"role": "tool", "tool_call_id": "c3", "content": "Booked 12:00."},
    {"role": "assistant", "content": "The slot was taken twice, then booked."},
    {"role": "user", "content": "Thanks. Is it with Dr. Rao?"},
]


def test_an_earlier_turns_failed_return_is_a_tool_error_history_item_and_the_seed_leaves_it_out() -> None:
    turn = StoredTurn.model_validate(
        {"turn_id": "later", "response": "Yes.", "request_payload": {"messages": EARLIER_FAILURES}}
    )
    history = build_corpus(turn).in_layer(Layer.HISTORY)
    errors = [u for u in history if u.kind == TOOL_ERROR]
    assert [(u.label, u.text) for u in errors] == [
        ("tool error · book_slot · 5 turn(s) ago", "slot taken"),
        ("tool error · book_slot · 4 turn(s) ago", "Error: slot taken"),
        ("tool error · book_slot · 3 turn(s) ago", "taken"),
    ]
    assert all(u.tool == "tool" and u.header.startswith("[tool error, ") for u in errors)
    assert all("error text of a failed call" in " ".join(u.evidence.transformations) for u in errors)
    assert [u.label for u in history if u.kind == "history"][1] == "tool result · book_slot · 2 turn(s) ago"

    seed = build_corpus(turn, SEED).in_layer(Layer.HISTORY)
    assert [u.tool for u in seed] == ["user", "tool", "assistant"]
    assert [role for role, _, _ in history_messages(turn, failed_calls=False)] == ["user", "tool", "assistant"]


@pytest.mark.parametrize("params", [DEFAULT_PARAMS, SEED], ids=["failures-as-sources", "seed"])
def test_the_action_screens_history_items_match_the_corpus_either_way(params: Params) -> None:
    turn = StoredTurn.model_validate(
        {"turn_id": "later", "response": "Yes.", "request_payload": {"messages": EARLIER_FAILURES}}
    )
    corpus = build_corpus(turn, params)
    items = whole_history(turn, corpus)
    for item in items:
        assert item.unit_id is not None and corpus.by_id(item.unit_id).text == item.text


@pytest.mark.parametrize("fixture", ["eo_worldview_turn.json", "ndvi_parametric_turn.json"])
def test_the_papers_figures_come_from_turns_without_failures_so_either_value_gives_the_same_corpus(
    fixture: str,
) -> None:
    turn = StoredTurn.model_validate_json((FIXTURES / fixture).read_text(encoding="utf-8"))
    ours, seed = build_corpus(turn), build_corpus(turn, SEED)
    assert ours.units == seed.units and ours.excluded == seed.excluded and ours.digest == seed.digest
    claim = segment_response(turn.response)[0].text
    assert quote_cost(ours, claim, model="m").calls == quote_cost(seed, claim, model="m", params=SEED).calls


async def test_a_trace_names_the_error_source_with_its_kind_and_label() -> None:
    corpus = build_corpus(booking_turn())
    claim = SENTENCE

    def judge(req: LLMRequest) -> str:
        shown = req.messages[-1].content
        if req.purpose == "support":
            found = TAKEN in shown
            quote = "the 12:00 slot was already taken" if found else ""
            verdict = "supported" if found else "silent"
            return json.dumps({"verdict": verdict, "evidence_quote": quote, "confidence": 0.9, "reason": "-"})
        return "9" if "already taken" in shown.replace(claim, "") else "2"

    result = await trace_claim(ScriptedLLM(judge), claim, "Book me the 12:00 slot with Dr. Rao.", corpus)
    error = corpus.tool_units()[0]
    grounds = [s for s in result.sources if s.role == "grounds"]
    assert [(s.source_id, s.kind, s.label) for s in grounds] == [(error.id, TOOL_ERROR, error.label)]
    assert grounds[0].support is not None and grounds[0].support.quote == "the 12:00 slot was already taken"


def test_params_stored_before_failed_calls_were_sources_read_as_they_were_made() -> None:
    from estimator.params import Params

    earlier = Params().model_dump()
    earlier.pop("failed_calls_as_sources")  # a job or result written before the setting existed
    assert Params.stored(earlier).failed_calls_as_sources is False
    assert Params.stored(Params().model_dump()).failed_calls_as_sources is True
    assert Params.stored({**earlier, "failed_calls_as_sources": True}).failed_calls_as_sources is True
