"""Importers (issue 5): every format's fixture, every failure marking, and the real τ-bench transcripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.params import Params
from provenance_api.importers import (
    FORMATS,
    ImportResult,
    UnknownFormatError,
    detect_format,
    import_conversation,
)
from provenance_api.importers.common import turn_key
from provenance_api.importers.mcp import flatten_result

HISTORY = Path(__file__).resolve().parents[2] / "fixtures" / "history"
FIXTURES = sorted(HISTORY.glob("*/*.json"))
TAU_BENCH = Path(__file__).resolve().parents[2] / "tests/data/tau-bench/airline-gpt-4o-dev.json"


def load(fmt: str, name: str) -> Any:
    return json.loads((HISTORY / fmt / f"{name}.json").read_text(encoding="utf-8"))


def imported(fmt: str, name: str) -> ImportResult:
    result = import_conversation(load(fmt, name), conversation_id=name)
    assert result.errors == []
    return result


def calls(turn: StoredTurn) -> dict[str, Any]:
    """The turn's evidence calls, name → response."""
    return {c.name: c.response for c in turn.response_payload.tool_calls}


SEED = Params(failed_calls_as_sources=False)


def excluded(turn: StoredTurn) -> dict[str, str]:
    """What the corpus leaves out of the turn, tool name → reason, under the seed's Algorithm 1 (failed calls are
    excluded): so every failure the importer marked is listed with its reason."""
    return {e.tool: e.reason for e in build_corpus(turn, SEED).excluded}


def test_every_format_has_a_fixture() -> None:
    assert {p.parent.name for p in FIXTURES} == set(FORMATS)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_auto_detection_picks_the_fixtures_format(path: Path) -> None:
    assert detect_format(json.loads(path.read_text(encoding="utf-8"))) == path.parent.name


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_reimport_is_identical_and_every_turn_round_trips(path: Path) -> None:
    obj = json.loads(path.read_text(encoding="utf-8"))
    first = import_conversation(obj, conversation_id="conv-1")
    again = import_conversation(
        json.loads(path.read_text(encoding="utf-8")), path.parent.name, conversation_id="conv-1"
    )
    assert first.turns and [t.model_dump() for t in first.turns] == [t.model_dump() for t in again.turns]
    assert [t.turn_id for t in first.turns] == [f"conv-1:{turn_key(t)[:12]}" for t in first.turns]
    for turn in first.turns:
        assert StoredTurn.model_validate_json(turn.model_dump_json()) == turn
        assert turn.request_payload.messages[-1].role == "user"
        assert turn.request_payload.messages[-1].content == turn.query
        assert turn.system_prompt and turn.system_prompt_versioned
        build_corpus(turn)


def test_pydantic_ai_outcome_and_retry_prompt_mark_failures_and_args_stay_raw_when_not_json() -> None:
    first, _ = imported("pydantic_ai", "refund_with_failures").turns
    assert first.query == "Refund order 7?" and first.model == "gpt-4o"
    assert first.response == "Refund issued: order 7 was paid, 40 EUR."
    assert first.created_at is not None and first.created_at.isoformat() == "2025-03-01T10:00:05+00:00"
    assert first.system_prompt == "Answer tersely.\n\nYou are a billing agent."
    assert [c.name for c in first.response_payload.tool_calls] == ["lookup_order"]
    assert first.response_payload.tool_calls[0].arguments == {"id": 7}  # string arguments parsed
    assert json.loads(calls(first)["lookup_order"]) == {"status": "paid", "amount_eur": 40}
    assert set(excluded(first)) == {"check_policy", "ledger"}
    assert all(reason.startswith("failed") for reason in excluded(first).values())
    ledger = next(p for m in first.model_messages for p in m.parts if p.tool_name == "ledger")
    assert ledger.args == "{id: 7"  # raw text kept when it is not JSON
    assert [u.tool for u in build_corpus(first, SEED).units if u.layer == "tools"] == ["lookup_order"]
    # by default each failure's own text is a source, labelled as an error
    assert [(u.tool, u.kind, u.text) for u in build_corpus(first).tool_units()][1:] == [
        ("check_policy", "tool_error", "unknown kind 'refund'"),
        ("ledger", "tool_error", "ledger offline"),
    ]


