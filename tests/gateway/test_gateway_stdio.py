"""The stdio gateway with real processes and the real SDK: the test server (``support/mcp_tools_server.py``) called
by the SDK's ``ClientSession`` directly and through ``provenance gateway --stdio``. The client gets the same thing
either way, results byte for byte and failures error for error, and each result is recorded with its fields."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.mcp_gateway import (
    gateway_env,
    run_stdio_calls,
    server_command,
    stdio_gateway_command,
    stored_evidence,
)

from provenance_api.gateway.recorder import GAPS_FILE

pytestmark = pytest.mark.gateway

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("forecast", {"city": "Oslo"}),
    ("invoice", {"vendor": "ACME", "amount": 12.5}),
    ("refuse", {"reason": "over budget"}),
    ("garbage", {}),
    ("forecast", {"city": "Reykjavík"}),
    ("die", {}),
    ("forecast", {"city": "never reached"}),
]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _text_of(result_json: str) -> str:
    """The text blocks of a CallToolResult the client received, joined: what an imported return holds."""
    blocks = json.loads(result_json)["content"]
    return "\n".join(b["text"] for b in blocks if b["type"] == "text")


def test_through_the_gateway_the_client_gets_what_it_gets_directly_and_every_result_is_recorded(
    tmp_path: Path,
) -> None:
    direct = run_stdio_calls(server_command(), CALLS)
    before = datetime.now(UTC)
    gated = run_stdio_calls(stdio_gateway_command("weather"), CALLS, env=gateway_env(tmp_path))
    after = datetime.now(UTC)

    assert [o.tool for o in direct.outcomes] == ["forecast", "invoice", "refuse", "garbage", "forecast", "die"]
    assert gated.outcomes == direct.outcomes  # results byte for byte, the dying server's error as it was
    assert gated.transport_errors == direct.transport_errors
    assert direct.outcomes[-1].error is not None and "Connection closed" in direct.outcomes[-1].error

    records = stored_evidence(tmp_path)
    answered = [o for o in direct.outcomes if o.result is not None]
    assert [(r.tool, r.digest) for r in records] == [(o.tool, _sha(_text_of(o.result or ""))) for o in answered]
    arguments = [args for tool, args in CALLS[:5]]
    assert [r.arguments_digest for r in records] == [
        _sha(json.dumps(a, sort_keys=True, separators=(",", ":"), ensure_ascii=False)) for a in arguments
    ]
    assert {(r.server, r.principal, r.tenant, r.transport, r.kind) for r in records} == {
        ("weather", "ci-agent@test", "local", "stdio", "result")
    }
    assert [r.is_error for r in records] == [False, False, True, False, False]
    assert all(before <= r.observed_at <= after for r in records)
    assert [r.observed_at for r in records] == sorted(r.observed_at for r in records)


def test_a_hanging_server_times_the_client_out_the_same_way(tmp_path: Path) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [("hang", {}), ("forecast", {"city": "Lima"})]
    wait = {"hang": 4.0}  # the client's own timeout on the call that never returns; the session's stays generous
    direct = run_stdio_calls(server_command(), calls, tool_timeouts=wait)
    gated = run_stdio_calls(stdio_gateway_command(), calls, env=gateway_env(tmp_path), tool_timeouts=wait)
    assert direct.outcomes[0].error is not None and direct.outcomes[1].result is not None
    assert gated.outcomes == direct.outcomes
    assert [r.tool for r in stored_evidence(tmp_path)] == ["forecast"]  # the hung call has no result to record


def test_a_read_only_store_loses_no_forwarded_result_and_reports_the_gap(tmp_path: Path) -> None:
    stored_evidence(tmp_path)  # creates and migrates the database, then it is opened read-only
    read_only = f"sqlite+aiosqlite:///file:{tmp_path / 'provenance.db'}?mode=ro&uri=true"
    calls = CALLS[:3]
    direct = run_stdio_calls(server_command(), calls)
    errlog = tmp_path / "gateway.err"
    gated = run_stdio_calls(
        stdio_gateway_command(), calls, env=gateway_env(tmp_path, PROVENANCE_DATABASE_URL=read_only), errlog=errlog
    )
    assert gated.outcomes == direct.outcomes
    assert stored_evidence(tmp_path) == []
    said = errlog.read_text(encoding="utf-8")
    assert "provenance gateway: 3 results not recorded: read-only" in said
    gaps = [json.loads(line) for line in (tmp_path / GAPS_FILE).read_text(encoding="utf-8").splitlines()]
    assert [(g["kind"], g["missed"], g["server"]) for g in gaps] == [("gap", 3, "tools")]
    assert gaps[0]["cause"].startswith("read-only")


def test_a_published_server_from_the_registry_runs_behind_the_gateway(tmp_path: Path) -> None:
    """``mcp-server-time`` (the reference time server, installed from the lock) through the gateway: the same
    answers, each recorded under the name the gateway was given."""
    import sys

    server = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("convert_time", {"source_timezone": "Europe/Oslo", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        ("convert_time", {"source_timezone": "Nowhere/Atlantis", "time": "12:00", "target_timezone": "UTC"}),
    ]
    direct = run_stdio_calls(server, calls)
    gateway = [*stdio_gateway_command("time")[: -len(server_command())], *server]
    gated = run_stdio_calls(gateway, calls, env=gateway_env(tmp_path))
    assert direct.outcomes[0].result is not None and '"Asia/Tokyo"' in direct.outcomes[0].result
    assert gated.outcomes == direct.outcomes
    records = stored_evidence(tmp_path)
    assert [(r.server, r.tool) for r in records] == [("time", "convert_time")] * 2
    assert records[0].digest == _sha(_text_of(direct.outcomes[0].result or ""))
    assert records[1].is_error == json.loads(direct.outcomes[1].result or "{}").get("isError", False)
