"""Every message kept in its turn: text an agent sends together with its tool calls ("No problem, I can look
that up…") is the agent's interim reply, kept with its own turn and in the history of the later ones; and an
Anthropic reply streamed as many text blocks is one text, joined as the model produced it. Histories come from
LangGraph itself (a real graph with a SQLite checkpointer), the τ-bench transcripts and Anthropic files other
projects wrote (tests/data)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict
from test_agent_libraries import ToolLog, langchain_tool, react_graph, scripted

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Layer
from provenance_api.importers import import_conversation

DATA = Path(__file__).resolve().parents[2] / "tests/data"
INTERIM = "No problem, I can look up the weather in Oslo for you."


def interim_texts(turn: StoredTurn) -> list[str]:
    """The agent's own texts among the turn's messages, before its reply."""
    return [
        str(part.content)
        for message in turn.model_messages
        for part in message.parts
        if part.part_kind == "text" and part.content != turn.response
    ]


def history_texts(turn: StoredTurn, role: str = "assistant") -> list[str]:
    return [str(m.content) for m in turn.request_payload.messages if m.role == role and m.content]


def test_langgraph_text_sent_with_tool_calls_is_kept_with_its_turn(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    log = ToolLog()
    conn = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
    replies = [
        AIMessage(content=INTERIM, tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}]),
        AIMessage(content="Snow in Oslo."),
        AIMessage(content="You are welcome."),
    ]
    graph = react_graph(scripted(*replies), [langchain_tool(log)], SqliteSaver(conn))
    config: Any = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"messages": [HumanMessage("Weather in Oslo?")]}, config)
    state = graph.invoke({"messages": [HumanMessage("Thanks!")]}, config)
    conn.close()
    assert state["messages"][1].content == INTERIM and state["messages"][1].tool_calls

    turns = import_conversation(
        {"messages": messages_to_dict(state["messages"])}, "langchain", conversation_id="t1"
    ).turns
    oslo, thanks = turns
    assert (oslo.response, interim_texts(oslo)) == ("Snow in Oslo.", [INTERIM])
    assert [c.response for c in oslo.response_payload.tool_calls] == log.returns  # the call is still the turn's
    assert INTERIM not in oslo.response
    assert history_texts(thanks) == [INTERIM, "Snow in Oslo."]  # history for the next turn
    corpus = build_corpus(oslo)
    assert [u.text for u in corpus.in_layer(Layer.TOOLS)] == log.returns  # the interim text is no evidence
    assert INTERIM in [u.text for u in build_corpus(thanks).in_layer(Layer.HISTORY)]


def test_tau_bench_text_sent_with_tool_calls_is_kept_with_its_turn() -> None:
    data = json.loads((DATA / "tau-bench/airline-gpt-4o-dev.json").read_text(encoding="utf-8"))
    conversation = next(c for c in data if (c["task_id"], c["trial"]) == (5, 0))
    traj = conversation["traj"]
    said = [m for m in traj if m["role"] == "assistant" and m.get("tool_calls") and (m.get("content") or "").strip()]
    assert said and said[0]["content"].startswith("No problem, I can look up")
    turns = import_conversation(conversation, "openai-chat", conversation_id="tau-5-0").turns
    kept = [text for turn in turns for text in interim_texts(turn)]
    assert [m["content"] for m in said] == kept  # every one, in its own turn, in order
    owner = next(t for t in turns if said[0]["content"] in interim_texts(t))
    assert owner.response_payload.tool_calls and said[0]["content"] not in owner.response
    later = turns[turns.index(owner) + 1]
    assert said[0]["content"] in history_texts(later)
    for turn in turns:
        build_corpus(turn)


def anthropic_turns(name: str) -> list[StoredTurn]:
    obj = json.loads((DATA / "real/anthropic" / name).read_text(encoding="utf-8"))
    return import_conversation(obj, "anthropic", conversation_id=name).turns


def reply_blocks(name: str) -> list[list[str]]:
    """The text blocks of each assistant message of a real Anthropic file, as the model sent them."""
    obj = json.loads((DATA / "real/anthropic" / name).read_text(encoding="utf-8"))
    out: list[list[str]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("role") == "assistant" and isinstance(value.get("content"), list):
                out.append([b["text"] for b in value["content"] if isinstance(b, dict) and b.get("type") == "text"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(obj)
    return out


def test_anthropic_text_blocks_are_joined_as_the_model_streamed_them() -> None:
    blocks = [b for b in reply_blocks("web_search_tool.json") if len(b) > 1]
    assert blocks and any(b.strip() in ("-", "") for run in blocks for b in run)  # "\n- " is a block of its own
    turns = anthropic_turns("web_search_tool.json")
    assert [t.response for t in turns] == ["".join(run) for run in blocks]
    assert "**Current Conditions:**\n- Temperature: 66°F with clear skies\n- Wind:" in turns[0].response
    for turn in turns:
        assert "\n\n- \n\n" not in turn.response and not any(
            line.strip() in ("-", ".") for line in turn.response.splitlines()
        )


def test_anthropic_text_sent_with_tool_calls_is_kept_with_its_turn() -> None:
    first, *_ = [b for b in reply_blocks("parallel_tool_calls.json") if b]
    turns = anthropic_turns("parallel_tool_calls.json")
    assert first[0].startswith("I'll help you find out who is the youngest")
    assert interim_texts(turns[0]) == ["".join(first)]
    assert len(turns[0].response_payload.tool_calls) == 4 and first[0] not in turns[0].response