def test_pydantic_ai_list_prompt_reused_id_builtin_tool_and_mcp_results() -> None:
    _, second = imported("pydantic_ai", "refund_with_failures").turns
    assert second.query == "Is this receipt for the same order?"
    assert second.attachments == ["image https://example.com/receipt.png"]
    assert second.system_prompt == "Answer tersely.\n\nYou are a billing agent. Be brief."
    # c1 is reused: the earlier lookup_order keeps its return in the history, the new call gets its own.
    assert calls(second)["receipts.read"] == (
        "Receipt for order 7, 40 EUR\n[image (image/png) not inlined]\nPaid by card"
    )
    history_tool = [m for m in second.request_payload.messages if m.role == "tool"]
    # the failed returns are history too, marked is_error (the corpus's history layer labels them tool errors)
    assert [(m.tool_call_id, m.name, (m.model_extra or {}).get("is_error")) for m in history_tool] == [
        ("c1", "lookup_order", None),
        ("c2", "check_policy", True),
        ("c3", "ledger", True),
    ]
    assert "Receipt numbers" in calls(second)["web_search"]
    assert excluded(second) == {"warehouse.query": "failed: outcome=failed (failure is not evidence)"}
    assert "warehouse.query" not in calls(second)


def test_pydantic_ai_final_result_is_the_response_not_a_tool() -> None:
    (turn,) = imported("pydantic_ai", "structured_output").turns
    assert json.loads(turn.response) == {"category": "hardware", "urgent": True}
    assert calls(turn) == {"get_ticket": "Printer is on fire"}
    assert all(p.tool_name != "final_result" for m in turn.model_messages for p in m.parts)


def test_openai_chat_pairs_by_id_keeps_error_text_and_reads_custom_and_legacy_calls() -> None:
    first, second = imported("openai_chat", "refunds").turns
    assert first.model == "gpt-4o" and first.system_prompt == "You are a billing agent."
    assert first.response_payload.tool_calls[0].arguments == {"id": 7}
    # the returns come in the opposite order to the calls: pairing is by id
    assert calls(first) == {"lookup_order": '{"status": "paid"}', "sql": "paid = true"}
    assert first.response_payload.tool_calls[1].arguments == "SELECT paid FROM orders WHERE id = 7"
    assert first.model_messages == []  # no failure marks in this format: the flat calls are the record
    assert second.query == "And order 8?" and second.attachments == ["image"]
    # call_a reused: the new call keeps its own (error) return, kept: the format marks no failure.
    assert calls(second) == {"lookup_order": "Error: order 8 not found", "notify": "sent"}
    assert second.response_payload.tool_calls[0].arguments == '{"id": 8'
    assert excluded(second) == {}


def test_openai_responses_hosted_tool_failures_and_final_answer_phase() -> None:
    first, second = imported("openai_responses", "refund_law").turns
    assert first.system_prompt == "You are a research assistant.\n\nCite your sources."
    assert calls(first) == {"lookup_order": '{"status": "paid"}'}
    assert second.response == "The law gives 14 days to withdraw; our policy allows 30."
    assert second.attachments == ["file terms.pdf"] and second.model == "gpt-5"
    assert second.created_at is not None and first.created_at is None  # only the output is from this response
    assert calls(second) == {
        "web_search": None,
        "legal.statute": "A consumer may withdraw within 14 days.",
        "policy": "Refunds are accepted within 30 days.",
    }
    reasons = excluded(second)
    assert reasons["legal.caselaw"].startswith("failed") and reasons["file_search"].startswith("failed")
    assert reasons["web_search"].startswith("no return recorded")


