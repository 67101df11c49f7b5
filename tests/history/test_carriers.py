"""What the importers read (issue 29, item 6): OpenTelemetry log records, MCP ``CallToolResult`` in every carrier,
tool-returned images named as unscorable, and per-message "skipped" issues as warnings. The records, spans and
results are made by the libraries themselves (the OpenTelemetry SDK and its OTLP encoder, the MCP SDK's types);
a scripted judge stands in for the model where a trace runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import TOOL_ERROR
from estimator.cost import quote_cost
from estimator.loo.judged import trace_claim
from estimator.seams.llm import LLMRequest, ScriptedLLM
from provenance_api.cli import render_text
from provenance_api.importers import FORMATS, detect_format, import_conversation
from provenance_api.providers import free_tier

SYSTEM = "You book appointments for the clinic."
QUESTION = "Book me the 12:00 slot with Dr. Rao."
TAKEN = "Booking failed: the 12:00 slot was already taken by another patient."
REPLY = "The 12:00 slot was already taken by another patient, so nothing is booked."
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
CALL = {"id": "call_1", "type": "function", "function": {"name": "book_slot", "arguments": '{"time": "12:00"}'}}


# ----------------------------------------------------------------------------- OpenTelemetry log records


def log_records(*, with_spans: bool = False) -> tuple[list[Any], list[dict[str, Any]]]:
    """An agent's two chat calls as an OpenTelemetry instrumentation logs them: the SDK's own records (the GenAI
    events as log records with ``event_name`` and ``body``), each emitted inside its chat span. Returns the SDK's
    records and the spans as the SDK writes them (``to_json``)."""
    from opentelemetry._logs import LogRecord
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    records = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated
    logs = LoggerProvider()
    logs.add_log_record_processor(SimpleLogRecordProcessor(records))
    logger = logs.get_logger("opentelemetry.instrumentation.openai_v2")
    spans = InMemorySpanExporter()
    traces = TracerProvider()
    traces.add_span_processor(SimpleSpanProcessor(spans))
    tracer = traces.get_tracer("opentelemetry.instrumentation.openai_v2")

    def emit(name: str, body: dict[str, Any]) -> None:
        logger.emit(LogRecord(event_name=name, body=body, attributes={"gen_ai.system": "openai"}))

    def chat(*events: tuple[str, dict[str, Any]]) -> None:
        with tracer.start_as_current_span("chat gpt-4o") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.response.model", "gpt-4o-2024-08-06")
            emit("gen_ai.system.message", {"content": SYSTEM})
            emit("gen_ai.user.message", {"content": QUESTION})
            for name, body in events:
                emit(name, body)

    chat(
        (
            "gen_ai.choice",
            {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [CALL]}},
        )
    )
    chat(
        ("gen_ai.assistant.message", {"tool_calls": [CALL]}),
        ("gen_ai.tool.message", {"content": TAKEN, "id": "call_1"}),
        ("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": REPLY}}),
    )
    written = [json.loads(s.to_json()) for s in spans.get_finished_spans()] if with_spans else []
    return list(records.get_finished_logs()), written


def sdk_json(records: list[Any]) -> list[dict[str, Any]]:
    """What the SDK's log exporters write for each record (``ReadableLogRecord.to_json``), as one list."""
    return [json.loads(r.to_json()) for r in records]


