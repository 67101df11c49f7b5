"""Turn ids that survive the store's life: ids from what a turn says (its query, reply and calls), never from
its place in the list, and a store named by what it is, never by how its path was typed or which name it
was imported under. Every history here is written by the real library (LangGraph with its SQLite
checkpointer, the OpenAI Agents SDK); expectations come from the run."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, messages_to_dict
from support.api_server import InProcessApi
from support.services import DbBackend
from test_agent_libraries import ToolLog, call, langchain_tool, react_graph, scripted

from estimator.corpus.turn import StoredTurn
from provenance_api.cli.main import main
from provenance_api.importers import import_conversation
from provenance_api.importers.common import turn_key
from provenance_api.operations.connectors import parse_source
from provenance_api.storage import crud_turns
from provenance_api.storage.session import Database

TENANT = "local"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


def imported(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> dict[str, Any]:
    got, out = run(capsys, "import", *argv, "--json")
    assert got == code, out
    result: dict[str, Any] = json.loads(out)
    return result


def in_storage(data_dir: Path, *prefixes: str, tenant: str = TENANT) -> list[StoredTurn]:
    """The tenant's stored turns under the prefixes (every turn with ``""``… is not a prefix: pass ids' heads)."""

    async def work() -> list[StoredTurn]:
        db = Database(f"sqlite+aiosqlite:///{data_dir / 'provenance.db'}")
        try:
            if prefixes:
                return [r.turn for r in await crud_turns.turns_under(db, tenant, list(prefixes))]
            return [r.turn async for r in crud_turns.iter_turns(db, tenant)]
        finally:
            await db.dispose()

    return asyncio.run(work())


def put(data_dir: Path, turns: list[StoredTurn], tenant: str = TENANT) -> None:
    async def work() -> None:
        db = Database(f"sqlite+aiosqlite:///{data_dir / 'provenance.db'}")
        try:
            await db.migrate()
            for turn in turns:
                await crud_turns.put_turn(db, tenant, "earlier-version", turn)
        finally:
            await db.dispose()

    asyncio.run(work())


class Desk:
    """A real LangGraph ReAct graph with a real tool, checkpointed by ``SqliteSaver`` into ``path``."""

    def __init__(self, path: Path, *replies: AIMessage) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.log = ToolLog()
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.graph = react_graph(scripted(*replies), [langchain_tool(self.log)], SqliteSaver(self.conn))

    def ask(self, thread: str, question: str) -> list[Any]:
        state = self.graph.invoke({"messages": [HumanMessage(question)]}, {"configurable": {"thread_id": thread}})
        return list(state["messages"])

    def messages(self, thread: str) -> list[Any]:
        return list(self.graph.get_state({"configurable": {"thread_id": thread}}).values["messages"])

    def trim(self, thread: str, count: int) -> None:
        """Remove the thread's first ``count`` messages the way LangGraph's docs do: ``RemoveMessage``."""
        removals = [RemoveMessage(id=m.id) for m in self.messages(thread)[:count]]
        self.graph.update_state({"configurable": {"thread_id": thread}}, {"messages": removals})

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def desk_path(tmp_path: Path) -> Path:
    return tmp_path / "checkpoints.db"


@pytest.fixture
def desk(desk_path: Path) -> Iterator[Desk]:
    replies = [
        call("Paris", "c1"),
        AIMessage(content="Sunny in Paris."),
        call("Oslo", "c2"),
        AIMessage(content="Snow in Oslo."),
        call("Oslo", "c3"),
        AIMessage(content="Still snowing."),
        call("Paris", "c4"),
        AIMessage(content="Paris is still sunny."),
    ]
    d = Desk(desk_path, *replies)
    yield d
    d.close()


def conversation_ids(turns: list[StoredTurn]) -> list[str]:
    return [t.turn_id.rsplit(":", 1)[0] for t in turns]


# --- "LangGraph histories trimmed with RemoveMessage shift positional turn ids" --------------------------


def test_a_history_trimmed_with_remove_message_keeps_its_turns_unchanged_and_stores_the_new_one(
    desk: Desk, desk_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{desk_path}"
    desk.ask("t1", "Weather in Paris?")
    desk.ask("t1", "Weather in Oslo?")
    first = imported(capsys, url, "--format", "langgraph-sqlite")
    assert (first["imported"], first["conflicting"]) == (2, 0)
    before = {t.turn_id: t for t in in_storage(data_dir)}
    oslo = next(t for t in before.values() if t.query == "Weather in Oslo?")
    assert [m.content for m in oslo.request_payload.messages if m.role == "user"] == [
        "Weather in Paris?",
        "Weather in Oslo?",
    ]

    desk.trim("t1", 4)  # the Paris question, its call, the tool's return and the answer
    assert [m.content for m in desk.messages("t1") if isinstance(m, HumanMessage)] == ["Weather in Oslo?"]
    after_trim = desk.ask("t1", "Tomorrow?")
    second = imported(capsys, url, "--format", "langgraph-sqlite")
    assert second["source"]["conversations_changed"] == 1
    assert (second["imported"], second["unchanged"], second["conflicting"], second["rejected"]) == (1, 1, 0, 0)
    now = {t.turn_id: t for t in in_storage(data_dir)}
    assert set(before) < set(now) and len(now) == 3
    new = now[next(iter(set(now) - set(before)))]
    assert (new.query, new.response) == ("Tomorrow?", after_trim[-1].content) and new.response == "Still snowing."
    assert now[oslo.turn_id] == oslo  # the stored turn, with the history it had, stands
    assert [m.content for m in new.request_payload.messages if m.role == "user"] == ["Weather in Oslo?", "Tomorrow?"]

    code, out = run(capsys, "import", url, "--format", "langgraph-sqlite")
    assert code == 0 and "nothing new since the last import" in out
    assert len(in_storage(data_dir)) == 3


def test_a_conflict_never_hides_a_new_turn_and_nothing_new_is_said_only_when_nothing_is_new(
    desk: Desk, desk_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{desk_path}"
    desk.ask("t1", "Weather in Paris?")
    assert imported(capsys, url, "--format", "langgraph-sqlite")["imported"] == 1
    desk.ask("t1", "Weather in Oslo?")
    desk.trim("t1", 4)
    desk.ask("t1", "Tomorrow?")
    # another writer already holds the id the Oslo turn gets, with other content
    obj = {"messages": messages_to_dict(desk.messages("t1"))}
    store = parse_source(url, "langgraph-sqlite").store
    turns = import_conversation(obj, "langchain", conversation_id=f"{store}#t1").turns
    oslo = next(t for t in turns if t.query == "Weather in Oslo?")
    put(data_dir, [oslo.model_copy(update={"response": "Someone else's answer."})])

    code, out = run(capsys, "import", url, "--format", "langgraph-sqlite", "--json")
    result = json.loads(out)
    assert code == 1 and (result["imported"], result["conflicting"]) == (1, 1), result
    assert oslo.turn_id in result["errors"][0]["where"]
    assert [t.query for t in in_storage(data_dir)] == ["Weather in Paris?", "Weather in Oslo?", "Tomorrow?"]
    assert any("position stays" in n["reason"] for n in result["notes"])
    # the next run reads the thread again and says so: not "nothing new", not exit 0
    code, out = run(capsys, "import", url, "--format", "langgraph-sqlite")
    assert code == 1 and "nothing new" not in out and "1 conflicting" in out and "1 unchanged" in out


def test_a_question_asked_and_answered_the_same_way_twice_keeps_both_turns() -> None:
    chat = [
        {"role": "user", "content": "Status?"},
        {"role": "assistant", "content": "All green."},
        {"role": "user", "content": "Status?"},
        {"role": "assistant", "content": "All green."},
    ]
    turns = import_conversation({"messages": chat}, "openai-chat", conversation_id="c").turns
    key = turn_key(turns[0])[:12]
    assert [t.turn_id for t in turns] == [f"c:{key}", f"c:{key}.2"]
    assert turn_key(turns[0]) == turn_key(turns[1]) and turns[0].request_payload != turns[1].request_payload


# --- "two stores with the same file name collide; other path spellings store twice; CLI vs configured" ---


def test_two_checkpoints_db_in_two_folders_never_collide(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = []
    for folder, city, answer in (("a", "Paris", "Sunny in Paris."), ("b", "Oslo", "Snow in Oslo.")):
        (tmp_path / folder).mkdir()
        desk = Desk(tmp_path / folder / "checkpoints.db", call(city, "c1"), AIMessage(content=answer))
        desk.ask("t1", f"Weather in {city}?")  # the same thread id in both
        desk.close()
        urls.append(f"sqlite:///{tmp_path / folder / 'checkpoints.db'}")
    for url in urls:
        result = imported(capsys, url, "--format", "langgraph-sqlite")
        assert (result["imported"], result["conflicting"], result["source"]["first_import"]) == (1, 0, True)
    stores = [parse_source(url, "langgraph-sqlite").store for url in urls]
    assert stores[0] != stores[1] and all(s.startswith("langgraph-sqlite@") for s in stores)
    assert not any(str(tmp_path) in s or "checkpoints" in s for s in stores)  # where a store lives is not shown
    a, b = (in_storage(data_dir, f"{store}#t1:") for store in stores)
    assert [t.response for t in a] == ["Sunny in Paris."] and [t.response for t in b] == ["Snow in Oslo."]


def test_the_same_store_by_two_path_spellings_and_a_symlink_is_one_store(
    desk: Desk, desk_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = desk_path.parent
    desk.ask("t1", "Weather in Paris?")
    (folder / "other").mkdir()
    os.symlink(folder, folder / "link")
    monkeypatch.chdir(folder)
    spellings = [
        f"sqlite:///{desk_path}",
        f"sqlite:///./other/../{desk_path.name}",
        f"sqlite:///link/{desk_path.name}",
    ]
    assert len({parse_source(u, "langgraph-sqlite").store for u in spellings}) == 1
    assert imported(capsys, spellings[0], "--format", "langgraph-sqlite")["imported"] == 1
    for url in spellings[1:]:
        again = imported(capsys, url, "--format", "langgraph-sqlite")
        assert (again["imported"], again["source"]["first_import"], again["source"]["conversations_changed"]) == (
            0,
            False,
            0,
        )
    desk.ask("t1", "Weather in Oslo?")
    last = imported(capsys, spellings[2], "--format", "langgraph-sqlite")
    assert (last["imported"], last["unchanged"]) == (1, 1)
    assert len(in_storage(data_dir)) == 2


def test_the_same_files_by_two_path_spellings_and_a_symlink_are_stored_once(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "a"
    folder.mkdir()
    for n in range(3):
        chat = [{"role": "user", "content": f"Order {n}?"}, {"role": "assistant", "content": f"Order {n} shipped."}]
        (folder / f"c{n}.json").write_text(json.dumps({"id": f"c{n}", "messages": chat}), encoding="utf-8")
    os.symlink(folder, tmp_path / "link")
    monkeypatch.chdir(tmp_path)
    assert imported(capsys, "a")["imported"] == 3
    for spelling in ("./a/../a", str(folder), "link", "./link/"):
        again = imported(capsys, spelling)
        assert (again["imported"], again["unchanged"], again["conflicting"]) == (0, 3, 0), spelling
    assert sorted(conversation_ids(in_storage(data_dir))) == ["a~c0.json#c0", "a~c1.json#c1", "a~c2.json#c2"]


def test_the_cli_and_a_configured_source_give_one_store_one_id(
    desk: Desk, desk_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    desk.ask("t1", "Weather in Paris?")
    url = f"sqlite:///{desk_path}"
    cli = imported(capsys, url, "--format", "langgraph-sqlite", "--tenant", "acme")
    assert cli["imported"] == 1
    held = [t.turn_id for t in in_storage(data_dir, tenant="acme")]
    sources = {"desk": {"url": url, "format": "langgraph-sqlite", "tenants": ["acme"]}}
    with InProcessApi(data_dir, warm_up=False, history_sources=sources) as srv, srv.client(srv.key("acme", "ann")) as c:
        api = c.post("/v1/imports/sources/desk").json()
        assert (api["imported"], api["source"]["first_import"], api["source"]["conversations_changed"]) == (0, False, 0)
        desk.ask("t1", "Weather in Oslo?")
        more = c.post("/v1/imports/sources/desk").json()
        assert (more["imported"], more["unchanged"], more["conflicting"]) == (1, 1, 0)
        ids = [t["turn_id"] for t in c.get("/v1/turns", params={"sort": "stored_at"}).json()["items"]]
        assert held[0] in ids and len(ids) == 2 and len(set(conversation_ids_of(ids))) == 1
        assert c.get(f"/v1/turns/{quote(held[0], safe='')}").json()["turn"]["query"] == "Weather in Paris?"
    capsys.readouterr()  # what the service printed at its start
    back = imported(capsys, url, "--format", "langgraph-sqlite", "--tenant", "acme")
    assert (back["imported"], back["source"]["conversations_changed"]) == (0, 0)


def conversation_ids_of(ids: list[str]) -> list[str]:
    return [i.rsplit(":", 1)[0] for i in ids]


# --- turns stored by earlier versions (positional ids) ---------------------------------------------------


def test_turns_stored_with_positional_ids_by_an_earlier_version_are_found_not_stored_again(
    desk: Desk, desk_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    desk.ask("t1", "Weather in Paris?")
    desk.ask("t1", "Weather in Oslo?")
    # what an earlier version stored: the same turns, under "<file name>#<thread>:<position>"
    obj = {"messages": messages_to_dict(desk.messages("t1"))}
    earlier = import_conversation(obj, "langchain", conversation_id="checkpoints.db#t1").turns
    put(data_dir, [t.model_copy(update={"turn_id": f"checkpoints.db#t1:{i}"}) for i, t in enumerate(earlier)])

    url = f"sqlite:///{desk_path}"
    first = imported(capsys, url, "--format", "langgraph-sqlite")
    assert (first["imported"], first["unchanged"], first["conflicting"]) == (0, 2, 0)
    assert [t.turn_id for t in in_storage(data_dir)] == ["checkpoints.db#t1:0", "checkpoints.db#t1:1"]
    desk.trim("t1", 4)
    desk.ask("t1", "Tomorrow?")
    second = imported(capsys, url, "--format", "langgraph-sqlite")
    assert (second["imported"], second["unchanged"], second["conflicting"]) == (1, 1, 0)
    assert [t.query for t in in_storage(data_dir)] == ["Weather in Paris?", "Weather in Oslo?", "Tomorrow?"]


def test_a_file_imported_by_an_earlier_version_is_unchanged_when_imported_again(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = [
        {"role": "user", "content": "Order 1?"},
        {"role": "assistant", "content": "Shipped."},
        {"role": "user", "content": "Order 2?"},
        {"role": "assistant", "content": "Lost."},
    ]
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"id": "c1", "messages": chat}), encoding="utf-8")
    earlier = import_conversation({"messages": chat}, "openai-chat", conversation_id="history.json#c1").turns
    put(data_dir, [t.model_copy(update={"turn_id": f"history.json#c1:{i}"}) for i, t in enumerate(earlier)])
    result = imported(capsys, str(path))
    assert (result["imported"], result["unchanged"]) == (0, 2)
    # the conversation goes on: only the new turn is stored
    chat += [{"role": "user", "content": "Order 3?"}, {"role": "assistant", "content": "Delivered."}]
    path.write_text(json.dumps({"id": "c1", "messages": chat}), encoding="utf-8")
    result = imported(capsys, str(path))
    assert (result["imported"], result["unchanged"]) == (1, 2)
    assert [t.turn_id.split(":")[1] for t in in_storage(data_dir)][:2] == ["0", "1"]
    assert len(in_storage(data_dir)) == 3


# --- the stored turns of one conversation, on SQLite and PostgreSQL --------------------------------------


def test_a_conversations_stored_turns_are_found_by_their_id_prefix_on_both_databases(
    tmp_path: Path, db_backend: DbBackend
) -> None:
    from provenance_api.operations import imports as bulk

    url = db_backend.fresh_url() or f"sqlite+aiosqlite:///{tmp_path / 'p.db'}"
    ids = ["a#t1:0", "a#t1:ü", "a#t1:~", "a#t10:0", "a#t1;x", "A#t1:0", "a#t1", "a#t:1", "b#t1:0"]
    chat = [{"role": "user", "content": "Order 1?"}, {"role": "assistant", "content": "Shipped."}]
    turn = import_conversation({"messages": chat}, "openai-chat", conversation_id="a#t1").turns[0]

    async def work() -> tuple[list[str], list[int]]:
        db = Database(url)
        try:
            await db.migrate()
            for ident in ids:
                await crud_turns.put_turn(db, TENANT, "u", turn.model_copy(update={"turn_id": ident}))
            found = [r.turn_id for r in await crud_turns.turns_under(db, TENANT, ["a#t1:"])]
            # an import of the same conversation finds "a#t1:0" (an earlier version's id) by content
            item = bulk.Item("here", "a", 0, obj={"id": "t1", "messages": chat})
            counts = await bulk.import_items(db, TENANT, "u", iter([item]))
            return found, [counts.imported, counts.unchanged, counts.conflicting]
        finally:
            await db.dispose()

    found, counts = asyncio.run(work())
    assert found == ["a#t1:0", "a#t1:ü", "a#t1:~"]
    assert counts == [0, 1, 0]


def test_files_imported_from_dot_by_an_earlier_version_are_found_under_their_new_names(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "a"
    folder.mkdir()
    chat = [{"role": "user", "content": "Order 1?"}, {"role": "assistant", "content": "Shipped."}]
    (folder / "c1.json").write_text(json.dumps({"id": "c1", "messages": chat}), encoding="utf-8")
    # an earlier version named the file relative to the directory as typed: "." gave "c1.json#c1:0"
    earlier = import_conversation({"messages": chat}, "openai-chat", conversation_id="c1.json#c1").turns
    put(data_dir, [t.model_copy(update={"turn_id": "c1.json#c1:0"}) for t in earlier])
    monkeypatch.chdir(folder)
    result = imported(capsys, ".")
    assert (result["imported"], result["unchanged"]) == (0, 1)
    assert [t.turn_id for t in in_storage(data_dir)] == ["c1.json#c1:0"]