def test_anthropic_is_error_server_tool_error_and_tool_result_only_user_messages() -> None:
    first, second = imported("anthropic", "refund_with_server_tools").turns
    assert first.query == "Refund order 7?"  # the tool_result-only user message is not a query
    assert calls(first) == {"lookup_order": '{"status": "paid"}\n[image (image/png) not inlined]'}
    assert excluded(first) == {"ledger": "failed: outcome=failed (failure is not evidence)"}
    assert second.query == "Any news about refund law?" and second.attachments == ["image (image/jpeg)"]
    assert calls(second) == {"web_search": "Refund directive 2025 · https://example.org/directive"}
    assert excluded(second)["web_fetch"].startswith("failed")
    assert second.response == "A 2025 directive extends refunds to 30 days."


def test_langchain_status_error_and_invalid_tool_calls_are_failures() -> None:
    first, second = imported("langchain", "messages_to_dict").turns
    assert first.model == "gpt-4o-mini" and calls(first) == {}
    assert set(excluded(first)) == {"lookup_order", "ledger"}
    assert second.query == "Try order 8."  # list-of-parts content
    assert calls(second) == {"lookup_order": '{"status": "paid"}'}  # the reused call_a keeps its own return
    failed_return = [m for m in second.request_payload.messages if m.role == "tool"]  # history, marked failed
    assert [(m.content, (m.model_extra or {}).get("is_error")) for m in failed_return] == [("Order not found", True)]


def test_langchain_dumpd_form_reads_like_messages_to_dict() -> None:
    (turn,) = imported("langchain", "dumpd").turns
    assert (turn.query, turn.response) == ("Refund order 7?", "Refund issued.")
    assert turn.model == "claude-sonnet-4-5"
    assert calls(turn) == {"lookup_order": '{"status": "paid"}'}


def test_otel_chat_spans_take_failures_from_execute_tool_spans() -> None:
    (turn,) = imported("otel", "chat_spans_with_tool_error").turns
    assert turn.model == "gpt-4o-2024-08-06" and turn.system_prompt == "You are a billing agent."
    assert turn.created_at is not None and turn.created_at.isoformat() == "2025-03-01T10:00:35+00:00"
    assert json.loads(calls(turn)["lookup_order"]) == {"status": "paid"}
    assert excluded(turn)["ledger"].startswith("failed")


def test_otel_details_event_user_tool_responses_and_mcp_is_error() -> None:
    (turn,) = imported("otel", "inference_details_event").turns
    assert turn.query == "Weather in Paris?"
    assert turn.attachments == ["uri https://example.com/sky.jpg (image)"]
    assert calls(turn) == {"weather.current": "18 °C, light rain"}
    assert excluded(turn)["weather.alerts"].startswith("failed")


def test_otel_each_reply_takes_model_and_time_from_the_span_that_produced_it() -> None:
    def msg(role: str, text: str) -> dict[str, Any]:
        return {"role": role, "parts": [{"type": "text", "content": text}]}

    def chat(inputs: list[dict[str, Any]], output: str, model: str, second: int) -> dict[str, Any]:
        return {
            "name": "chat",
            "end_time": f"2025-01-01T00:00:0{second}Z",
            "attributes": {
                "gen_ai.response.model": model,
                "gen_ai.input.messages": inputs,
                "gen_ai.output.messages": [msg("assistant", output)],
            },
        }

    spans = [
        chat([msg("user", "Hi")], "Hello!", "m-1", 1),
        chat([msg("user", "Name this chat.")], "Greetings", "m-side", 2),  # another conversation
        chat([msg("user", "Hi"), msg("assistant", "Hello!"), msg("user", "Bye")], "Goodbye!", "m-2", 3),
    ]
    turns = import_conversation(spans, conversation_id="c").turns
    assert [(t.response, t.model, t.created_at.second if t.created_at else None) for t in turns] == [
        ("Hello!", "m-1", 1),
        ("Goodbye!", "m-2", 3),
    ]


@pytest.mark.parametrize(
    ("name", "query", "response"),
    [
        ("legacy_message_events", "Refund order 7?", "Refund issued."),
        ("otlp_export", "Capital of France?", "Paris."),
    ],
)
def test_otel_older_events_and_otlp_export(name: str, query: str, response: str) -> None:
    (turn,) = imported("otel", name).turns
    assert (turn.query, turn.response) == (query, response)


