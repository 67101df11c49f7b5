"""Evidence envelopes read from what each history format really carries, written by the libraries themselves:
pydantic-ai's part timestamps, an OpenTelemetry SDK's ``execute_tool`` span (its end time and attributes), an MCP
``CallToolResult``'s ``_meta`` and embedded resource, a hosted MCP call's server (OpenAI Responses ``server_label``,
Anthropic ``server_name``). A format that records no time (LangChain's message dicts) reads "not recorded"."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from estimator.corpus.build import build_corpus
from estimator.corpus.envelope import NOT_RECORDED, shown_time
from estimator.corpus.turn import StoredTurn
from estimator.custody.ages import answer_time, source_ages
from provenance_api.importers import import_conversation

BALANCE = "Balance: 1,200.00 EUR"


def only_turn(obj: Any, fmt: str | None = None) -> StoredTurn:
    result = import_conversation(obj, conversation_id="env", format=fmt)
    assert result.errors == []
    return result.turns[-1]


def test_pydantic_ai_part_timestamps_are_the_return_the_call_and_the_answer_times() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart("You have 1,200.00 EUR.")])
        return ModelResponse(parts=[ToolCallPart("get_balance", {}, tool_call_id="c1")])

    agent = Agent(FunctionModel(respond))

    @agent.tool_plain
    def get_balance() -> str:
        return BALANCE

    run = agent.run_sync("What is my balance?")
    parts = [p for m in run.all_messages() for p in m.parts]
    returned = next(p for p in parts if isinstance(p, ToolReturnPart)).timestamp
    called, answered = (m.timestamp for m in run.all_messages() if isinstance(m, ModelResponse))

    turn = only_turn(json.loads(run.all_messages_json()))
    (unit,) = build_corpus(turn).tool_units()
    assert unit.envelope.observed_at == returned
    assert (unit.envelope.tool, unit.envelope.custody, unit.envelope.server) == ("get_balance", "history", None)
    assert turn.created_at == answered and answer_time(turn) == answered
    from estimator.actions.targets import extract_actions

    (action,) = extract_actions(turn)
    assert action.produced_at == called


def test_an_otel_execute_tool_span_gives_the_return_time_server_and_principal() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    asked = {"type": "tool_call", "id": "c1", "name": "get_balance", "arguments": {}}
    told = {"type": "tool_call_response", "id": "c1", "response": BALANCE}
    conversation = [
        {"role": "user", "parts": [{"type": "text", "content": "What is my balance?"}]},
        {"role": "assistant", "parts": [asked]},
        {"role": "tool", "parts": [told]},
    ]
    with tracer.start_as_current_span(
        "execute_tool get_balance",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_balance",
            "gen_ai.tool.call.id": "c1",
            "server.address": "bank.example",
            "mcp.resource.uri": "bank://accounts/42",
            "enduser.id": "alice",
        },
    ):
        pass
    with tracer.start_as_current_span(
        "chat gpt-4o",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps(conversation),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "You have 1,200.00 EUR."}]}]
            ),
        },
    ):
        pass
    spans = exporter.get_finished_spans()
    tool_span = next(s for s in spans if s.name.startswith("execute_tool"))
    assert tool_span.end_time is not None
    ended = datetime.fromtimestamp(tool_span.end_time / 1e9, tz=UTC)

    turn = only_turn([json.loads(s.to_json()) for s in spans])
    (unit,) = build_corpus(turn).tool_units()
    envelope = unit.envelope
    assert envelope.observed_at is not None and abs((envelope.observed_at - ended).total_seconds()) < 1e-3
    assert (envelope.server, envelope.resource, envelope.principal) == (
        "bank.example",
        "bank://accounts/42",
        "alice",
    )
    assert envelope.tenant is None and envelope.scope is None  # the span has none: not recorded


def test_an_mcp_call_tool_results_meta_and_embedded_resource_are_read() -> None:
    from mcp.types import CallToolResult, EmbeddedResource, TextContent, TextResourceContents

    result = CallToolResult(
        content=[
            TextContent(type="text", text=BALANCE),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="bank://accounts/42", text="EUR", mimeType="text/plain"),
            ),
        ],
        _meta={"principal": "alice", "tenant": "acme", "scope": "accounts:read", "observed_at": "2026-03-02T09:00:00Z"},
    )
    for dumped in (result.model_dump_json(by_alias=True), result.model_dump_json()):
        chat = [
            {"role": "user", "content": "What is my balance?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_balance", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": dumped},
            {"role": "assistant", "content": "You have 1,200.00 EUR."},
        ]
        (unit,) = build_corpus(only_turn(chat, "openai_chat")).tool_units()
        envelope = unit.envelope
        assert (envelope.principal, envelope.tenant, envelope.scope, envelope.resource) == (
            "alice",
            "acme",
            "accounts:read",
            "bank://accounts/42",
        )
        assert shown_time(envelope.observed_at) == "2026-03-02T09:00:00+00:00"


def test_hosted_mcp_calls_name_their_server_openai_responses_and_anthropic() -> None:
    from anthropic.types.beta import BetaMCPToolResultBlock, BetaMCPToolUseBlock
    from openai.types.responses.response_output_item import McpCall

    call = McpCall(id="mcp_1", arguments="{}", name="get_balance", server_label="bank", type="mcp_call", output=BALANCE)
    response = {
        "created_at": 1772442000,
        "model": "gpt-4.1",
        "input": [{"type": "message", "role": "user", "content": "What is my balance?"}],
        "output": [
            call.model_dump(mode="json"),
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "1,200.00 EUR."}]},
        ],
    }
    (unit,) = build_corpus(only_turn(response, "openai_responses")).tool_units()
    assert unit.envelope.server == "bank"
    assert unit.envelope.observed_at == datetime.fromtimestamp(1772442000, tz=UTC)  # the response's created_at

    use = BetaMCPToolUseBlock(id="t1", input={}, name="get_balance", server_name="bank", type="mcp_tool_use")
    got = BetaMCPToolResultBlock(content=BALANCE, is_error=False, tool_use_id="t1", type="mcp_tool_result")
    messages = [
        {"role": "user", "content": "What is my balance?"},
        {
            "role": "assistant",
            "content": [
                use.model_dump(mode="json"),
                got.model_dump(mode="json"),
                {"type": "text", "text": "1,200.00 EUR."},
            ],
        },
    ]
    (unit,) = build_corpus(only_turn(messages, "anthropic")).tool_units()
    assert (unit.envelope.server, unit.envelope.observed_at) == ("bank", None)  # Anthropic messages carry no time


def test_a_format_without_times_reads_not_recorded() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict

    messages = messages_to_dict(
        [
            HumanMessage("What is my balance?"),
            AIMessage("", tool_calls=[{"name": "get_balance", "args": {}, "id": "c1"}]),
            ToolMessage(BALANCE, tool_call_id="c1"),
            AIMessage("You have 1,200.00 EUR."),
        ]
    )
    turn = only_turn(messages, "langchain")
    corpus = build_corpus(turn)
    (unit,) = corpus.tool_units()
    assert unit.envelope.observed_at is None and unit.envelope.principal is None
    assert shown_time(unit.envelope.observed_at) == NOT_RECORDED
    assert [a.age_seconds for a in source_ages(corpus.units, answer_time(turn))] == [None] * len(corpus.units)
    assert "timestamp" not in turn.model_dump_json()  # nothing invented


def test_instruction_rules_are_derived_from_the_whole_prompt() -> None:
    payments = " ".join(f"Payment rule {i}: never pay more than {i}000 EUR without asking." for i in range(12))
    tone = " ".join(f"Tone rule {i}: be brief and polite to customer {i}." for i in range(12))
    prompt = f"# Payments\n{payments}\n\n# Tone\n{tone}"
    turn = StoredTurn.model_validate(
        {"turn_id": "t", "response": "Ok.", "system_prompt": prompt, "system_prompt_versioned": True}
    )
    rules = build_corpus(turn).in_layer(build_corpus(turn).layers_present()[0])
    from estimator.corpus.units import sha256_hex

    assert len(rules) == 2
    assert {u.envelope.derived_from for u in rules} == {(f"system_prompt:{sha256_hex(prompt)}",)}
