"""Recorded times from the stores the connectors read: a LangGraph checkpoint's ``ts`` and an Agents SDK session
row's ``created_at`` become the gate's ``observed_at`` on tool returns, the actions' ``produced_at`` and the answer's
time, with the sources' ages between them; a store without a time says ``not recorded``. Every store is written by
the real library, and every expected time is read back through the library's own API or the table the SDK wrote,
never through the connector under test."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from support.api_server import InProcessApi
from support.services import create_database
from test_agent_libraries import ToolLog, call, langchain_tool, react_graph, run_agent, scripted

TENANT = "acme"
QUESTIONS = ("Weather in Paris?", "And Oslo?")


def gated(tmp_path: Path, url: str, fmt: str, *queries: str) -> list[dict[str, Any]]:
    """Import the store at ``url`` through the API (a configured source) and return the actions answer
    (``GET /v1/turns/{id}/actions``: sources with envelopes and ages, actions with ``produced_at``) of the turn
    asking each of ``queries``, in that order."""
    sources = {"desk": {"url": url, "format": fmt, "tenants": [TENANT]}}
    by_query: dict[str, dict[str, Any]] = {}
    with (
        InProcessApi(tmp_path / "data", warm_up=False, history_sources=sources) as srv,
        srv.client(srv.key(TENANT, "ann")) as api,
    ):
        done = api.post("/v1/imports/sources/desk").json()
        assert (done["rejected"], done["imported"]) == (0, len(queries)), done
        for item in api.get("/v1/turns").json()["items"]:
            ident = quote(item["turn_id"], safe="")
            answer = api.get(f"/v1/turns/{ident}/actions")
            assert answer.status_code == 200, answer.text
            by_query[api.get(f"/v1/turns/{ident}").json()["turn"]["query"]] = answer.json()
    return [by_query[q] for q in queries]


def when(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def returns(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in answer["sources"] if s["layer"] == "tools"]


# --- LangGraph checkpoints -------------------------------------------------------------------------------------


@pytest.fixture
def thread(tmp_path: Path) -> Iterator[tuple[Path, dict[str, datetime], list[Any], ToolLog]]:
    """A LangGraph thread of two turns (a call, its return, the answer; twice) checkpointed by ``SqliteSaver``:
    the file, the first-seen ``ts`` of each message id as LangGraph's own API lists the checkpoints, the final
    messages and the tool log."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = tmp_path / "checkpoints.db"
    log = ToolLog()
    replies = [call("Paris", "c1"), AIMessage("Sunny in Paris."), call("Oslo", "c2"), AIMessage("Snow in Oslo.")]
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    graph = react_graph(scripted(*replies), [langchain_tool(log)], saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"messages": [HumanMessage(QUESTIONS[0])]}, config)
    messages = graph.invoke({"messages": [HumanMessage(QUESTIONS[1])]}, config)["messages"]
    first: dict[str, datetime] = {}
    for saved in reversed(list(saver.list(config))):  # oldest first
        for message in saved.checkpoint["channel_values"].get("messages", []):
            first.setdefault(message.id, datetime.fromisoformat(saved.checkpoint["ts"]))
    conn.close()
    yield path, first, list(messages), log


def test_langgraph_times_are_those_of_the_checkpoint_that_first_holds_each_message(
    tmp_path: Path, thread: tuple[Path, dict[str, datetime], list[Any], ToolLog]
) -> None:
    path, first, messages, log = thread
    human1, call1, tool1, answer1, human2, call2, tool2, answer2 = messages
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"]
    assert len(set(first.values())) == len(first)  # every message came in a checkpoint of its own

    paris, oslo = gated(tmp_path, f"sqlite:///{path}", "langgraph-sqlite", *QUESTIONS)
    for answer, called, returned, final, text in ((paris, call1, tool1, answer1, 0), (oslo, call2, tool2, answer2, 1)):
        (source,) = returns(answer)
        assert when(source["envelope"]["observed_at"]) == first[returned.id]
        assert when(answer["answered_at"]) == first[final.id]
        (action,) = answer["actions"]
        assert when(action["produced_at"]) == first[called.id]
        age = (first[final.id] - first[returned.id]).total_seconds()
        assert source["age_seconds"] == pytest.approx(age) and age > 0
        assert first[called.id] < first[returned.id] < first[final.id]
        assert returned.content == log.returns[text]

    # in the second turn the first turn is history: each message keeps the time it was first written, not the
    # time of the later checkpoints that still hold it
    history = {s["tool"]: when(s["envelope"]["observed_at"]) for s in oslo["sources"] if s["layer"] == "history"}
    assert history["user"] == first[human1.id]
    assert history["tool"] == first[tool1.id]
    assert history["assistant"] == first[answer1.id]
    assert first[human2.id] > first[answer1.id]


