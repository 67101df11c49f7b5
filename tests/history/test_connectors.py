"""Read-through connectors: the stores the agent libraries write (the OpenAI Agents SDK's SQLiteSession file,
LangGraph's SQLite and Postgres checkpointers) imported in place, incrementally, from the CLI and the API.
Every store here is written by the real library; expectations come from what the run did."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Generator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from support.api_server import InProcessApi
from support.services import create_database
from test_agent_libraries import CITIES, ToolLog, call, langchain_tool, react_graph, run_agent, scripted

from estimator.corpus.turn import StoredTurn
from provenance_api.cli.main import main
from provenance_api.operations.connectors import parse_source
from provenance_api.operations.connectors.checkpoint_serde import UnreadableValue, decode
from provenance_api.storage import crud_turns
from provenance_api.storage.session import Database


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def imported(capsys: pytest.CaptureFixture[str], url: str, fmt: str) -> dict[str, Any]:
    code, out, err = run(capsys, "import", url, "--format", fmt, "--json")
    assert code == 0, out + err
    result: dict[str, Any] = json.loads(out)
    return result


def nth(data_dir: Path, url: str, fmt: str, thread: str, n: int, tenant: str = "local") -> StoredTurn:
    """The ``n``-th stored turn (in storage order) of ``thread`` in the store at ``url``: turn ids come from
    content, so a test finds a turn by its conversation (``<store>#<thread>``) and place."""
    prefix = f"{parse_source(url, fmt).store}#{thread}:"

    async def work() -> list[StoredTurn]:
        db = Database(f"sqlite+aiosqlite:///{data_dir / 'provenance.db'}")
        try:
            return [r.turn for r in await crud_turns.turns_under(db, tenant, [prefix])]
        finally:
            await db.dispose()

    turns = asyncio.run(work())
    assert len(turns) > n, f"{prefix} holds {len(turns)} turn(s)"
    return turns[n]


def tool_returns(turn: StoredTurn) -> list[str]:
    return [str(c.response) for c in turn.response_payload.tool_calls]


# --- OpenAI Agents SDK SQLiteSession -------------------------------------------------------------------


def test_agents_session_file_imports_in_place_then_only_what_is_new(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "agent.db"
    log = ToolLog()
    outputs = run_agent(db, log, [("alice", "Weather in Paris?", "Paris"), ("bob", "Weather in Oslo?", "Oslo")])
    url = f"sqlite:///{db}"

    first = imported(capsys, url, "openai-agents-session")
    assert (first["imported"], first["rejected"]) == (2, 0)
    assert first["source"]["first_import"] and first["source"]["conversations_changed"] == 2
    alice = nth(data_dir, url, "openai-agents-session", "alice", 0)
    assert (alice.query, alice.response, tool_returns(alice)) == ("Weather in Paris?", outputs[0], [log.returns[0]])

    again = imported(capsys, url, "openai-agents-session")
    assert (again["imported"], again["unchanged"], again["source"]["conversations_changed"]) == (0, 0, 0)
    code, out, _ = run(capsys, "import", url, "--format", "openai-agents-session")
    assert code == 0 and "nothing new since the last import" in out

    # alice asks again and carol starts: only those two sessions are read; bob's is not
    more = run_agent(db, log, [("alice", "And Oslo?", "Oslo"), ("carol", "Paris please", "Paris")])
    third = imported(capsys, url, "openai-agents-session")
    assert third["source"]["conversations_changed"] == 2 and third["source"]["conversations_total"] == 3
    assert (third["imported"], third["unchanged"]) == (2, 1)  # alice's first turn is re-checked, not re-stored
    follow_up = nth(data_dir, url, "openai-agents-session", "alice", 1)
    assert (follow_up.query, follow_up.response, tool_returns(follow_up)) == ("And Oslo?", more[0], [log.returns[2]])
    assert [m.content for m in follow_up.request_payload.messages if m.role == "user"] == [
        "Weather in Paris?",
        "And Oslo?",
    ]
    assert nth(data_dir, url, "openai-agents-session", "carol", 0).response == more[1]


def test_a_recreated_store_is_read_from_the_start_and_says_so(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "agent.db"
    run_agent(db, ToolLog(), [("alice", "Weather in Paris?", "Paris"), ("alice", "And Oslo?", "Oslo")])
    assert imported(capsys, f"sqlite:///{db}", "openai-agents-session")["imported"] == 2
    db.unlink()
    outputs = run_agent(db, ToolLog(), [("dave", "Paris?", "Paris")])  # row ids restart below the cursor
    result = imported(capsys, f"sqlite:///{db}", "openai-agents-session")
    assert (result["imported"], result["source"]["conversations_changed"]) == (1, 1)
    assert "recreated" in result["notes"][0]["reason"]
    assert nth(data_dir, f"sqlite:///{db}", "openai-agents-session", "dave", 0).response == outputs[0]


def test_a_bad_session_row_is_reported_and_the_rest_imported(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "agent.db"
    log = ToolLog()
    run_agent(db, log, [("alice", "Weather in Paris?", "Paris")])
    with sqlite3.connect(db) as conn:  # a row no JSON reader can parse, written after the good ones
        conn.execute("INSERT INTO agent_messages (session_id, message_data) VALUES ('alice', '{broken')")
        bad_id = conn.execute("SELECT MAX(id) FROM agent_messages").fetchone()[0]

    code, out, _ = run(capsys, "import", f"sqlite:///{db}", "--format", "openai-agents-session", "--json")
    result = json.loads(out)
    assert code == 1 and (result["imported"], result["rejected"]) == (1, 1)
    assert result["errors"][0]["where"].endswith(f"item id {bad_id}")
    assert "not JSON" in result["errors"][0]["reason"]
    assert tool_returns(nth(data_dir, f"sqlite:///{db}", "openai-agents-session", "alice", 0)) == log.returns


def test_wrong_format_missing_file_and_no_format_are_clear_errors(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "agent.db"
    run_agent(db, ToolLog(), [("alice", "Weather in Paris?", "Paris")])
    code, _, err = run(capsys, "import", f"sqlite:///{db}", "--format", "langgraph-sqlite")
    assert code == 2 and "has no checkpoints table" in err and "--format" in err
    code, _, err = run(capsys, "import", f"sqlite:///{tmp_path / 'nope.db'}", "--format", "openai-agents-session")
    assert code == 2 and "no SQLite file" in err and not (tmp_path / "nope.db").exists()
    code, _, err = run(capsys, "import", f"sqlite:///{db}")
    assert code == 2 and "openai-agents-session" in err
    code, _, err = run(capsys, "import", f"sqlite:///{db}", "--format", "langgraph-postgres")
    assert code == 2 and "postgresql URL" in err


# --- LangGraph SQLite checkpointer ---------------------------------------------------------------------


def weather_graph(path: Path, log: ToolLog, *replies: AIMessage) -> Generator[Any, None, None]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        yield react_graph(scripted(*replies), [langchain_tool(log)], SqliteSaver(conn))
    finally:
        conn.close()


def ask(graph: Any, thread: str, *messages: Any) -> list[Any]:
    state = graph.invoke({"messages": list(messages)}, {"configurable": {"thread_id": thread}})
    return list(state["messages"])


def test_langgraph_sqlite_checkpoints_import_incrementally(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "checkpoints.db"
    log = ToolLog()
    replies = [
        call("Paris", "c1"),
        AIMessage(content="Sunny in Paris."),
        call("Oslo", "c2"),
        AIMessage(content="Snow in Oslo."),
        call("Oslo", "c3"),
        AIMessage(content="Still snowing."),
    ]
    graphs = weather_graph(path, log, *replies)
    graph = next(graphs)
    ask(graph, "t1", SystemMessage("You are a weather desk."), HumanMessage("Weather in Paris?"))
    ask(graph, "t2", HumanMessage("Weather in Oslo?"))
    url = f"sqlite:///{path}"

    first = imported(capsys, url, "langgraph-sqlite")
    assert (first["imported"], first["rejected"], first["source"]["conversations_total"]) == (2, 0, 2)
    t1 = nth(data_dir, url, "langgraph-sqlite", "t1", 0)
    assert (t1.query, t1.response, t1.system_prompt) == (
        "Weather in Paris?",
        "Sunny in Paris.",
        "You are a weather desk.",
    )
    assert tool_returns(t1) == [log.returns[0]] and log.returns[0].startswith(CITIES["Paris"])

    assert imported(capsys, url, "langgraph-sqlite")["source"]["conversations_changed"] == 0
    messages = ask(graph, "t2", HumanMessage("Tomorrow?"))
    second = imported(capsys, url, "langgraph-sqlite")
    assert second["source"]["conversations_changed"] == 1 and (second["imported"], second["unchanged"]) == (1, 1)
    t2 = nth(data_dir, url, "langgraph-sqlite", "t2", 1)
    assert (t2.query, t2.response, tool_returns(t2)) == ("Tomorrow?", messages[-1].content, [log.returns[2]])
    graphs.close()


def test_an_unreadable_checkpoint_rejects_its_thread_alone(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "checkpoints.db"
    graphs = weather_graph(
        path,
        ToolLog(),
        call("Paris", "c1"),
        AIMessage(content="Sunny."),
        call("Oslo", "c2"),
        AIMessage(content="Snow."),
    )
    graph = next(graphs)
    ask(graph, "good", HumanMessage("Paris?"))
    ask(graph, "bad", HumanMessage("Oslo?"))
    graphs.close()
    with sqlite3.connect(path) as conn:  # a checkpoint serialised with pickle is never unpickled
        conn.execute("UPDATE checkpoints SET type = 'pickle' WHERE thread_id = 'bad'")

    code, out, _ = run(capsys, "import", f"sqlite:///{path}", "--format", "langgraph-sqlite", "--json")
    result = json.loads(out)
    assert code == 1 and (result["imported"], result["rejected"]) == (1, 1)
    assert "thread bad" in result["errors"][0]["where"] and "pickle" in result["errors"][0]["reason"]
    assert nth(data_dir, f"sqlite:///{path}", "langgraph-sqlite", "good", 0).response == "Sunny."


def test_checkpoint_values_decode_without_langgraph() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()
    message = AIMessage(content="hi", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "x"}])
    kind, data = serde.dumps_typed({"messages": [HumanMessage("q"), message], "n": {1, 2}})
    value = decode(kind, data)
    assert value["messages"][0] == {"type": "human", "data": HumanMessage("q").model_dump()}
    assert value["messages"][1]["data"]["tool_calls"][0]["args"] == {"city": "Oslo"}
    assert sorted(value["n"]) == [1, 2]
    with pytest.raises(UnreadableValue, match="pickle"):
        decode("pickle", b"\x80\x04K\x01.")
    with pytest.raises(UnreadableValue, match="does not decode"):
        decode("msgpack", b"\xc1")


# --- LangGraph Postgres checkpointer -------------------------------------------------------------------


def test_langgraph_postgres_checkpoints_import_incrementally(
    postgres_url: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    url = create_database(postgres_url, "lg").replace("postgresql+asyncpg://", "postgresql://")
    log = ToolLog()
    replies = [
        call("Paris", "c1"),
        AIMessage(content="Sunny in Paris."),
        call("Oslo", "c2"),
        AIMessage(content="Snow in Oslo."),
    ]
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        graph = react_graph(scripted(*replies), [langchain_tool(log)], saver)
        ask(graph, "pg-1", SystemMessage("You are a weather desk."), HumanMessage("Weather in Paris?"))
        first = imported(capsys, url, "langgraph-postgres")
        assert (first["imported"], first["rejected"], first["source"]["conversations_changed"]) == (1, 0, 1)
        assert imported(capsys, url, "langgraph-postgres")["source"]["conversations_changed"] == 0
        messages = ask(graph, "pg-1", HumanMessage("And Oslo?"))
        second = imported(capsys, url, "langgraph-postgres")
    assert (second["imported"], second["unchanged"]) == (1, 1)
    turn = nth(data_dir, url, "langgraph-postgres", "pg-1", 1)
    assert (turn.query, turn.response, turn.system_prompt) == (
        "And Oslo?",
        messages[-1].content,
        "You are a weather desk.",
    )
    assert tool_returns(turn) == [log.returns[1]]


def test_an_unreachable_postgres_source_is_an_error_and_moves_nothing(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "import", "postgresql://u:secret@127.0.0.1:9/db", "--format", "langgraph-postgres")
    assert code == 2 and out == "" and "cannot connect" in err and "secret" not in err
    source = parse_source("postgresql+asyncpg://u:secret@db.internal/agents", "langgraph-postgres")
    assert "secret" not in source.shown_url + source.key and source.name == "agents"
    assert source.url == "postgresql://u:secret@db.internal/agents"  # what the connection is opened with


# --- the API, for configured sources -------------------------------------------------------------------


def test_api_imports_a_configured_source_per_tenant_and_never_takes_a_url(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    log = ToolLog()
    run_agent(db, log, [("alice", "Weather in Paris?", "Paris")])
    tenants = ["acme", "beta"]
    sources = {
        "desk": {"url": f"sqlite:///{db}", "format": "openai-agents-session", "tenants": tenants},
        "gone": {"url": f"sqlite:///{tmp_path / 'gone.db'}", "format": "openai-agents-session", "tenants": tenants},
        "typo": {"url": f"sqlite:///{db}", "format": "langgraph", "tenants": tenants},
    }
    with InProcessApi(tmp_path / "data", warm_up=False, history_sources=sources) as srv:
        acme, beta = srv.client(srv.key("acme", "ann")), srv.client(srv.key("beta", "bo"))
        with acme, beta:
            first = acme.post("/v1/imports/sources/desk").json()
            assert (first["imported"], first["source"]["first_import"]) == (1, True)
            assert "url" not in first["source"]
            store = parse_source(f"sqlite:///{db}", "openai-agents-session", "desk").store
            ids = [t["turn_id"] for t in acme.get("/v1/turns").json()["items"]]
            assert [i.split(":")[0] for i in ids] == [f"{store}#alice"]
            turn = acme.get(f"/v1/turns/{quote(ids[0], safe='')}").json()
            assert turn["turn"]["query"] == "Weather in Paris?"
            again = acme.post("/v1/imports/sources/desk").json()
            assert (again["imported"], again["source"]["conversations_changed"]) == (0, 0)
            assert beta.post("/v1/imports/sources/desk").json()["source"]["first_import"]  # its own cursor

            run_agent(db, log, [("alice", "And Oslo?", "Oslo")])
            third = acme.post("/v1/imports/sources/desk").json()
            assert (third["imported"], third["unchanged"], third["source"]["conversations_changed"]) == (1, 1, 1)

            missing = acme.post("/v1/imports/sources/nope")
            assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"
            assert missing.json()["field"] == "name" and "PROVENANCE_HISTORY_SOURCES" in missing.json()["fix"]
            gone = acme.post("/v1/imports/sources/gone")
            assert gone.status_code == 502 and gone.json()["field"] == "PROVENANCE_HISTORY_SOURCES.gone"
            assert str(tmp_path) not in gone.text
            typo = acme.post("/v1/imports/sources/typo")
            assert typo.status_code == 502 and typo.json()["field"] == "PROVENANCE_HISTORY_SOURCES.typo.format"
            assert acme.post("/v1/imports/sources/x", params={"url": f"sqlite:///{db}"}).status_code == 404
            assert acme.post(f"/v1/imports/sources/sqlite:%2F%2F%2F{db}").status_code in (404, 422)
