"""History written by the agent libraries themselves, imported: pydantic-ai, LangChain, the OpenAI Agents SDK
and LangGraph, each run with a scripted model (no network) and real tools. What each library stores is
dumped with its own API and imported; every expectation comes from the run (what the user asked, what each
tool returned, the instructions given), never from our output."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, messages_to_dict
from langchain_core.tools import tool

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Layer
from provenance_api.importers import detect_format, import_conversation

CITIES = {"Paris": "Sunny, 21 C", "Oslo": "Snow, -3 C"}


def layer(turn: StoredTurn, which: Layer) -> list[tuple[str, str]]:
    """(tool or role, text) of the turn's units in one layer."""
    return [(u.tool, u.text) for u in build_corpus(turn).in_layer(which)]


def history_roles(turn: StoredTurn) -> list[str]:
    """The roles of the request messages before the turn's own query."""
    return [m.role for m in turn.request_payload.messages[:-1]]


class ToolLog:
    """What the real tools returned, in order."""

    def __init__(self) -> None:
        self.returns: list[str] = []

    def weather(self, city: str) -> str:
        value = f"{CITIES[city]} in {city}"
        self.returns.append(value)
        return value


# --- pydantic-ai ---------------------------------------------------------------------------------------


def test_pydantic_ai_function_model_history_imports_with_tool_returns_and_instructions() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    log = ToolLog()
    asked = iter(["Paris", "Oslo"])

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(f"Forecast: {returns[0].content}.")])
        return ModelResponse(parts=[ToolCallPart("weather", {"city": next(asked)}, tool_call_id="c1")])

    agent = Agent(FunctionModel(respond), system_prompt="You are a weather desk.", instructions="Be brief.")
    agent.tool_plain(log.weather)
    first = agent.run_sync("Weather in Paris?")
    second = agent.run_sync("And in Oslo?", message_history=first.all_messages())
    stored = json.loads(second.all_messages_json())

    assert detect_format(stored) == "pydantic_ai"
    result = import_conversation(stored, conversation_id="pyd")
    assert result.errors == []
    turns = result.turns
    assert [t.query for t in turns] == ["Weather in Paris?", "And in Oslo?"]
    assert [t.response for t in turns] == [first.output, second.output]
    assert [layer(t, Layer.TOOLS) for t in turns] == [[("weather", r)] for r in log.returns]
    assert all(
        t.system_prompt and "You are a weather desk." in t.system_prompt and "Be brief." in t.system_prompt
        for t in turns
    )
    # the second turn carries the first run as history: its question, its tool's return, its answer
    history = layer(turns[1], Layer.HISTORY)
    assert [role for role, _ in history] == ["user", "tool", "assistant"]
    for said, (_, text) in zip(["Weather in Paris?", log.returns[0], first.output], history, strict=True):
        assert said in text
    assert history_roles(turns[0]) == []


# --- LangChain -----------------------------------------------------------------------------------------


