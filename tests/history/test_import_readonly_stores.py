"""History stores read in place leave nothing beside them and are read where this user may not write (issue 29).

Every store is written by the real library (the OpenAI Agents SDK's ``SQLiteSession``, LangGraph's
``SqliteSaver``, both in write-ahead-log mode) in a child process, as the agent would: closed before the import,
or still open (live) while it runs. A read-only directory is one this process may not write: as root, the child
that imports runs without the capabilities that let root write anywhere (``CAP_DAC_OVERRIDE`` and its kin)."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from provenance_api.cli.main import main
from provenance_api.operations.connectors import open_reader, parse_source

REPO = Path(__file__).resolve().parents[2]
FORMATS = ("openai-agents-session", "langgraph-sqlite")

WRITER = r"""
import asyncio, sqlite3, sys
fmt, path = sys.argv[1], sys.argv[2]
if fmt == "openai-agents-session":
    from agents import SQLiteSession

    session = SQLiteSession("s1", path)

    def write(n):
        asyncio.run(session.add_items([
            {"role": "user", "content": f"Where is order {n}?"},
            {"type": "message", "role": "assistant", "id": f"msg_{n}", "status": "completed",
             "content": [{"type": "output_text", "text": f"Order {n} shipped.", "annotations": []}]},
        ]))

    close = session.close
else:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import START, MessagesState, StateGraph

    conn = sqlite3.connect(path, check_same_thread=False)

    def answer(state):
        asked = state["messages"][-1].content.split()[-1].rstrip("?")
        return {"messages": [AIMessage(f"Order {asked} shipped.")]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    graph = builder.compile(checkpointer=SqliteSaver(conn))

    def write(n):
        graph.invoke({"messages": [HumanMessage(f"Where is order {n}?")]}, {"configurable": {"thread_id": "t1"}})

    close = conn.close
for line in sys.stdin:
    command, _, arg = line.strip().partition(" ")
    if command == "write":
        write(int(arg))
    elif command == "close":
        close()
    print("done", flush=True)
    if command == "close":
        break
"""


class Writer:
    """The agent's process: its library writes the store and keeps it open until told to close it."""

    def __init__(self, fmt: str, path: Path) -> None:
        self.path = path
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, fmt, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "done", f"the writer failed at {command!r}"

    def write(self, *orders: int) -> None:
        for n in orders:
            self.send(f"write {n}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.send("close")
            self.proc.wait(timeout=30)

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def beside(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir())


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture
def store_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory of its own for the store (whose listing is checked), made writable again at the end."""
    folder = tmp_path / "agent"
    folder.mkdir()
    yield folder
    folder.chmod(0o755)
    for child in folder.iterdir():
        child.chmod(0o644)


def imported(capsys: pytest.CaptureFixture[str], db: Path, fmt: str) -> dict[str, Any]:
    code = main(["import", f"sqlite:///{db}", "--format", fmt, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    result: dict[str, Any] = json.loads(out)
    return result


# --- nothing left beside the store ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_reading_a_closed_wal_store_leaves_no_shm_or_wal_beside_it(
    fmt: str, store_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = store_dir / "agent.db"
    with Writer(fmt, db) as writer:
        writer.write(1, 2)
        writer.close()
    assert beside(db) == ["agent.db"]
    first = imported(capsys, db, fmt)
    assert (first["imported"], first["rejected"], first["notes"]) == (2, 0, [])
    assert beside(db) == ["agent.db"]  # no -shm, no -wal
    again = imported(capsys, db, fmt)
    assert (again["imported"], again["source"]["conversations_changed"]) == (0, 0)
    assert beside(db) == ["agent.db"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_live_store_keeps_its_own_files_and_its_writes_not_yet_checkpointed_are_read(
    fmt: str, store_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = store_dir / "agent.db"
    with Writer(fmt, db) as writer:
        writer.write(1, 2)
        live = beside(db)
        assert live == ["agent.db", "agent.db-shm", "agent.db-wal"]
        result = imported(capsys, db, fmt)
        assert (result["imported"], result["rejected"]) == (2, 0)  # order 2 is in the -wal only
        assert beside(db) == live
        writer.close()
    assert beside(db) == ["agent.db"]  # the writer removed its files: the reader held none of them open


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_writer_closing_during_a_read_still_removes_its_files(fmt: str, store_dir: Path) -> None:
    """A reader that kept its connection while the last writer closed kept the writer from removing its -wal and
    -shm, and then left them itself (it may not checkpoint)."""
    db = store_dir / "agent.db"

    async def read_while(writer: Writer) -> Any:
        reader = await open_reader(parse_source(f"sqlite:///{db}", fmt))
        try:
            changes = await reader.changes(None)
            writer.write(3)
            writer.close()  # the agent stops while the import is reading
            assert beside(db) == ["agent.db"]
            return await reader.conversation(changes.changed[0], changes.position or "")
        finally:
            await reader.close()

    with Writer(fmt, db) as writer:
        writer.write(1, 2)
        conversation = asyncio.run(read_while(writer))
    assert conversation.obj is not None and not conversation.issues
    text = json.dumps(conversation.obj)
    assert "Order 2 shipped." in text and "Order 3 shipped." not in text  # read up to the position it listed
    assert beside(db) == ["agent.db"]


# --- a directory this user may not write ------------------------------------------------------------------------

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER = 1, 2, 3


def _without_write_anywhere() -> None:  # pragma: no cover - runs in the child before it starts
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "cannot drop the capability to write anywhere")


def run_without_write_access(*argv: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` in a child that obeys file permissions (as root too)."""
    env = {**os.environ, "PROVENANCE_DATA_DIR": str(data_dir), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=_without_write_anywhere if os.geteuid() == 0 else None,
    )


def import_without_write_access(db: Path, fmt: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    argv = ["-m", "provenance_api.cli.main", "import", f"sqlite:///{db}", "--format", fmt, "--json"]
    return run_without_write_access(*argv, data_dir=data_dir)


def read_only(folder: Path, data_dir: Path) -> None:
    for child in folder.iterdir():
        child.chmod(0o444)
    folder.chmod(0o555)
    probe = run_without_write_access(
        "-c", f"open({str(folder / 'probe')!r}, 'w')", data_dir=data_dir
    )  # the directory is read-only to the child
    assert probe.returncode != 0 and "PermissionError" in probe.stderr, probe.stderr


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_store_in_a_read_only_directory_is_read(fmt: str, store_dir: Path, tmp_path: Path) -> None:
    db = store_dir / "agent.db"
    with Writer(fmt, db) as writer:
        writer.write(1, 2)
        writer.close()
    read_only(store_dir, tmp_path / "data")
    ran = import_without_write_access(db, fmt, tmp_path / "data")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    result = json.loads(ran.stdout)
    assert (result["imported"], result["rejected"], result["notes"]) == (2, 0, [])
    assert beside(db) == ["agent.db"]


def test_a_write_ahead_log_that_cannot_be_opened_is_left_unread_and_the_import_says_so(
    store_dir: Path, tmp_path: Path
) -> None:
    """A -wal without its -shm in a read-only directory (copied from a live store): the file is read as it
    stands and the note says that the writes in the log were not."""
    live = tmp_path / "live"
    live.mkdir()
    fmt = "openai-agents-session"
    with Writer(fmt, live / "agent.db") as writer:
        writer.write(1)
        with sqlite3.connect(live / "agent.db") as checkpoint:  # order 1 into the file, order 2 in the log only
            checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        writer.write(2)
        db = store_dir / "agent.db"
        shutil.copy(live / "agent.db", db)
        shutil.copy(live / "agent.db-wal", store_dir / "agent.db-wal")
        writer.close()
    read_only(store_dir, tmp_path / "data")
    ran = import_without_write_access(db, fmt, tmp_path / "data")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    result = json.loads(ran.stdout)
    assert (result["imported"], result["rejected"]) == (1, 0)
    assert [n["where"] for n in result["notes"]] == ["agent.db"]
    assert "read without it: writes not yet checkpointed" in result["notes"][0]["reason"]
    assert beside(db) == ["agent.db", "agent.db-wal"]
