"""Real Redis and Postgres servers for the tests that need them.

``scripts/services.sh`` (run by ``scripts/test.sh``) starts both on loopback and exports
``PROVENANCE_TEST_REDIS_URL`` / ``PROVENANCE_TEST_POSTGRES_URL``; a test run without them starts
throwaway servers itself from the Debian binaries (``redis-server``, ``initdb``/``pg_ctl`` of
PostgreSQL, run as the ``postgres`` user when we are root). When neither works, the tests that need
the server FAIL with a message saying what to install or set — they are never skipped.
"""

from __future__ import annotations

import asyncio
import glob
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REDIS_ENV = "PROVENANCE_TEST_REDIS_URL"
POSTGRES_ENV = "PROVENANCE_TEST_POSTGRES_URL"


class ServiceUnavailable(RuntimeError):
    """The server is neither configured nor startable here: the message says how to fix it."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_for_port(port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ServiceUnavailable(f"the server exited with status {proc.returncode} before listening")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise ServiceUnavailable(f"nothing listened on 127.0.0.1:{port} within {timeout:.0f} s")


# --------------------------------------------------------------------------- Redis


class RedisServer:
    """A throwaway ``redis-server`` on loopback, no persistence."""

    def __init__(self) -> None:
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServiceUnavailable(
                f"these tests need Redis: set {REDIS_ENV} (./scripts/test.sh does) or install the Debian "
                "package redis-server (./scripts/system-deps.sh does)"
            )
        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for_port(self.port, 20, self.proc)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# --------------------------------------------------------------------------- Postgres


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


class PostgresCluster:
    """A throwaway PostgreSQL cluster (``initdb`` + ``pg_ctl``) on loopback with trust auth."""

    def __init__(self) -> None:
        self.port = 0
        self.root: Path | None = None
        self._as: list[str] = []

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        done = subprocess.run([*self._as, *argv], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise ServiceUnavailable(f"{Path(argv[0]).name} failed: {(done.stderr or done.stdout)[-800:]}")

    def start(self) -> PostgresCluster:
        initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
        if initdb is None or pg_ctl is None:
            raise ServiceUnavailable(
                f"these tests need PostgreSQL: set {POSTGRES_ENV} (./scripts/test.sh does) or install the "
                "Debian package postgresql (./scripts/system-deps.sh does)"
            )
        self.root = Path(tempfile.mkdtemp(prefix="provenance-pg-"))
        if os.geteuid() == 0:  # postgres refuses to run as root: run it as the postgres user
            runuser = shutil.which("runuser")
            if runuser is None:
                raise ServiceUnavailable("running as root without runuser: cannot start PostgreSQL as postgres")
            shutil.chown(self.root, "postgres", "postgres")
            self._as = [runuser, "-u", "postgres", "--"]
        self.root.chmod(0o700)
        data = self.root / "data"
        self._run(initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        self.port = free_port()
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(pg_ctl, "-D", str(data), "-o", options, "-l", str(self.root / "log"), "-w", "-t", "60", "start")
        return self

    def stop(self) -> None:
        if self.root is None:
            return
        pg_ctl = _pg_bin("pg_ctl")
        if pg_ctl is not None and (self.root / "data" / "postmaster.pid").exists():
            subprocess.run(
                [*self._as, pg_ctl, "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None


def _asyncpg_dsn(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme="postgresql"))


def create_database(server_url: str, prefix: str = "t") -> str:
    """A new, empty database on the server of ``server_url``; returns its SQLAlchemy URL."""
    import asyncpg

    name = f"{prefix}_{secrets.token_hex(6)}"

    async def work() -> None:
        conn = await asyncpg.connect(_asyncpg_dsn(server_url))
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()

    asyncio.run(work())
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@dataclass(frozen=True)
class DbBackend:
    name: str
    server_url: str | None

    def fresh_url(self) -> str | None:
        """A new empty database: None means SQLite in the service's data directory."""
        if self.server_url is None:
            return None
        return create_database(self.server_url)