def test_a_langgraph_thread_without_its_earlier_checkpoints_says_not_recorded(
    tmp_path: Path, thread: tuple[Path, dict[str, datetime], list[Any], ToolLog]
) -> None:
    path = thread[0]
    with sqlite3.connect(path) as conn:  # pruned: only the newest checkpoint is kept
        conn.execute("DELETE FROM checkpoints WHERE checkpoint_id < (SELECT MAX(checkpoint_id) FROM checkpoints)")
    for answer in gated(tmp_path, f"sqlite:///{path}", "langgraph-sqlite", *QUESTIONS):
        (source,) = returns(answer)
        assert source["envelope"]["observed_at"] is None
        assert (source["age_seconds"], source["age"]) == (None, "not recorded (no time for the source or the moment)")
        assert answer["answered_at"] is None and answer["actions"][0]["produced_at"] is None


def test_a_message_first_seen_after_an_unreadable_checkpoint_gets_no_time(
    tmp_path: Path, thread: tuple[Path, dict[str, datetime], list[Any], ToolLog]
) -> None:
    """The checkpoint that first held the first return cannot be read: the return is first seen in the next one,
    whose time would be too late, so it has none; the call before it keeps its own."""
    path, first, messages, _ = thread
    tool1 = messages[2]
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()  # LangGraph's own reading of its checkpoints, to find the one to spoil
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT checkpoint_id, type, checkpoint FROM checkpoints").fetchall()
        holder = next(
            cid
            for cid, kind, blob in rows
            if datetime.fromisoformat(serde.loads_typed((kind, blob))["ts"]) == first[tool1.id]
        )
        conn.execute("UPDATE checkpoints SET type = 'pickle' WHERE checkpoint_id = ?", (holder,))
    paris, oslo = gated(tmp_path, f"sqlite:///{path}", "langgraph-sqlite", *QUESTIONS)
    (source,) = returns(paris)
    assert source["envelope"]["observed_at"] is None
    assert when(paris["actions"][0]["produced_at"]) == first[messages[1].id]
    assert when(returns(oslo)[0]["envelope"]["observed_at"]) == first[messages[6].id]