def test_mcp_flattening_names_media_and_marks_is_error() -> None:
    result = {
        "content": [
            {"type": "text", "text": "row 1"},
            {"type": "resource", "resource": {"uri": "file:///a.csv", "mimeType": "text/csv", "text": "a,b"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAEC"}},
            {"type": "audio", "data": "UklGR", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "file:///c.txt", "name": "c"},
        ],
        "isError": False,
    }
    text, failed = flatten_result(result)
    assert text.split("\n") == [
        "row 1",
        "a,b",
        "[resource file:///b.bin (binary) not inlined]",
        "[audio (audio/wav) not inlined]",
        "[resource link file:///c.txt]",
    ]
    assert not failed and "AAEC" not in text and "UklGR" not in text
    structured = {"content": [], "structuredContent": {"n": 1}, "isError": True}
    assert flatten_result(structured) == ('{\n  "n": 1\n}', True)
    # A tool return that merely contains typed objects is data, not blocks: it is dumped whole.
    assert json.loads(flatten_result([{"type": "flight", "id": 1}])[0]) == [{"type": "flight", "id": 1}]


def test_two_pending_calls_of_one_id_each_take_one_return_most_recent_first() -> None:
    def call(name: str) -> dict[str, Any]:
        return {"id": "dup", "type": "function", "function": {"name": name, "arguments": "{}"}}

    conversation = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": None, "tool_calls": [call("older"), call("newer")]},
        {"role": "tool", "tool_call_id": "dup", "content": "first return"},
        {"role": "tool", "tool_call_id": "dup", "content": "second return"},
        {"role": "assistant", "content": "Done."},
    ]
    (turn,) = import_conversation(conversation, conversation_id="c").turns
    assert calls(turn) == {"newer": "first return", "older": "second return"}


def test_bad_messages_are_reported_and_the_rest_imported() -> None:
    conversation = [
        {"role": "user", "content": "Hi"},
        "garbage",
        {"role": "tool", "tool_call_id": "nope", "content": "x"},
        {"role": "assistant", "content": "Hello."},
    ]
    result = import_conversation(conversation, "openai-chat", conversation_id="c")
    assert [t.response for t in result.turns] == ["Hello."]
    # read past, the rest imported: warnings, not rejections
    assert result.errors == [] and [e.where for e in result.warnings] == ["c: message 1", "c: message 2"]
    with pytest.raises(UnknownFormatError):
        detect_format({"rows": [1, 2]})
    with pytest.raises(UnknownFormatError):
        import_conversation(conversation, "yaml", conversation_id="c")


def test_a_query_of_attachments_alone_is_named_by_them() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    conversation = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": [image]},
        {"role": "assistant", "content": "A cat."},
    ]
    turn = import_conversation(conversation, conversation_id="c").turns[1]
    assert turn.query == "[attached: image https://example.com/a.png]" == turn.effective_query()
    assert [m.role for m in turn.request_payload.messages] == ["user", "assistant", "user"]
    assert [u.tool for u in build_corpus(turn).units] == ["user", "assistant"]


