"""Durability faults under a real ``provenance serve`` process: the storage under the service is damaged while it
runs, and the service must stop saying it is ready and stop acknowledging writes, instead of acknowledging turns
that a restart loses.

Each fault is something an operator or the machine really does to the data directory:

- ``wal-removed``: ``rm provenance.db-wal``. Turns committed since the last checkpoint live only there.
- ``db-recreated-empty``: ``rm provenance.db && touch provenance.db``. The service's open descriptors keep writing
  into the unlinked file; a restart finds an empty database (and prints a new admin key).
- ``db-replaced-in-place``: another service's valid database copied over ``provenance.db`` (same inode).
- ``db-swapped``: ``provenance.db`` moved aside and another service's database moved in under its name.
- ``db-corrupted``: the database file overwritten with random bytes (same size, same inode).
- ``disk-full``: the data directory on a real 16 MiB tmpfs, filled until the kernel answers ``ENOSPC``. The tmpfs is
  mounted in a user + mount namespace (``unshare -rm``, no privileges needed) that a holder process keeps alive, so
  the service can be restarted on the same filesystem; the service runs inside it (``nsenter``) and the test reaches
  the files through ``/proc/<holder>/root``. This is a real disk-full: SQLite gets ``ENOSPC`` from ``write(2)``.

For each: ``/readyz`` answers 503 naming the cause, ``POST /v1/turns`` answers 503 problem+json (never 500, never 201)
without the data directory's path, and every turn acknowledged is still there after a restart wherever the fault
left the acknowledged data in place (the WAL removed, the disk full, the database moved aside and back).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_server import REPO, TEST_MODEL_ENV, ServerProcess, await_serving, small_turn

PROBLEM = "application/problem+json"
PRE_FAULT_TURNS = 4
READY_RESULTS: dict[str, int] = {}
"""Each fault's ``/readyz`` status after it happened, for the figure the last test prints."""


def big_turn(turn_id: str) -> dict[str, Any]:
    """A turn of about 200 KB: storing it needs new pages in the write-ahead log."""
    return small_turn(turn_id, response="Order A-1 shipped on 2025-03-03 with DHL. " + "x" * 200_000)


class Service:
    """``provenance serve`` as a child process, optionally inside a namespace (``prefix``), its console output kept
    outside the data directory (which may be a filesystem only the namespace sees)."""

    def __init__(self, data_dir: Path, logs: Path, prefix: list[str] | None = None, files: Path | None = None) -> None:
        self.data_dir = data_dir  # the path the service is given
        self.files = files or data_dir  # the same directory as this process reaches it
        self.logs = logs
        self.prefix = prefix or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.runs = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def out(self) -> Path:
        return self.logs / f"serve-{self.runs}.out"

    def start(self, timeout: float = 60.0) -> Service:
        self.runs += 1
        self.logs.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "PROVENANCE_DATA_DIR": str(self.data_dir),
            "PROVENANCE_WARM_UP": "false",
            **TEST_MODEL_ENV,
        }
        errors = self.logs / f"serve-{self.runs}.err"
        with self.out.open("wb") as out, errors.open("wb") as err:
            self.proc = subprocess.Popen(
                [*self.prefix, sys.executable, "-m", "provenance_api.cli.main", "serve", "--port", "0"],
                env=env,
                stdout=out,
                stderr=err,
                cwd=REPO,
            )
        self.port = await_serving(self.proc, self.out, errors, timeout)
        return self

    def printed_a_new_admin_key(self) -> bool:
        return "Created the local admin key" in self.out.read_text()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def api(self) -> httpx.Client:
        key = (self.files / "admin.key").read_text().strip()
        return httpx.Client(base_url=self.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


@dataclass
class Fault:
    """What is done to the data directory (``files``, as this process reaches it), whether the acknowledged turns
    must survive a restart (after ``repair``), and whether a refused write names when to retry."""

    name: str
    damage: Callable[[Path, Path], None]  # (files, another service's database)
    keeps_acknowledged: bool
    repair: Callable[[Path], None] | None = None
    retry_after: bool = False
    namespace: bool = False
    notes: list[str] = field(default_factory=list)


def remove_wal(files: Path, other: Path) -> None:
    wal = files / "provenance.db-wal"
    assert wal.is_file()
    wal.unlink()


def recreate_empty(files: Path, other: Path) -> None:
    (files / "provenance.db").unlink()
    (files / "provenance.db").touch()


def replace_in_place(files: Path, other: Path) -> None:
    shutil.copyfile(other, files / "provenance.db")  # truncates and rewrites the same inode


def swap(files: Path, other: Path) -> None:
    os.rename(files / "provenance.db", files / "provenance.db.aside")
    shutil.copyfile(other, files / "incoming.db")
    os.rename(files / "incoming.db", files / "provenance.db")


def swap_back(files: Path) -> None:
    os.rename(files / "provenance.db.aside", files / "provenance.db")


def corrupt(files: Path, other: Path) -> None:
    db = files / "provenance.db"
    size = db.stat().st_size
    with db.open("r+b") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())