def test_langgraph_postgres_times_are_those_of_the_checkpoint_that_first_holds_each_message(
    tmp_path: Path, postgres_url: str
) -> None:
    """The same on ``PostgresSaver``, which keeps the messages apart (``checkpoint_blobs``, one per version)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    url = create_database(postgres_url, "lgtimes").replace("postgresql+asyncpg://", "postgresql://")
    log = ToolLog()
    config: RunnableConfig = {"configurable": {"thread_id": "pg-t"}}
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        graph = react_graph(scripted(call("Paris", "c1"), AIMessage("Sunny in Paris.")), [langchain_tool(log)], saver)
        messages = graph.invoke({"messages": [HumanMessage(QUESTIONS[0])]}, config)["messages"]
        first: dict[str, datetime] = {}
        for saved in reversed(list(saver.list(config))):
            for message in saved.checkpoint["channel_values"].get("messages", []):
                first.setdefault(message.id, datetime.fromisoformat(saved.checkpoint["ts"]))
    _, called, returned, final = messages
    (answer,) = gated(tmp_path, url, "langgraph-postgres", QUESTIONS[0])
    (source,) = returns(answer)
    assert when(source["envelope"]["observed_at"]) == first[returned.id]
    assert when(answer["actions"][0]["produced_at"]) == first[called.id]
    assert when(answer["answered_at"]) == first[final.id]
    age = (first[final.id] - first[returned.id]).total_seconds()
    assert source["age_seconds"] == pytest.approx(age) and age > 0


# --- OpenAI Agents SDK SQLiteSession -----------------------------------------------------------------------------


def rows(db: Path, session: str) -> list[tuple[str, str | None]]:
    """(item type, created_at) of each row the SDK wrote for ``session``, in order."""
    with sqlite3.connect(db) as conn:
        found = conn.execute(
            "SELECT message_data, created_at FROM agent_messages WHERE session_id = ? ORDER BY id", (session,)
        ).fetchall()
    return [(json.loads(data).get("type", "message"), at) for data, at in found]


def utc(stored: str) -> datetime:
    """A SQLite ``CURRENT_TIMESTAMP`` (``YYYY-MM-DD HH:MM:SS``, UTC without a zone) as an aware time."""
    return datetime.strptime(stored, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)


def test_agents_session_items_carry_the_time_their_row_was_stored(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    before = datetime.now(UTC).replace(microsecond=0)
    run_agent(db, ToolLog(), [("alice", QUESTIONS[0], "Paris"), ("bob", QUESTIONS[1], "Oslo")])
    after = datetime.now(UTC)
    real = rows(db, "alice")
    # bob's rows get distinct seconds, in the format the SDK writes, so each item's time is told apart
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE agent_messages SET created_at = strftime('%Y-%m-%d %H:%M:%S', '2026-03-02 09:00:00', "
            "'+' || (id * 7) || ' seconds') WHERE session_id = 'bob'"
        )
    spaced = rows(db, "bob")
    assert [kind for kind, _ in spaced] == ["message", "function_call", "function_call_output", "message"]

    alice, bob = gated(tmp_path, f"sqlite:///{db}", "openai-agents-session", *QUESTIONS)
    (source,) = returns(alice)
    stored = utc(str(real[2][1]))  # the function_call_output's row, as the SDK wrote it
    assert when(source["envelope"]["observed_at"]) == stored and before <= stored <= after
    assert source["age_seconds"] == (utc(str(real[3][1])) - stored).total_seconds() >= 0

    times = [utc(str(at)) for _, at in spaced]
    (source,) = returns(bob)
    assert when(source["envelope"]["observed_at"]) == times[2]
    assert when(bob["actions"][0]["produced_at"]) == times[1]
    assert when(bob["answered_at"]) == times[3]
    assert source["age_seconds"] == (times[3] - times[2]).total_seconds() == 7.0
    asked = [s for s in bob["sources"] if s["layer"] == "history"]
    assert asked == []  # a first turn: the question is the query, no history


def test_agents_session_rows_without_a_time_say_not_recorded(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    run_agent(db, ToolLog(), [("alice", QUESTIONS[0], "Paris")])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE agent_messages SET created_at = NULL")
    (answer,) = gated(tmp_path, f"sqlite:///{db}", "openai-agents-session", QUESTIONS[0])
    (source,) = returns(answer)
    assert (
        source["envelope"]["observed_at"] is None
        and source["age"] == "not recorded (no time for the source or the moment)"
    )
    assert answer["answered_at"] is None and answer["actions"][0]["produced_at"] is None


def test_the_lineage_is_the_latest_checkpoints_chain_of_parents() -> None:
    """A forked-away branch lends no checkpoint; a missing parent (pruned) or a cycle (a damaged store) ends the
    chain as not whole, so its first messages get no time."""
    from provenance_api.operations.connectors.checkpoint_times import Link, lineage

    def links(*pairs: tuple[str, str | None]) -> dict[str, Link]:
        return {c: Link(c, p) for c, p in pairs}

    forked = links(("a", None), ("b", "a"), ("c", "b"), ("d", "b"), ("e", "d"))  # c: the abandoned branch
    assert lineage(forked, "e") == (["a", "b", "d", "e"], True)
    assert lineage(forked, "c") == (["a", "b", "c"], True)
    assert lineage(links(("b", "a"), ("c", "b")), "c") == (["b", "c"], False)
    assert lineage(links(("a", "c"), ("b", "a"), ("c", "b")), "c") == (["a", "b", "c"], False)
