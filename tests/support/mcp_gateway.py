"""Driving MCP servers with the official SDK's client, directly and through ``provenance gateway``.

``run_calls`` opens a ``ClientSession`` over stdio (``stdio_client``) or streamable HTTP
(``streamable_http_client``), initialises, makes the given calls in order and returns what the client got for
each — the ``CallToolResult`` as JSON, or the error's type, code and message — so a test can compare a run through
the gateway with a direct run outcome by outcome. Servers and gateways are real child processes.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from provenance_api.core.evidence import EvidenceRecord

SERVER_SCRIPT = Path(__file__).with_name("mcp_tools_server.py")
GATEWAY = [sys.executable, "-m", "provenance_api.cli.main", "gateway"]
START_DEADLINE = 120.0  # a child process on a loaded 2-core machine: only stops a wait that would hang


def server_command() -> list[str]:
    return [sys.executable, str(SERVER_SCRIPT)]


def stdio_gateway_command(name: str = "tools") -> list[str]:
    return [*GATEWAY, "--stdio", "--name", name, "--", *server_command()]


def gateway_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """What a gateway child needs: its data directory, its principal and tenant, offline settings."""
    return {
        "PROVENANCE_DATA_DIR": str(data_dir),
        "PROVENANCE_GATEWAY_PRINCIPAL": "ci-agent@test",
        "PROVENANCE_GATEWAY_TENANT": "local",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        **extra,
    }


@dataclass(frozen=True)
class Outcome:
    """What the client got for one call: ``result`` (the CallToolResult's JSON) or the error it raised."""

    tool: str
    result: str | None = None
    error: str | None = None

    @classmethod
    def of_error(cls, tool: str, exc: BaseException) -> Outcome:
        code = getattr(getattr(exc, "error", None), "code", None)
        return cls(tool, error=f"{type(exc).__name__} code={code} {exc}")


@dataclass
class Session:
    outcomes: list[Outcome] = field(default_factory=list)
    transport_errors: list[str] = field(default_factory=list)
    """What the transport handed the client that is not a message (a line that is not JSON-RPC), by type."""


async def _drive(
    read: Any,
    write: Any,
    calls: Sequence[tuple[str, dict[str, Any]]],
    timeout: float,
    tool_timeouts: dict[str, float] | None = None,
) -> Session:
    out = Session()

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            out.transport_errors.append(type(message).__name__)

    async with ClientSession(read, write, read_timeout_seconds=timeout, message_handler=on_message) as session:
        await session.initialize()
        for tool, arguments in calls:
            try:
                result = await session.call_tool(tool, arguments, (tool_timeouts or {}).get(tool))
            except Exception as exc:  # the outcome under test: compared, not raised
                out.outcomes.append(Outcome.of_error(tool, exc))
                if "Connection closed" in str(exc):
                    break
            else:
                out.outcomes.append(Outcome(tool, result=result.model_dump_json(by_alias=True)))
    return out


def run_stdio_calls(
    command: Sequence[str],
    calls: Sequence[tuple[str, dict[str, Any]]],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 60.0,
    errlog: Path | None = None,
    tool_timeouts: dict[str, float] | None = None,
) -> Session:
    """The calls made over stdio to the server ``command`` starts (the server itself, or a gateway in front)."""
    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=env)

    async def main(err: TextIO) -> Session:
        found = Session()
        try:
            async with stdio_client(params, errlog=err) as (read, write):
                found = await _drive(read, write, calls, timeout, tool_timeouts)
        except Exception as exc:  # a session torn down by a dying server: keep the outcomes so far
            found.outcomes.append(Outcome.of_error("(session)", _leaf(exc)))
        return found

    if errlog is None:
        return anyio.run(main, sys.stderr)
    with errlog.open("a", encoding="utf-8") as err:
        return anyio.run(main, err)


def run_http_calls(url: str, calls: Sequence[tuple[str, dict[str, Any]]], *, timeout: float = 60.0) -> Session:
    async def main() -> Session:
        found = Session()
        try:
            async with streamable_http_client(url) as (read, write):
                found = await _drive(read, write, calls, timeout)
        except Exception as exc:
            found.outcomes.append(Outcome.of_error("(session)", _leaf(exc)))
        return found

    return anyio.run(main)


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_DEADLINE
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listened on {port} within {START_DEADLINE:.0f} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


@contextmanager
def http_server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The test server over streamable HTTP on a free loopback port: (its URL, its process)."""
    port = free_port()
    proc = subprocess.Popen([*server_command(), "http", str(port)], stdout=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        _stop(proc)


@dataclass
class HttpGatewayProcess:
    url: str
    proc: subprocess.Popen[bytes]
    stderr: list[str]


@contextmanager
def http_gateway(upstream: str, env: dict[str, str], name: str = "tools-http") -> Iterator[HttpGatewayProcess]:
    """``provenance gateway --http UPSTREAM`` on a free port; its URL read from the line it prints."""
    proc = subprocess.Popen(
        [*GATEWAY, "--http", upstream, "--name", name],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            lines.append(raw.decode("utf-8", "replace"))
            if "listening on" in lines[-1]:
                found.set()
        found.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        found.wait(START_DEADLINE)
        match = next((re.search(r"listening on (\S+)", line) for line in lines if "listening on" in line), None)
        if match is None:
            raise RuntimeError(f"the gateway did not start: {''.join(lines)[-2000:]}")
        yield HttpGatewayProcess(match.group(1), proc, lines)
    finally:
        _stop(proc)


def stored_evidence(data_dir: Path) -> list[EvidenceRecord]:
    """The evidence records the gateway wrote into ``data_dir``'s store, for the local tenant (migrating a new
    store first)."""
    from provenance_api.storage.evidence_records import list_evidence
    from provenance_api.storage.session import Database

    async def read() -> list[EvidenceRecord]:
        db = Database(f"sqlite+aiosqlite:///{data_dir / 'provenance.db'}")
        try:
            await db.migrate()
            return await list_evidence(db, "local")
        finally:
            await db.dispose()

    return anyio.run(read)