def test_a_conversation_ending_in_tool_calls_is_an_unfinished_turn() -> None:
    call = {"id": "x", "type": "function", "function": {"name": "transfer", "arguments": "{}"}}
    conversation = [
        {"role": "user", "content": "Cancel it."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    result = import_conversation(conversation, conversation_id="c")
    assert result.notes == [] and len(result.turns) == 1  # tests/history/test_unfinished_turns.py has the rest
    (turn,) = result.turns
    assert (turn.query, turn.response) == ("Cancel it.", "")
    assert [c.name for c in turn.response_payload.tool_calls] == ["transfer"]


def tau_bench() -> list[dict[str, Any]]:
    if not TAU_BENCH.is_file():
        pytest.fail(f"τ-bench data missing: expected {TAU_BENCH} (shipped in tests/data/tau-bench)")
    data: list[dict[str, Any]] = json.loads(TAU_BENCH.read_text(encoding="utf-8"))
    return data


def is_reply(message: dict[str, Any]) -> bool:
    """An assistant text reply, counted straight from the transcript."""
    content = message.get("content")
    return (
        message["role"] == "assistant"
        and not message.get("tool_calls")
        and isinstance(content, str)
        and bool(content.strip())
    )


def test_tau_bench_yields_one_turn_per_assistant_text_reply_and_every_corpus_builds() -> None:
    conversations = tau_bench()
    assert len(conversations) == 100
    replies = imported_turns = unfinished = 0
    for conv in conversations:
        traj = conv["traj"]
        replies += sum(map(is_reply, traj))
        last = max((i for i, m in enumerate(traj) if is_reply(m)), default=-1)
        unfinished += any(m.get("tool_calls") for m in traj[last + 1 :])  # calls after the last reply: one more
        assert detect_format(conv) == "openai_chat"
        conversation_id = f"tau-{conv['task_id']}-{conv['trial']}"
        result = import_conversation(conv, conversation_id=conversation_id)
        assert result.errors == []
        assert import_conversation(conv, conversation_id=conversation_id).turns == result.turns
        imported_turns += len(result.turns)
        for turn in result.turns:
            assert turn.system_prompt == traj[0]["content"]
            build_corpus(turn)
    assert (imported_turns, replies, unfinished) == (780, 760, 20)


def test_tau_bench_reused_ids_within_one_turn_keep_their_own_returns() -> None:
    checked = 0
    for conv in tau_bench():
        traj = conv["traj"]
        for start, message in enumerate(traj):
            if message["role"] != "user":
                continue
            end = next((i for i in range(start + 1, len(traj)) if traj[i]["role"] == "user"), len(traj))
            segment = traj[start + 1 : end]
            ids = [tc["id"] for m in segment for tc in m.get("tool_calls") or []]
            reused = {i for i in ids if ids.count(i) > 1}
            if not reused or not any(is_reply(m) for m in segment):
                continue
            # Expected pairs, read off the transcript: a call's return is the next tool message of its id.
            expected = []
            for k, m in enumerate(segment):
                for tc in m.get("tool_calls") or []:
                    answer = next(r for r in segment[k + 1 :] if r.get("tool_call_id") == tc["id"])
                    expected.append(
                        (tc["function"]["name"], json.loads(tc["function"]["arguments"]), answer["content"])
                    )
            turn = import_conversation(conv, conversation_id="t").turns[sum(map(is_reply, traj[:end])) - 1]
            assert turn.response == segment[-1]["content"]
            got = [(c.name, c.arguments, c.response) for c in turn.response_payload.tool_calls]
            assert got == expected
            checked += 1
    assert checked, "expected at least one turn in which a tool_call_id is reused"


# --- findings on real history (issue 15) -----------------------------------------------------------


def test_otel_older_event_content_json_string_tool_call_id_and_choice_message() -> None:
    """Older instrumentations put each event's fields in one ``gen_ai.event.content`` JSON string."""
    (turn,) = imported("otel", "event_content_events").turns
    assert turn.query == "Where is parcel 88?"
    assert turn.response == "Parcel 88 is in transit: it left the Lyon hub at 06:12."
    assert calls(turn) == {"track_parcel": "In transit: left Lyon hub at 06:12."}
    assert turn.response_payload.tool_calls[0].arguments == {"parcel": 88}


def test_otel_developer_role_is_the_instructions() -> None:
    def msg(role: str, text: str) -> dict[str, Any]:
        return {"role": role, "parts": [{"type": "text", "content": text}]}

    span = {
        "gen_ai.input.messages": [msg("developer", "Never promise refunds."), msg("user", "Refund me?")],
        "gen_ai.output.messages": [msg("assistant", "I cannot promise that.")],
    }
    result = import_conversation(span, conversation_id="c")
    assert result.errors == []
    (turn,) = result.turns
    assert turn.system_prompt == "Never promise refunds." and turn.query == "Refund me?"


def test_null_tool_returns_are_kept_as_a_visible_source() -> None:
    chat = [
        {"role": "user", "content": "Clear the cache."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "clear_cache", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "a", "content": None},
        {"role": "assistant", "content": "The cache tool returned nothing (null)."},
    ]
    pydantic = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "Clear the cache."}]},
        {
            "kind": "response",
            "parts": [{"part_kind": "tool-call", "tool_name": "clear_cache", "args": {}, "tool_call_id": "a"}],
        },
        {
            "kind": "request",
            "parts": [{"part_kind": "tool-return", "tool_name": "clear_cache", "content": None, "tool_call_id": "a"}],
        },
        {"kind": "response", "parts": [{"part_kind": "text", "content": "It returned null."}]},
    ]
    for conversation in (chat, pydantic):
        (turn,) = import_conversation(conversation, conversation_id="c").turns
        assert calls(turn) == {"clear_cache": "null"}
        assert [u.tool for u in build_corpus(turn).units if u.tool == "clear_cache"] == ["clear_cache"]
        assert excluded(turn) == {}