class ToolCallingFake(GenericFakeChatModel):
    """LangChain's fake chat model, accepting tools like a real one (the script decides the calls)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def scripted(*replies: AIMessage) -> ToolCallingFake:
    return ToolCallingFake(messages=iter(replies))


def call(city: str, call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "weather", "args": {"city": city}, "id": call_id}])


def langchain_tool(log: ToolLog) -> Any:
    @tool
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return log.weather(city)

    return weather


def test_langchain_messages_to_dict_history_imports_with_parallel_tool_calls() -> None:
    log = ToolLog()
    weather = langchain_tool(log)
    model = scripted(
        AIMessage(
            content="",
            tool_calls=[
                {"name": "weather", "args": {"city": "Paris"}, "id": "a"},
                {"name": "weather", "args": {"city": "Oslo"}, "id": "b"},
            ],
        ),
        AIMessage(content="Paris is sunny; Oslo has snow."),
    )
    messages: list[BaseMessage] = [SystemMessage("You compare forecasts."), HumanMessage("Paris or Oslo today?")]
    while True:
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            break
        messages.extend(weather.invoke(tc) for tc in reply.tool_calls)  # a ToolCall in, a ToolMessage out
    stored = messages_to_dict(messages)

    assert detect_format(stored) == "langchain"
    result = import_conversation(stored, conversation_id="lc")
    assert result.errors == []
    (turn,) = result.turns
    assert turn.query == "Paris or Oslo today?" and turn.response == messages[-1].content
    assert sorted(text for _, text in layer(turn, Layer.TOOLS)) == sorted(log.returns) and len(log.returns) == 2
    assert turn.system_prompt == "You compare forecasts."


# --- OpenAI Agents SDK ---------------------------------------------------------------------------------


def run_agent(db: Path, log: ToolLog, runs: list[tuple[str, str, str]]) -> list[str]:
    """Runs of a real Agent with a real tool, each ``(session id, question, city)`` on that SQLiteSession of
    ``db``; the scripted model calls the tool for the city, then answers. Returns the final outputs."""
    from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)

    def message(text: str, n: int) -> ResponseOutputMessage:
        return ResponseOutputMessage(
            id=f"msg_{n}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )

    def fn_call(city: str, n: int) -> ResponseFunctionToolCall:
        return ResponseFunctionToolCall(
            type="function_call",
            name="weather",
            arguments=json.dumps({"city": city}),
            call_id=f"call_{n}",
            id=f"fc_{n}",
            status="completed",
        )

    class Scripted(Model):
        def __init__(self, outputs: list[Any]) -> None:
            self.outputs = outputs

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ModelResponse(output=[self.outputs.pop(0)], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return log.weather(city)

    script: list[Any] = []
    for n, (_, _, city) in enumerate(runs):
        script += [fn_call(city, n), message(f"The desk says: {CITIES[city].lower()} in {city}.", n)]
    agent = Agent(name="desk", instructions="You are a weather desk.", model=Scripted(script), tools=[weather])

    async def main() -> list[str]:
        outputs = []
        for session_id, question, _ in runs:
            session = SQLiteSession(session_id, str(db))
            outputs.append(str((await Runner.run(agent, question, session=session)).final_output))
            session.close()
        return outputs

    return asyncio.run(main())


def session_items(db: Path, session_id: str) -> list[Any]:
    from agents import SQLiteSession

    session = SQLiteSession(session_id, str(db))
    try:
        return list(asyncio.run(session.get_items()))
    finally:
        session.close()


def test_openai_agents_session_items_import_as_responses_turns(tmp_path: Path) -> None:
    log = ToolLog()
    db = tmp_path / "agent.db"
    outputs = run_agent(db, log, [("user-42", "Weather in Paris?", "Paris"), ("user-42", "And Oslo?", "Oslo")])
    items = session_items(db, "user-42")

    assert detect_format(items) == "openai_responses"
    result = import_conversation(items, conversation_id="oa")
    assert result.errors == []
    turns = result.turns
    assert [t.query for t in turns] == ["Weather in Paris?", "And Oslo?"]
    assert [t.response for t in turns] == outputs
    assert [[text for _, text in layer(t, Layer.TOOLS)] for t in turns] == [[r] for r in log.returns]
    # the session keeps no instructions (they are the Agent's code), so none are claimed
    assert all(t.system_prompt is None for t in turns) and not layer(turns[0], Layer.INSTRUCTIONS)
    user_items = [i for i in items if i.get("role") == "user"]
    assert history_roles(turns[1]).count("user") == len(user_items) - 1
    # what the SDK wrote to its own table is exactly what it hands back
    with sqlite3.connect(db) as conn:
        rows = [json.loads(r[0]) for r in conn.execute("SELECT message_data FROM agent_messages ORDER BY id")]
    assert rows == items


# --- LangGraph -----------------------------------------------------------------------------------------


def react_graph(model: ToolCallingFake, tools: list[Any], checkpointer: Any) -> Any:
    """A ReAct graph: agent node → tools node (LangGraph's ToolNode) → agent, until no tool call."""
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


@pytest.fixture
def sqlite_saver(tmp_path: Path) -> Iterator[Any]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
    yield SqliteSaver(conn)
    conn.close()


def test_langgraph_checkpointed_state_imports_with_tool_returns_and_history(sqlite_saver: Any) -> None:
    log = ToolLog()
    model = scripted(
        call("Paris", "c1"),
        AIMessage(content="Sunny in Paris."),
        call("Oslo", "c2"),
        AIMessage(content="Snowing in Oslo."),
    )
    graph = react_graph(model, [langchain_tool(log)], sqlite_saver)
    config = {"configurable": {"thread_id": "thread-1"}}
    graph.invoke({"messages": [SystemMessage("You are a weather desk."), HumanMessage("Weather in Paris?")]}, config)
    graph.invoke({"messages": [HumanMessage("And Oslo?")]}, config)
    saved = sqlite_saver.get_tuple(config).checkpoint["channel_values"]["messages"]  # what the checkpointer holds
    stored = messages_to_dict(saved)

    result = import_conversation(stored, conversation_id="lg")
    assert result.errors == []
    turns = result.turns
    assert [t.query for t in turns] == ["Weather in Paris?", "And Oslo?"]
    assert [t.response for t in turns] == [m.content for m in saved if m.type == "ai" and m.content]
    assert [[text for _, text in layer(t, Layer.TOOLS)] for t in turns] == [[r] for r in log.returns]
    assert all(t.system_prompt == "You are a weather desk." for t in turns)
    earlier = saved[1 : [m.content for m in saved].index("And Oslo?")]  # after the system message
    assert history_roles(turns[1]) == [{"human": "user", "ai": "assistant", "tool": "tool"}[m.type] for m in earlier]
