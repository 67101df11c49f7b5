"""From a live gateway run to custody on an imported turn: the SDK's client calls the test server through
``provenance gateway``, the agent's conversation (OpenAI chat, the tool messages holding the results as the client
got them) is imported, and every return the gateway relayed is ``gateway`` custody — with the record's time and
server — while a return it never saw is ``history``; on ``provenance gate --json`` and on the API alike."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.api_server import InProcessApi
from support.cli_run import run_cli
from support.mcp_gateway import gateway_env, run_stdio_calls, stdio_gateway_command

from provenance_api.core.evidence import EvidenceRecord
from provenance_api.importers import import_conversation

pytestmark = pytest.mark.gateway

TENANT = "acme"
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("forecast", {"city": "Oslo"}),
    ("invoice", {"vendor": "ACME", "amount": 12.5}),
]
UNSEEN = "ACME trades at 41.20 USD (from a tool the gateway never relayed)."


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str], list[EvidenceRecord]]]:
    """A data directory the gateway recorded two calls in, the results as the client got them, and the records."""
    data_dir = tmp_path_factory.mktemp("custody")
    session = run_stdio_calls(
        stdio_gateway_command("weather"), CALLS, env=gateway_env(data_dir, PROVENANCE_GATEWAY_TENANT=TENANT)
    )
    results = [o.result for o in session.outcomes]
    assert all(r is not None for r in results), session.outcomes
    from provenance_api.storage.evidence_records import list_evidence
    from provenance_api.storage.session import Database

    async def read() -> list[EvidenceRecord]:
        db = Database(f"sqlite+aiosqlite:///{data_dir / 'provenance.db'}")
        try:
            return await list_evidence(db, TENANT)
        finally:
            await db.dispose()

    yield data_dir, [r or "" for r in results], asyncio.run(read())


def _conversation(results: list[str]) -> list[dict[str, Any]]:
    calls = [("c1", "forecast", CALLS[0][1]), ("c2", "invoice", CALLS[1][1]), ("c3", "stock_price", {"ticker": "ACME"})]
    return [
        {"role": "system", "content": "You are a travel and accounts assistant."},
        {"role": "user", "content": "What is the weather in Oslo, what does the ACME invoice say, and ACME's price?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for cid, name, args in calls
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": results[0]},
        {"role": "tool", "tool_call_id": "c2", "content": results[1]},
        {"role": "tool", "tool_call_id": "c3", "content": UNSEEN},
        {
            "role": "assistant",
            "content": "Oslo is 12 °C and clear. The ACME invoice is for 12.5 to IBAN DE89370400440532013000. "
            "ACME trades at 41.20 USD.",
        },
    ]


def _tool_custody(sources: list[dict[str, Any]]) -> dict[str, tuple[Any, Any, Any]]:
    return {
        s["tool"]: (s["custody"], s["custody_server"], s["custody_observed_at"])
        for s in sources
        if s["layer"] == "tools"
    }


def test_gate_binds_each_relayed_return_to_its_record_and_the_rest_to_the_history(
    recorded: tuple[Path, list[str], list[EvidenceRecord]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data_dir, results, records = recorded
    assert [r.tool for r in records] == ["forecast", "invoice"]
    log = tmp_path / "conversation.json"
    log.write_text(json.dumps({"messages": _conversation(results)}), encoding="utf-8")
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(data_dir))
    monkeypatch.setenv("PROVENANCE_GATEWAY_TENANT", TENANT)

    code, out, err = run_cli(capsys, "gate", str(log), "--json")
    assert code == 0, err
    when = [r.observed_at.isoformat().replace("+00:00", "Z") for r in records]
    assert _tool_custody(out["sources"]) == {
        "forecast": ("gateway", "weather", when[0]),
        "invoice": ("gateway", "weather", when[1]),
        "stock_price": ("history", None, None),
    }
    assert {s["custody"] for s in out["sources"] if s["layer"] != "tools"} == {None}

    monkeypatch.setenv("PROVENANCE_GATEWAY_TENANT", "someone-else")  # another tenant's records bind nothing
    code, out, _ = run_cli(capsys, "gate", str(log), "--json")
    assert {v[0] for v in _tool_custody(out["sources"]).values()} == {"history"}


def test_the_api_shows_the_same_custody_on_an_imported_turn(
    recorded: tuple[Path, list[str], list[EvidenceRecord]],
) -> None:
    data_dir, results, records = recorded
    turns = import_conversation(_conversation(results), conversation_id="trip").turns
    with InProcessApi(data_dir, warm_up=False) as srv, srv.client(srv.key(TENANT, "ann")) as client:
        assert client.post("/v1/turns", json=turns[-1].model_dump(mode="json")).status_code == 201
        actions = client.get(f"/v1/turns/{turns[-1].turn_id}/actions")
        segments = client.get(f"/v1/turns/{turns[-1].turn_id}/segments")
        with srv.client(srv.key("other", "bob")) as other:
            assert other.post("/v1/turns", json=turns[-1].model_dump(mode="json")).status_code == 201
            elsewhere = other.get(f"/v1/turns/{turns[-1].turn_id}/actions").json()
    assert actions.status_code == 200, actions.text
    when = [r.observed_at.isoformat().replace("+00:00", "Z") for r in records]
    expected = {
        "forecast": ("gateway", "weather", when[0]),
        "invoice": ("gateway", "weather", when[1]),
        "stock_price": ("history", None, None),
    }
    assert _tool_custody(actions.json()["sources"]) == expected
    assert segments.status_code == 200, segments.text
    assert _tool_custody(segments.json()["sources"]) == expected
    assert {v[0] for v in _tool_custody(elsewhere["sources"]).values()} == {"history"}