def test_pydantic_ai_image_follow_up_is_not_the_query() -> None:
    image = {"kind": "binary", "data": "iVBORw0KGgo=", "media_type": "image/png", "identifier": "bd38f5"}
    conversation = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "What food is in the image?"}]},
        {
            "kind": "response",
            "parts": [{"part_kind": "tool-call", "tool_name": "get_image", "args": {}, "tool_call_id": "i1"}],
        },
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "tool-return",
                    "tool_name": "get_image",
                    "content": "See file bd38f5",
                    "tool_call_id": "i1",
                },
                {"part_kind": "user-prompt", "content": ["This is file bd38f5:", image]},
            ],
        },
        {"kind": "response", "parts": [{"part_kind": "text", "content": "A potato."}]},
    ]
    (turn,) = import_conversation(conversation, conversation_id="c").turns
    assert turn.query == "What food is in the image?" and turn.attachments == []
    assert calls(turn) == {"get_image": "See file bd38f5"}


def test_a_lone_anthropic_message_object_is_accepted() -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-0",
        "content": [
            {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "q"}},
            {
                "type": "web_search_tool_result",
                "tool_use_id": "s1",
                "content": [{"type": "web_search_result", "title": "Docs", "url": "https://example.com"}],
            },
            {"type": "text", "text": "Found the docs."},
        ],
        "stop_reason": "end_turn",
    }
    assert detect_format(message) == "anthropic"
    (turn,) = import_conversation(message, conversation_id="c").turns
    assert (turn.response, turn.model, turn.query) == ("Found the docs.", "claude-sonnet-4-0", None)
    assert calls(turn) == {"web_search": "Docs · https://example.com"}


def test_the_failing_message_is_named_by_index_and_the_rest_imported() -> None:
    conversation = [
        {"role": "user", "content": "Hi"},
        {"role": "wizard", "content": "?"},
        {"role": "assistant", "content": "Hello."},
    ]
    result = import_conversation(conversation, conversation_id="c")  # detected although one message is not chat
    assert [t.response for t in result.turns] == ["Hello."]
    assert result.errors == [] and [(e.where, e.reason) for e in result.warnings] == [
        ("c: message 1", "not a chat message (role 'wizard'); skipped")
    ]
    with pytest.raises(UnknownFormatError, match="message 0 has keys"):
        detect_format([{"speaker": "a"}, {"speaker": "b"}, {"role": "user", "content": "x"}])


def test_wrong_types_are_rejected_with_the_path() -> None:
    chat = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": "Working.", "tool_calls": "not a list"},
        {"role": "assistant", "content": "Done."},
    ]
    result = import_conversation(chat, conversation_id="c")
    assert [e.where for e in result.errors] == ["c: message 1"]
    assert "tool_calls: expected a list, got str 'not a list'" in result.errors[0].reason
    anthropic = {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Delete it."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "delete", "input": {}}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": "denied", "is_error": "yes"}],
            },
            {"role": "assistant", "content": "Deleted."},
        ],
    }
    result = import_conversation(anthropic, conversation_id="c")
    assert result.errors[0].where == "c: message 2"
    assert "content[0].is_error: expected true or false, got str 'yes'" in result.errors[0].reason
    (turn,) = result.turns
    assert calls(turn) == {"delete": None}  # the return was rejected, never taken as a success