def otlp_json(records: list[Any]) -> dict[str, Any]:
    """The OTLP/JSON form of the records (``resourceLogs``), from the OTLP exporter's own encoder."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

    encoded: dict[str, Any] = MessageToDict(encode_logs(records))
    return encoded


@pytest.mark.parametrize("form", ["sdk_to_json", "otlp_json", "sdk_to_json_beside_the_spans"])
def test_otel_log_records_import(form: str) -> None:
    records, spans = log_records(with_spans=form.endswith("spans"))
    data: Any = otlp_json(records) if form == "otlp_json" else [*spans, *sdk_json(records)]
    if form == "otlp_json":
        assert {r["eventName"] for s in data["resourceLogs"] for sl in s["scopeLogs"] for r in sl["logRecords"]} >= {
            "gen_ai.user.message",
            "gen_ai.tool.message",
            "gen_ai.choice",
        }
    else:
        assert all(r["event_name"].startswith("gen_ai.") and "body" in r for r in sdk_json(records))
    assert detect_format(data) == "otel"
    result = import_conversation(data, conversation_id="logs")
    assert result.errors == [] and result.warnings == []
    (turn,) = result.turns
    assert (turn.query, turn.response, turn.system_prompt) == (QUESTION, REPLY, SYSTEM)
    (unit,) = build_corpus(turn).tool_units()
    assert (unit.tool, unit.label, unit.text) == ("book_slot", "book_slot(time=12:00)", TAKEN)
    # beside its spans, each record is an event of the span it was emitted in: the reply has the span's model
    assert turn.model == ("gpt-4o-2024-08-06" if spans else None)


# ----------------------------------------------------------------------------- MCP CallToolResult carriers


def call_tool_result(*, is_error: bool) -> Any:
    from mcp.types import CallToolResult, ImageContent, TextContent

    text = TAKEN if is_error else "Dr. Rao's calendar for today, as an image:"
    return CallToolResult(
        content=[TextContent(type="text", text=text), ImageContent(type="image", data=PNG, mimeType="image/png")],
        isError=is_error,
    )


def chat_carrier(content: Any) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": content},
        {"role": "assistant", "content": REPLY},
    ]


def otel_carrier(response: Any, span_result: str | None = None) -> dict[str, Any]:
    def message(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
        return {"role": role, "parts": list(parts)}

    asked = {"type": "tool_call", "id": "call_1", "name": "book_slot", "arguments": {"time": "12:00"}}
    told = {"type": "tool_call_response", "id": "call_1", **({} if response is None else {"response": response})}
    chat = {
        "name": "chat gpt-4o",
        "attributes": {
            "gen_ai.input.messages": json.dumps(
                [
                    message("user", {"type": "text", "content": QUESTION}),
                    message("assistant", asked),
                    message("tool", told),
                ]
            ),
            "gen_ai.output.messages": json.dumps([message("assistant", {"type": "text", "content": REPLY})]),
        },
    }
    if span_result is None:
        return chat
    tool = {
        "name": "execute_tool book_slot",
        "status": {"status_code": "ERROR"},
        "attributes": {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.result": span_result,
            "error.type": "tool_error",
        },
    }
    return {"spans": [tool, chat]}


CARRIERS: dict[str, Callable[[Any], Any]] = {
    "a-json-string-as-on-the-wire": lambda r: chat_carrier(r.model_dump_json(by_alias=True)),
    "a-json-string-without-aliases": lambda r: chat_carrier(r.model_dump_json()),
    "the-text-part-of-a-tool-message": lambda r: chat_carrier(
        [{"type": "text", "text": r.model_dump_json(by_alias=True)}]
    ),
    "an-object": lambda r: chat_carrier(r.model_dump(mode="json", by_alias=True)),
    "an-otel-tool-call-response": lambda r: otel_carrier(r.model_dump_json(by_alias=True)),
    "an-otel-execute-tool-attribute": lambda r: otel_carrier(None, r.model_dump_json(by_alias=True)),
}


@pytest.mark.parametrize("carrier", list(CARRIERS))
def test_mcp_call_tool_result_as_a_json_string_is_read_with_is_error_and_images_named(carrier: str) -> None:
    result = call_tool_result(is_error=True)
    (turn,) = import_conversation(CARRIERS[carrier](result), conversation_id="mcp").turns
    assert PNG not in turn.model_dump_json()  # never inlined
    corpus = build_corpus(turn)
    (unit,) = corpus.tool_units()
    assert unit.kind == TOOL_ERROR and unit.label == "book_slot(time=12:00) — failed"
    assert unit.text.split("\n") == [TAKEN, "[image (image/png) not inlined]"]
    assert corpus.unscorable == ("image (image/png) returned by tool book_slot",)


def test_an_mcp_result_stored_as_a_json_string_in_a_turn_is_read_by_the_corpus_too() -> None:
    """A stored turn written by hand or by another tool (not through an importer) with the result as text."""
    turn = StoredTurn.model_validate(
        {
            "turn_id": "t",
            "response": REPLY,
            "response_payload": {
                "tool_calls": [
                    {
                        "name": "book_slot",
                        "arguments": {"time": "12:00"},
                        "response": call_tool_result(is_error=True).model_dump_json(),
                    }
                ]
            },
        }
    )
    (unit,) = build_corpus(turn).tool_units()
    assert unit.kind == TOOL_ERROR and unit.text.split("\n") == [TAKEN, "[image (image/png) not inlined]"]


# ----------------------------------------------------------------------------- a tool's image is unscorable


async def test_a_tool_returned_image_is_named_unscorable() -> None:
    result = call_tool_result(is_error=False)
    reply = "Dr. Rao's calendar for today is attached as an image."
    conversation = [*chat_carrier(result.model_dump_json(by_alias=True))[:-1], {"role": "assistant", "content": reply}]
    (turn,) = import_conversation(conversation, conversation_id="mcp").turns
    view = free_tier.gate_view(turn)
    (unit,) = view.corpus.tool_units()
    assert unit.kind != TOOL_ERROR and "[image (image/png) not inlined]" in unit.text
    warning = (
        f"An image (image/png) returned by tool book_slot ({unit.id}) cannot be scored: only its name is in the "
        "source, so a claim drawn from it reads as ungrounded."
    )
    assert view.corpus.unscorable == ("image (image/png) returned by tool book_slot",)
    assert view.corpus.unscorable_warnings() == [warning]
    # said where a reader sees it: the cost gate, the free tier's text, a trace's result
    assert warning in quote_cost(view.corpus, reply, model="m").warnings
    assert f"unscorable: {warning}" in render_text.gate_text(turn, view)

    def judge(request: LLMRequest) -> str:
        if request.purpose == "support":
            return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"})
        return "5"

    traced = await trace_claim(ScriptedLLM(judge), reply, QUESTION, view.corpus)
    assert traced.unscorable == ("image (image/png) returned by tool book_slot",) and warning in traced.warnings


# ----------------------------------------------------------------------------- skipped is a warning


SKIPPED: dict[str, Any] = {
    "openai_chat": [
        {"role": "user", "content": "Hi"},
        {"role": "wizard", "content": "?"},
        {"role": "assistant", "content": "Hello."},
    ],
    "openai_responses": [
        {"role": "user", "content": "Hi"},
        "not an item",
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]},
    ],
    "anthropic": {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "system", "content": "?"},
            {"role": "assistant", "content": "Hello."},
        ],
    },
    "langchain": [
        {"type": "human", "data": {"content": "Hi"}},
        {"type": "wizard", "data": {"content": "?"}},
        {"type": "ai", "data": {"content": "Hello."}},
    ],
    "pydantic_ai": [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "Hi"}]},
        {"kind": "aside", "parts": []},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "Hello."}]},
    ],
    "otel": {
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}, {"note": "?"}],
        "gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text", "content": "Hello."}]}],
    },
    "agentdojo": {
        "suite_name": "banking",
        "messages": [
            {"role": "user", "content": [{"type": "text", "content": "Hi"}]},
            {"role": "wizard", "content": "?"},
            {"role": "assistant", "content": [{"type": "text", "content": "Hello."}], "tool_calls": None},
        ],
    },
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_skipped_message_is_a_warning_not_a_rejection(fmt: str) -> None:
    result = import_conversation(SKIPPED[fmt], fmt, conversation_id="c")
    assert [t.response for t in result.turns] == ["Hello."]
    assert result.errors == []
    (warning,) = result.warnings
    assert warning.where == "c: message 1" and warning.reason.endswith("skipped")


def test_a_message_of_the_wrong_shape_is_still_a_rejection() -> None:
    chat = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": "Working.", "tool_calls": "not a list"},
        {"role": "assistant", "content": "Done."},
    ]
    result = import_conversation(chat, "openai_chat", conversation_id="c")
    assert [e.where for e in result.errors] == ["c: message 1"] and result.warnings == []
