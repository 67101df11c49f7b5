"""The chain of custody, live and end to end: an MCP server written with the SDK (``support/mcp_tools_server.py``)
runs as a child of ``provenance gateway --stdio``; the SDK's client calls two of its tools through the gateway,
which records each result; the agent's conversation, its tool messages holding the results as the client got
them, is imported through the API into the same data directory. Every return is then ``gateway`` custody and
``provenance audit verify`` finds the custody log intact (exit 0). An edit of one stored return behind the
service's back — an SQL UPDATE of the stored turn — is named by ``audit verify`` (exit 1, the turn's record), and
the gate shows that return as ``history`` custody: its text no longer matches what the gateway recorded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import text
from support.api_server import InProcessApi
from support.cli_run import run_cli
from support.mcp_gateway import gateway_env, run_stdio_calls, stdio_gateway_command

from provenance_api.core.evidence import EvidenceRecord
from provenance_api.storage.session import Database

pytestmark = pytest.mark.gateway

TENANT = "acme"
SERVER = "weather"
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("forecast", {"city": "Oslo"}),
    ("invoice", {"vendor": "ACME", "amount": 12.5}),
]
FORECAST = "Forecast for Oslo: 12 °C, clear."  # what the test server answers for Oslo (3 °C per letter)
EDITED = "Forecast for Oslo: 31 °C, clear."


def database(data_dir: Path) -> Database:
    return Database(f"sqlite+aiosqlite:///{data_dir / 'provenance.db'}")


def sql(data_dir: Path, statement: str, **params: Any) -> tuple[int, list[Any]]:
    """One raw SQL statement on the data directory's database, committed: the rows it changed, the rows it read."""

    async def work() -> tuple[int, list[Any]]:
        db = database(data_dir)
        try:
            async with db.transaction() as session:
                found = await session.execute(text(statement), params)
                if statement.lstrip().upper().startswith("SELECT"):
                    return 0, list(found.all())
                changed: int = found.rowcount  # type: ignore[attr-defined]
                return changed, []
        finally:
            await db.dispose()

    return asyncio.run(work())


def evidence(data_dir: Path) -> list[EvidenceRecord]:
    from provenance_api.storage.evidence_records import list_evidence

    async def read() -> list[EvidenceRecord]:
        db = database(data_dir)
        try:
            return await list_evidence(db, TENANT)
        finally:
            await db.dispose()

    return asyncio.run(read())


def conversation(results: list[str]) -> dict[str, Any]:
    """The agent's conversation (OpenAI chat): its calls, the results as the client got them, its answer."""
    return {
        "conversation_id": "trip",
        "messages": [
            {"role": "system", "content": "You are a travel and accounts assistant."},
            {"role": "user", "content": "What is the weather in Oslo, and what does the ACME invoice say?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                    for n, (name, args) in enumerate(CALLS, start=1)
                ],
            },
            *({"role": "tool", "tool_call_id": f"c{n}", "content": r} for n, r in enumerate(results, start=1)),
            {
                "role": "assistant",
                "content": "Oslo is 12 °C and clear. The ACME invoice is for 12.5 to IBAN DE89370400440532013000.",
            },
        ],
    }


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str], list[EvidenceRecord]]]:
    """A data directory the gateway recorded the two calls in, the results the client got, and the records."""
    data_dir = tmp_path_factory.mktemp("chain")
    session = run_stdio_calls(
        stdio_gateway_command(SERVER), CALLS, env=gateway_env(data_dir, PROVENANCE_GATEWAY_TENANT=TENANT)
    )
    results = [o.result for o in session.outcomes]
    assert len(results) == len(CALLS) and all(r is not None for r in results), session.outcomes
    yield data_dir, [r or "" for r in results], evidence(data_dir)


def returns(api: Any, turn_id: str) -> dict[str, tuple[Any, Any, Any]]:
    """Each tool return of the turn on the gate (``/actions``): its custody, server and the record's time."""
    answer = api.get(f"/v1/turns/{quote(turn_id, safe='')}/actions")
    assert answer.status_code == 200, answer.text
    return {
        s["tool"]: (s["custody"], s["custody_server"], s["custody_observed_at"])
        for s in answer.json()["sources"]
        if s["layer"] == "tools"
    }


def test_a_live_run_is_gateway_custody_and_an_edited_return_is_caught(
    chain: tuple[Path, list[str], list[EvidenceRecord]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data_dir, results, records = chain
    assert [(r.server, r.tool, r.is_error) for r in records] == [
        (SERVER, "forecast", False),
        (SERVER, "invoice", False),
    ]
    assert FORECAST in json.loads(results[0])["content"][0]["text"]
    when = [r.observed_at.isoformat().replace("+00:00", "Z") for r in records]
    verified = {"forecast": ("gateway", SERVER, when[0]), "invoice": ("gateway", SERVER, when[1])}

    with InProcessApi(data_dir, warm_up=False) as srv, srv.client(srv.key(TENANT, "ann")) as api:
        done = api.post("/v1/imports", params={"name": "live"}, content=json.dumps(conversation(results)) + "\n")
        assert done.status_code == 200 and (done.json()["imported"], done.json()["rejected"]) == (1, 0), done.text
        (turn_id,) = [t["turn_id"] for t in api.get("/v1/turns").json()["items"]]
        assert returns(api, turn_id) == verified  # custody verified on every return

    capsys.readouterr()  # the service's first start printed its admin key
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(data_dir))
    code, report, err = run_cli(capsys, "audit", "verify", "--tenant", TENANT, "--json")
    assert code == 0 and report["intact"] is True and report["checked"]["turns"] == 1, (report, err)

    _, recorded = sql(
        data_dir,
        "SELECT seq FROM custody_log WHERE tenant = :tenant AND kind = 'turn_stored' AND subject = :turn",
        tenant=TENANT,
        turn=turn_id,
    )
    assert len(recorded) == 1

    # an operator with database access rewrites one stored return
    changed, _ = sql(
        data_dir,
        "UPDATE stored_turns SET body = REPLACE(body, :old, :new) WHERE tenant = :tenant AND turn_id = :turn",
        old=FORECAST,
        new=EDITED,
        tenant=TENANT,
        turn=turn_id,
    )
    assert changed == 1

    code, report, err = run_cli(capsys, "audit", "verify", "--tenant", TENANT, "--json")
    assert code == 1 and report["intact"] is False, (report, err)
    broken = report["broken"]
    assert (broken["seq"], broken["kind"], broken["subject"], broken["problem"]) == (
        recorded[0][0],
        "turn_stored",
        turn_id,
        "content_differs",
    )
    assert any("tools" in field for field in broken["differs"]), broken
    code, shown, _ = run_cli(capsys, "audit", "verify", "--tenant", TENANT)
    assert code == 1 and turn_id in shown and "BROKEN" in shown

    with InProcessApi(data_dir, warm_up=False) as srv, srv.client(srv.key(TENANT, "ann")) as api:
        stored = api.get(f"/v1/turns/{quote(turn_id, safe='')}").json()["turn"]
        assert EDITED in json.dumps(stored, ensure_ascii=False)  # the service serves the edited text
        assert returns(api, turn_id) == {"forecast": ("history", None, None), "invoice": verified["invoice"]}
