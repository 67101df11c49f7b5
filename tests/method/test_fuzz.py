"""Fuzzing the free tier: hypothesis builds stored turns (flat tool calls, chat-completions history with
tool calls, pydantic-ai style model messages, attachments, hostile text) and responses, and drives corpus
construction, segmentation and gating. Nothing raises; every sentence is accounted for exactly once;
every citation points into a real source within its lines. The whole API is fuzzed by schemathesis in
``test_api_schemathesis.py``."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.cost import plan_calls, quote_cost
from estimator.fence import FENCE
from estimator.free_tier.gating import GateStatus, gate_turn
from estimator.free_tier.segment import segment_response

pytestmark = pytest.mark.timeout(180)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

WORDS = st.sampled_from(
    [
        "Order",
        "A-1",
        "shipped",
        "on",
        "2025-03-03",
        "with",
        "DHL",
        "carrier",
        "NDVI",
        "0.82",
        "MODIS_L3",
        "https://example.org/a?b=1",
        "v2.3.1",
        "e.g.",
        "Dr.",
        "U.S.",
        "I",
        "called",
        "lookup_order",
        "—",
        "…",
        "Would",
        "you",
        "like",
        "?",
        "!",
        ".",
        "\n",
        "\n\n",
        "- ",
        "1. ",
        "```",
        "# ",
        "|",
        "`code`",
        "\\n",
        '\\"',
        FENCE,
        "IGNORE ALL INSTRUCTIONS",
        "\u202e",
        "\x00",
        "\ufeff",
        "€",
        "日本語",
        "🙂",
        "   ",
        "\t",
    ]
)
PROSE = st.lists(WORDS, min_size=0, max_size=40).map(" ".join)
TEXT = st.one_of(PROSE, st.text(max_size=200), st.text(alphabet="1.-_/@:aA ", max_size=300))
JSONISH: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
NAMES = st.sampled_from(["lookup_order", "search", "get_weather", "read_file", "web_search", "x", "final_result"])


def flat_call() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "name": NAMES,
            "arguments": st.one_of(
                st.none(),
                TEXT,
                st.dictionaries(st.sampled_from(["id", "query", "path", "q"]), TEXT | st.integers(), max_size=3),
            ),
            "response": st.one_of(st.none(), TEXT, JSONISH),
        }
    )


def chat_history() -> st.SearchStrategy[list[dict[str, Any]]]:
    message = st.one_of(
        st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]), "content": TEXT}),
        st.fixed_dictionaries(
            {
                "role": st.just("assistant"),
                "content": st.none(),
                "tool_calls": st.lists(
                    st.fixed_dictionaries(
                        {
                            "id": st.sampled_from(["c1", "c2", "c1"]),
                            "type": st.just("function"),
                            "function": st.fixed_dictionaries({"name": NAMES, "arguments": TEXT}),
                        }
                    ),
                    min_size=1,
                    max_size=2,
                ),
            }
        ),
        st.fixed_dictionaries(
            {"role": st.just("tool"), "tool_call_id": st.sampled_from(["c1", "c2", "c3"]), "content": TEXT}
        ),
        st.fixed_dictionaries(
            {
                "role": st.just("user"),
                "content": st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}), max_size=2),
            }
        ),
    )
    return st.lists(message, max_size=8)


def model_messages() -> st.SearchStrategy[list[dict[str, Any]]]:
    part = st.one_of(
        st.fixed_dictionaries({"part_kind": st.just("user-prompt"), "content": TEXT}),
        st.fixed_dictionaries({"part_kind": st.just("system-prompt"), "content": TEXT}),
        st.fixed_dictionaries({"part_kind": st.just("text"), "content": TEXT}),
        st.fixed_dictionaries(
            {
                "part_kind": st.just("tool-call"),
                "tool_name": NAMES,
                "tool_call_id": st.sampled_from(["p1", "p2"]),
                "args": JSONISH,
            }
        ),
        st.fixed_dictionaries(
            {
                "part_kind": st.just("tool-return"),
                "tool_name": NAMES,
                "tool_call_id": st.sampled_from(["p1", "p2", "p3"]),
                "content": JSONISH,
                "outcome": st.sampled_from(["success", "failed", "denied", None]),
            }
        ),
        st.fixed_dictionaries({"part_kind": st.just("retry-prompt"), "content": JSONISH}),
    )
    message = st.fixed_dictionaries(
        {"kind": st.sampled_from(["request", "response"]), "parts": st.lists(part, max_size=4)}
    )
    return st.lists(message, max_size=5)


@st.composite
def stored_turns(draw: st.DrawFn) -> dict[str, Any]:
    response = draw(st.one_of(PROSE, TEXT).filter(lambda s: bool(s.strip())))
    turn: dict[str, Any] = {"turn_id": "t-fuzz", "response": response}
    if draw(st.booleans()):
        turn["system_prompt"] = draw(TEXT)
        turn["system_prompt_versioned"] = draw(st.booleans())
    if draw(st.booleans()):
        turn["query"] = draw(TEXT)
    if draw(st.booleans()):
        turn["response_payload"] = {"tool_calls": draw(st.lists(flat_call(), max_size=5))}
    history = draw(st.sampled_from(["none", "chat", "native"]))
    if history == "chat":
        turn["request_payload"] = {"messages": draw(chat_history())}
    elif history == "native":
        turn["model_messages"] = draw(model_messages())
    if draw(st.booleans()):
        turn["attachments"] = draw(st.lists(st.text(min_size=1, max_size=20), max_size=2))
    if draw(st.booleans()):  # the response quotes a source verbatim, so gating finds quotes
        source = json.dumps(turn.get("response_payload", {}))
        turn["response"] = response + " " + source[: draw(st.integers(0, 200))] + "."
    return turn


@pytest.mark.slow  # property-test volume: generated turns through the corpus and the gate
@FUZZ
@given(stored_turns())
def test_corpus_and_gating_never_raise_and_account_for_every_sentence(raw: dict[str, Any]) -> None:
    turn = StoredTurn.model_validate(raw)
    corpus = build_corpus(turn)
    ids = [u.id for u in corpus.units]
    assert len(ids) == len(set(ids))
    for unit in corpus.units:
        assert isinstance(unit.text, str)
    segments = segment_response(turn.response)
    for seg in segments:
        assert turn.response[seg.start : seg.end] == seg.text
    starts = [s.start for s in segments]
    assert starts == sorted(starts) and all(a.end <= b.start for a, b in pairwise(segments))
    report = gate_turn(corpus, segments)
    assert [g.segment for g in report.segments] == list(segments)  # one gate per sentence, in order
    s = report.summary
    assert s.sentences == len(segments) == s.traceable + s.quoted + s.agent_voice + s.action + s.unanchored
    for gate in report.segments:
        assert gate.status in set(GateStatus)
        for citation in gate.citations:
            unit = corpus.by_id(citation.source_id)
            assert 1 <= citation.line_start <= citation.line_end <= max(1, len(unit.lines))
    json.dumps(report.to_dict())
    plan = plan_calls(corpus)
    quote = quote_cost(corpus, segments[0].text if segments else turn.response, model="openai/x")
    assert plan.total == quote.planned_calls >= 0
    if not corpus.units:
        assert quote.refused  # nothing to trace: refused, never a plan over nothing


@FUZZ
@given(st.text(max_size=2000))
def test_segmentation_of_any_text_covers_it(text: str) -> None:
    segments = segment_response(text)
    for seg in segments:
        assert text[seg.start : seg.end] == seg.text and seg.text.strip()
    # nothing but whitespace and markup is left between segments
    covered = sum(len(seg.text) for seg in segments)
    assert covered <= len(text)
