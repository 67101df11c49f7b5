"""Failed calls are evidence too (issue 29, item 4, the importers): a failed or denied call keeps the tool's own
error text, which becomes the source of the sentences and actions after it (kind ``tool_error``) and, in later
turns, history marked as an error. Histories come from the libraries themselves — pydantic-ai, LangGraph's
``ToolNode``, the OpenAI Agents SDK and the OpenTelemetry SDK, each run with a scripted model (no network) and a
tool that really fails — or, where a format has no library here, are written as the format's documentation
shows. The free tier (no model) finds the sources."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import TOOL_ERROR, Layer, Unit
from estimator.params import Params
from provenance_api.importers import detect_format, import_conversation
from provenance_api.providers import free_tier

TAKEN = "Booking failed: the 12:00 slot was already taken by another patient. The next free slot is 12:30."
SENTENCE = "The 12:00 slot was already taken by another patient."
REPLY = f"{SENTENCE} I booked you at 12:30 with Dr. Rao instead."
BOOKED = "Booked: 12:30 with Dr. Rao, room 4."


def tool_units(turn: StoredTurn) -> list[Unit]:
    return list(build_corpus(turn).tool_units())


def pydantic_ai_booking() -> Any:
    """A real pydantic-ai run: the tool refuses 12:00 (``ModelRetry``: a return whose outcome is ``retried``, or a
    retry prompt in older versions), the agent books 12:30 and says why. Returns the messages as pydantic-ai
    serialises them."""
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    script = [
        ModelResponse(parts=[ToolCallPart("book_slot", {"time": "12:00"}, tool_call_id="c1")]),
        ModelResponse(parts=[ToolCallPart("book_slot", {"time": "12:30"}, tool_call_id="c2")]),
        ModelResponse(parts=[TextPart(REPLY)]),
    ]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return script[sum(isinstance(m, ModelResponse) for m in messages)]

    agent = Agent(FunctionModel(respond), system_prompt="You book appointments for the clinic.")

    @agent.tool_plain
    def book_slot(time: str) -> str:
        """Book a slot with Dr. Rao."""
        if time == "12:00":
            raise ModelRetry(TAKEN)
        return BOOKED

    run = agent.run_sync("Book me the 12:00 slot with Dr. Rao.")
    assert run.output == REPLY
    return json.loads(run.all_messages_json())


def test_a_sentence_caused_by_a_tools_error_message_has_that_error_as_its_source() -> None:
    stored = pydantic_ai_booking()
    (turn,) = import_conversation(stored, conversation_id="clinic").turns
    view = free_tier.gate_view(turn)
    error = next(u for u in view.corpus.tool_units() if u.kind == TOOL_ERROR)
    assert (error.label, error.text) == ("book_slot(time=12:00) — failed", TAKEN)

    (gate,) = [g for g in view.report.segments if g.segment.text == SENTENCE]
    assert gate.status.value == "quoted" and [c.source_id for c in gate.citations] == [error.id]
    # the action after it: 12:30 is read from the error text, which came back before the call
    actions = free_tier.actions_out(turn.turn_id, turn, view)
    rebooked = next(a for a in actions.actions if a.arguments == {"time": "12:30"})
    assert [s.source_id for s in rebooked.argument_sources] == [error.id]
    # the seed's Algorithm 1 (failed calls excluded) has no source for the sentence
    seed = free_tier.gate_view(turn, Params(failed_calls_as_sources=False))
    (unsourced,) = [g for g in seed.report.segments if g.segment.text == SENTENCE]
    assert unsourced.status.value != "quoted" and unsourced.citations == ()


def test_a_failed_return_is_history_marked_as_an_error_in_later_turns() -> None:
    first = pydantic_ai_booking()
    later = [
        *first,
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "Which room?"}]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "Room 4."}]},
    ]
    _, turn = import_conversation(later, conversation_id="clinic").turns
    failed = [m for m in turn.request_payload.messages if (m.model_extra or {}).get("is_error")]
    assert [(m.role, m.name, m.content) for m in failed] == [("tool", "book_slot", TAKEN)]
    (error,) = [u for u in build_corpus(turn).in_layer(Layer.HISTORY) if u.kind == TOOL_ERROR]
    assert (error.label, error.text) == ("tool error · book_slot · 3 turn(s) ago", TAKEN)


def otel_spans(*, tool_message_captured: bool) -> list[dict[str, Any]]:
    """Spans the OpenTelemetry SDK itself wrote (``ReadableSpan.to_json``): a chat span, an ``execute_tool`` span
    whose tool raised (status ERROR and an ``exception`` event), and the chat span that read the failure."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("clinic-agent")

    def message(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
        return {"role": role, "parts": list(parts)}

    user = message("user", {"type": "text", "content": "Book me the 12:00 slot with Dr. Rao."})
    asking = {"type": "tool_call", "id": "call_1", "name": "book_slot", "arguments": {"time": "12:00"}}
    asked = message("assistant", asking)
    response = {"response": f"Error: {TAKEN}"} if tool_message_captured else {}
    told = message("tool", {"type": "tool_call_response", "id": "call_1", **response})

    def chat(inputs: list[dict[str, Any]], output: dict[str, Any]) -> None:
        with tracer.start_as_current_span("chat gpt-4o") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.input.messages", json.dumps(inputs))
            span.set_attribute("gen_ai.output.messages", json.dumps([output]))

    chat([user], asked)
    with pytest.raises(LookupError), tracer.start_as_current_span("execute_tool book_slot") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("gen_ai.tool.call.id", "call_1")
        raise LookupError(TAKEN)
    chat([user, asked, told], message("assistant", {"type": "text", "content": REPLY}))
    return [json.loads(s.to_json()) for s in exporter.get_finished_spans()]


@pytest.mark.parametrize(
    ("captured", "text"),
    [(True, f"Error: {TAKEN}"), (False, f"LookupError: {TAKEN}")],
    ids=["the-return-the-agent-read", "the-spans-exception-when-no-return-was-captured"],
)
def test_a_failed_tools_own_error_text_is_kept(captured: bool, text: str) -> None:
    spans = otel_spans(tool_message_captured=captured)
    assert spans[1]["status"]["status_code"] == "ERROR"
    result = import_conversation(spans, conversation_id="otel")
    (turn,) = result.turns
    (error,) = tool_units(turn)
    assert (error.kind, error.label, error.text) == (TOOL_ERROR, "book_slot(time=12:00) — failed", text)
    assert "execute_tool failed" not in turn.model_dump_json()
    assert result.errors == [] and result.warnings == []


def test_a_langgraph_tool_node_error_message_is_a_tool_error_with_its_text() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    @tool
    def book_slot(time: str) -> str:
        """Book a slot with Dr. Rao."""
        raise LookupError(TAKEN)

    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([book_slot], handle_tool_errors=True))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    asked = AIMessage(content="", tool_calls=[{"name": "book_slot", "args": {"time": "12:00"}, "id": "c1"}])
    state = graph.compile().invoke({"messages": [HumanMessage("Book me the 12:00 slot with Dr. Rao."), asked]})
    told = state["messages"][-1]
    assert told.status == "error"
    messages = [*state["messages"], AIMessage(content=REPLY)]
    (turn,) = import_conversation(messages_to_dict(messages), conversation_id="lg").turns
    (error,) = tool_units(turn)
    assert (error.kind, error.text) == (TOOL_ERROR, told.content) and TAKEN in error.text