def fill_disk(files: Path, other: Path) -> None:
    with (files / "filler").open("wb", buffering=0) as f:
        for chunk in (1 << 20, 1 << 12):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    assert os.statvfs(files).f_bavail == 0


def free_disk(files: Path) -> None:
    (files / "filler").unlink()


FAULTS = [
    Fault("wal-removed", remove_wal, keeps_acknowledged=True),
    Fault("db-recreated-empty", recreate_empty, keeps_acknowledged=False),
    Fault("db-replaced-in-place", replace_in_place, keeps_acknowledged=False),
    Fault("db-swapped", swap, keeps_acknowledged=True, repair=swap_back),
    Fault("db-corrupted", corrupt, keeps_acknowledged=False),
    Fault("disk-full", fill_disk, keeps_acknowledged=True, repair=free_disk, retry_after=True, namespace=True),
]


@pytest.fixture(scope="module")
def other_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid database of another service instance (its own schema, admin key and turns), cleanly stopped."""
    root = tmp_path_factory.mktemp("other")
    other = ServerProcess(root / "data", env={"PROVENANCE_WARM_UP": "false"}).start()
    try:
        with httpx.Client(
            base_url=other.base_url,
            headers={"Authorization": f"Bearer {(root / 'data' / 'admin.key').read_text().strip()}"},
            timeout=30,
        ) as api:
            assert api.post("/v1/turns", json=small_turn("other-instance-turn")).status_code == 201
    finally:
        other.stop()
    copy = root / "other.db"
    shutil.copyfile(root / "data" / "provenance.db", copy)
    return copy


@pytest.fixture
def namespace(tmp_path: Path) -> Iterator[tuple[list[str], Path, Path]]:
    """A 16 MiB tmpfs mounted on ``tmp_path/data`` inside a user + mount namespace kept alive by a holder process:
    (the command prefix that runs inside it, the data dir as the service sees it, the same dir as seen here)."""
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.skip("util-linux unshare/nsenter are needed to mount a size-limited filesystem")
    data = tmp_path / "data"
    data.mkdir()
    holder = subprocess.Popen(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=16m tmpfs '{data}' && echo mounted && exec sleep 3600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        if line.strip() != b"mounted":
            holder.wait(5)
            assert holder.stderr is not None
            pytest.skip(f"no user namespace to mount a tmpfs in: {holder.stderr.read().decode()[:200]}")
        prefix = ["nsenter", "-t", str(holder.pid), "-U", "-m", "--preserve-credentials", f"--wd={REPO}"]
        yield prefix, data, Path(f"/proc/{holder.pid}/root{data}")
    finally:
        holder.kill()
        holder.wait(10)


def _assert_refused_write(answer: httpx.Response, fault: Fault, data_dir: Path) -> None:
    assert answer.status_code == 503, (fault.name, answer.status_code, answer.text[:500])
    assert answer.headers["content-type"].startswith(PROBLEM)
    body = answer.json()
    assert body["status"] == 503 and body["detail"] and body["fix"]
    assert str(data_dir) not in answer.text and "/tmp" not in answer.text  # no path reaches a tenant
    if fault.retry_after:
        assert int(answer.headers["retry-after"]) > 0


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_a_durability_fault_makes_the_service_unready_and_refuses_writes_with_503(
    fault: Fault, tmp_path: Path, other_database: Path, request: pytest.FixtureRequest
) -> None:
    if fault.namespace:
        prefix, data_dir, files = request.getfixturevalue("namespace")
    else:
        prefix, data_dir, files = [], tmp_path / "data", tmp_path / "data"
    service = Service(data_dir, tmp_path / "logs", prefix, files).start()
    acknowledged: dict[str, str] = {}
    refused: list[str] = []
    try:
        admin_key = (files / "admin.key").read_text().strip()
        with service.api() as api:
            for i in range(PRE_FAULT_TURNS):
                stored = api.post("/v1/turns", json=small_turn(f"before-{i}"))
                assert stored.status_code == 201
                acknowledged[f"before-{i}"] = stored.json()["digest"]
            assert api.get("/readyz").status_code == 200

            fault.damage(files, other_database)

            ready = api.get("/readyz")
            READY_RESULTS[fault.name] = ready.status_code
            assert ready.status_code == 503, (fault.name, ready.text[:500])
            assert ready.headers["content-type"].startswith(PROBLEM)
            assert ready.json()["detail"] not in ("", "ok")
            for i in range(3):
                turn_id = f"after-{i}"
                answer = api.post("/v1/turns", json=big_turn(turn_id))
                if answer.status_code == 201:
                    acknowledged[turn_id] = answer.json()["digest"]
                else:
                    refused.append(turn_id)
                _assert_refused_write(answer, fault, data_dir)
            assert api.get("/readyz").status_code == 503  # still: nothing healed it

            if fault.repair is not None and fault.name == "disk-full":  # space freed: ready again, writes taken
                fault.repair(files)
                assert api.get("/readyz").status_code == 200
                stored = api.post("/v1/turns", json=big_turn("after-space-freed"))
                assert stored.status_code == 201
                acknowledged["after-space-freed"] = stored.json()["digest"]
    finally:
        service.stop()

    if not fault.keeps_acknowledged:
        return  # the fault destroyed the data itself; what matters is that nothing was acknowledged after it
    if fault.repair is not None and fault.name != "disk-full":
        fault.repair(files)
    service.start()
    try:
        assert not service.printed_a_new_admin_key()
        assert (files / "admin.key").read_text().strip() == admin_key
        with service.api() as api:
            for turn_id, digest in acknowledged.items():
                got = api.get(f"/v1/turns/{turn_id}")
                assert got.status_code == 200, (fault.name, turn_id, got.status_code)
                assert got.json()["digest"] == digest
            for turn_id in refused:
                assert api.get(f"/v1/turns/{turn_id}").status_code == 404
            assert api.get("/v1/turns/other-instance-turn").status_code == 404  # never served the other database
    finally:
        service.stop()


def test_zz_figure_readyz_is_503_in_every_durability_fault(capsys: pytest.CaptureFixture[str]) -> None:
    if len(READY_RESULTS) != len(FAULTS):
        pytest.skip("the figure needs every fault's test to have run in this session")
    unready = sum(1 for status in READY_RESULTS.values() if status == 503)
    with capsys.disabled():
        print(f"\n/readyz 503 in {unready} of {len(FAULTS)} durability faults: {READY_RESULTS}")
    assert unready == len(FAULTS)


def test_driver_errors_that_mean_the_storage_cannot_take_data_are_storage_unavailable(tmp_path: Path) -> None:
    """Real driver errors: SQLite on a file of random bytes and on a read-only database, asyncpg's disk-full and
    lost-connection errors. Each becomes ``StorageUnavailable`` naming its cause, without the path; a constraint
    violation stays what it is."""
    import sqlite3

    import asyncpg.exceptions as pg

    from provenance_api.storage.session import unavailable_from

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(os.urandom(8192))
    with pytest.raises(sqlite3.DatabaseError) as not_a_db:
        sqlite3.connect(garbage).execute("SELECT * FROM sqlite_master").fetchall()
    readonly = tmp_path / "ro.db"
    sqlite3.connect(readonly).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(sqlite3.OperationalError) as read_only:
        con = sqlite3.connect(f"file:{readonly}?mode=ro", uri=True)
        con.execute("INSERT INTO t VALUES (1)")
    found = {
        "sqlite not a database": unavailable_from(not_a_db.value, "sqlite"),
        "sqlite read-only": unavailable_from(read_only.value, "sqlite"),
        "postgres disk full": unavailable_from(pg.DiskFullError("could not extend file"), "postgresql"),
        "postgres connection lost": unavailable_from(pg.ConnectionDoesNotExistError("closed"), "postgresql"),
    }
    causes = {name: (e.cause if e else None) for name, e in found.items()}
    assert causes == {
        "sqlite not a database": "not-a-database",
        "sqlite read-only": "read-only",
        "postgres disk full": "disk-full",
        "postgres connection lost": "unreachable",
    }
    assert all(e is not None and str(tmp_path) not in e.detail for e in found.values())
    assert found["postgres disk full"] is not None and found["postgres disk full"].retry_after
    assert unavailable_from(pg.UniqueViolationError("duplicate key"), "postgresql") is None
    with pytest.raises(sqlite3.IntegrityError) as constraint:
        con = sqlite3.connect(":memory:")
        con.execute("CREATE TABLE u (x UNIQUE)")
        con.execute("INSERT INTO u VALUES (1), (1)")
    assert unavailable_from(constraint.value, "sqlite") is None


def test_a_postgres_server_that_refuses_the_connection_is_storage_unavailable_without_its_address() -> None:
    """asyncpg raises a refused or timed-out connect as a bare ``OSError`` that SQLAlchemy's error hook never sees:
    the session still turns it into ``StorageUnavailable`` (a 503, not a 500), and its text does not carry the
    server's address; an ``OSError`` of the caller's own code inside the block stays what it is."""
    import asyncio
    import socket

    from sqlalchemy import text

    from provenance_api.storage.errors import StorageUnavailable
    from provenance_api.storage.session import Database

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there

    async def attempt() -> tuple[BaseException | None, BaseException | None]:
        db = Database(f"postgresql+asyncpg://provenance@127.0.0.1:{port}/provenance")
        caught: list[BaseException | None] = []
        for own_error in (False, True):
            try:
                async with db.session() as session:
                    if own_error:
                        raise FileNotFoundError("the caller's own file")
                    await session.execute(text("SELECT 1"))
                caught.append(None)
            except Exception as exc:
                caught.append(exc)
        await db.dispose()
        return caught[0], caught[1]

    driver, own = asyncio.run(attempt())
    assert isinstance(driver, StorageUnavailable) and driver.cause == "unreachable", repr(driver)
    assert str(port) not in str(driver) and "127.0.0.1" not in str(driver)
    assert isinstance(own, FileNotFoundError), repr(own)
