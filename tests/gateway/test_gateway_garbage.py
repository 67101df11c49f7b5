"""A server that answers tool calls with garbage (``support/mcp_garbage_server.py``), called by the SDK's client
directly and through ``provenance gateway``: the client gets the same error either way, the gateway goes on
relaying (the next call works as it does directly), and only real results are recorded — a line or body that is
not JSON, JSON that is not JSON-RPC, a ``result`` that is not a ``CallToolResult``, a page of the wrong type or
bytes that are not HTTP leave no record."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.mcp_gateway import (
    GATEWAY,
    free_port,
    gateway_env,
    http_gateway,
    run_http_calls,
    run_stdio_calls,
    stored_evidence,
    wait_for_port,
)

from provenance_api.gateway.observe import Identity, Observer

pytestmark = pytest.mark.gateway

GARBAGE_SERVER = [sys.executable, str(Path(__file__).parents[1] / "support" / "mcp_garbage_server.py")]
Calls = list[tuple[str, dict[str, Any]]]


def _forecast_digest(city: str) -> str:
    return hashlib.sha256(f"Forecast for {city}: clear.".encode()).hexdigest()


@contextmanager
def garbage_http_server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    proc = subprocess.Popen([*GARBAGE_SERVER, "http", str(port)], stdout=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.kill()
        proc.wait(timeout=20)


def test_over_stdio_a_garbage_answer_reaches_the_client_as_it_would_directly_and_is_not_recorded(
    tmp_path: Path,
) -> None:
    calls: Calls = [
        ("forecast", {"city": "Oslo"}),
        ("not_json", {}),
        ("forecast", {"city": "Lima"}),
        ("not_jsonrpc", {}),
        ("bad_result", {}),
        ("forecast", {"city": "Rome"}),
    ]
    wait = {"not_json": 2.0, "not_jsonrpc": 2.0}  # no answer the client can pair: its own timeout ends the call
    direct = run_stdio_calls(GARBAGE_SERVER, calls, tool_timeouts=wait)
    errlog = tmp_path / "gateway.err"
    gateway = [*GATEWAY, "--stdio", "--name", "garbage", "--", *GARBAGE_SERVER]
    gated = run_stdio_calls(gateway, calls, env=gateway_env(tmp_path), tool_timeouts=wait, errlog=errlog)

    outcomes = {o.tool: o for o in direct.outcomes}
    assert [o.result is not None for o in direct.outcomes] == [True, False, True, False, False, True]
    assert "timed out" in (outcomes["not_json"].error or "")
    assert "validation error for CallToolResult" in (outcomes["bad_result"].error or "")
    assert direct.transport_errors == ["ValidationError", "ValidationError"]  # the two lines that are no message
    assert gated.outcomes == direct.outcomes
    assert gated.transport_errors == direct.transport_errors
    assert "Traceback" not in errlog.read_text(encoding="utf-8")

    records = stored_evidence(tmp_path)
    assert [(r.tool, r.digest) for r in records] == [
        ("forecast", _forecast_digest(city)) for city in ("Oslo", "Lima", "Rome")
    ]


def test_over_http_a_garbage_body_reaches_the_client_as_it_would_directly_and_is_not_recorded(
    tmp_path: Path,
) -> None:
    calls: Calls = [
        ("forecast", {"city": "Oslo"}),
        ("not_json", {}),
        ("wrong_type", {}),
        ("not_jsonrpc", {}),
        ("bad_result", {}),
        ("forecast", {"city": "Lima"}),
    ]
    with garbage_http_server() as (url, _server):
        direct = run_http_calls(url, calls)
        with http_gateway(url, gateway_env(tmp_path), name="garbage-http") as gateway:
            gated = run_http_calls(gateway.url, calls)
            assert gateway.proc.poll() is None

    errors = [o.error or "" for o in direct.outcomes[1:5]]
    assert errors[0].startswith("MCPError code=-32700 Failed to parse JSON response")
    assert errors[1] == "MCPError code=-32600 Unexpected content type: text/html; charset=utf-8"
    assert errors[2].startswith("MCPError code=-32700 Failed to parse JSON response")
    assert errors[3].startswith("ValidationError code=None 1 validation error for CallToolResult")
    assert direct.outcomes[5].result is not None
    assert gated.outcomes == direct.outcomes
    assert "Traceback" not in "".join(gateway.stderr)

    records = stored_evidence(tmp_path)
    assert [(r.tool, r.digest, r.transport) for r in records] == [
        ("forecast", _forecast_digest(city), "http") for city in ("Oslo", "Lima")
    ]


def test_over_http_bytes_that_are_not_http_end_the_session_as_they_would_directly_and_the_gateway_goes_on(
    tmp_path: Path,
) -> None:
    calls: Calls = [("forecast", {"city": "Oslo"}), ("not_http", {})]
    after: Calls = [("forecast", {"city": "Rome"})]
    with garbage_http_server() as (url, _server):
        direct, direct_after = run_http_calls(url, calls), run_http_calls(url, after)
        with http_gateway(url, gateway_env(tmp_path), name="garbage-http") as gateway:
            gated, gated_after = run_http_calls(gateway.url, calls), run_http_calls(gateway.url, after)

    [broken] = direct.outcomes
    assert broken.tool == "(session)" and (broken.error or "").startswith("RemoteProtocolError")
    assert "illegal status line" in (broken.error or "")
    assert gated.outcomes == direct.outcomes  # not a 502 of the gateway's: the server's bytes, as they came
    assert direct_after.outcomes[0].result is not None
    assert gated_after.outcomes == direct_after.outcomes
    records = stored_evidence(tmp_path)
    assert [(r.tool, r.digest) for r in records] == [("forecast", _forecast_digest(c)) for c in ("Oslo", "Rome")]


def test_a_result_the_client_cannot_read_is_passed_over_and_a_real_one_on_the_same_id_still_recorded() -> None:
    observer = Observer(Identity(tenant="t1", principal="ops@host", server="files", transport="http"))
    call = b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read","arguments":{}}}'
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    for bogus in (
        b'{"jsonrpc":"2.0","id":4,"result":{"content":"sunny"}}',
        b'{"jsonrpc":"2.0","id":4,"result":{"content":[{"text":"no type"}]}}',
        b'{"jsonrpc":"2.0","id":4,"result":"sunny"}',
        b'{"weather":"sunny"}',
        b"this is not JSON {",
    ):
        observer.request(call, "c")
        assert observer.response(bogus, now, "c") == []
    observer.request(call, "c")
    [record] = observer.response(b'{"jsonrpc":"2.0","id":4,"result":{"content":[]}}', now, "c")
    assert (record.tool, record.request_id) == ("read", "4")