def test_a_denied_call_from_a_real_pydantic_ai_run_is_history_with_its_denial() -> None:
    from pathlib import Path

    real = Path(__file__).resolve().parents[1] / "data/real/pydantic_ai/tool_approval_denied.json"
    (turn,) = import_conversation(json.loads(real.read_text(encoding="utf-8")), conversation_id="real").turns
    history = build_corpus(turn).in_layer(Layer.HISTORY)
    assert [(u.kind, u.label, u.text) for u in history if u.kind == TOOL_ERROR] == [
        ("tool_error", "tool error · delete_file · 2 turn(s) ago", "Deleting files is not allowed")
    ]
    assert "Attempted to delete __init__.py" in turn.response  # what the denial caused


def test_an_agents_sdk_tool_error_string_is_kept_as_the_return_the_agent_read(tmp_path: Any) -> None:
    """The Agents SDK sends a failed tool's error string back as its ``function_call_output`` (the item has no
    failure field): that string, as written by the tool's error function, is the source."""
    from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)
    outputs: list[Any] = [
        ResponseFunctionToolCall(
            type="function_call", name="book_slot", arguments='{"time": "12:00"}', call_id="c1", id="fc_1"
        ),
        ResponseOutputMessage(
            id="m1",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=REPLY, annotations=[])],
        ),
    ]

    class Scripted(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ModelResponse(output=[outputs.pop(0)], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool(failure_error_function=lambda ctx, error: f"Error: {error}")
    def book_slot(time: str) -> str:
        """Book a slot with Dr. Rao."""
        raise LookupError(TAKEN)

    session = SQLiteSession("clinic", str(tmp_path / "agent.db"))
    agent = Agent(name="clinic", model=Scripted(), tools=[book_slot])
    asyncio.run(Runner.run(agent, "Book me the 12:00 slot with Dr. Rao.", session=session))
    items = asyncio.run(session.get_items())
    session.close()
    assert detect_format(items) == "openai_responses"
    (turn,) = import_conversation(items, conversation_id="oa").turns
    (unit,) = tool_units(turn)
    assert (unit.tool, unit.text) == ("book_slot", f"Error: {TAKEN}")


@pytest.mark.parametrize(
    ("fmt", "conversation"),
    [
        (
            "openai_responses",
            [
                {"role": "user", "content": "Patch the README."},
                {"type": "apply_patch_call", "call_id": "p1", "operation": {"type": "update_file", "path": "README"}},
                {"type": "apply_patch_call_output", "call_id": "p1", "status": "failed", "output": TAKEN},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": REPLY}]},
            ],
        ),
        (
            "anthropic",
            {
                "messages": [
                    {"role": "user", "content": "Book me the 12:00 slot."},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "book_slot", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": TAKEN, "is_error": True}],
                    },
                    {"role": "assistant", "content": REPLY},
                ]
            },
        ),
    ],
    ids=["responses-call-output-status-failed", "anthropic-is-error"],
)
def test_the_formats_failure_marks_keep_the_error_text(fmt: str, conversation: Any) -> None:
    (turn,) = import_conversation(conversation, fmt, conversation_id="c").turns
    (error,) = tool_units(turn)
    assert (error.kind, error.text) == (TOOL_ERROR, TAKEN) and error.label.endswith(" — failed")
