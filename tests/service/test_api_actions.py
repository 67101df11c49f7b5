"""The actions of a stored turn through the API (``GET /v1/turns/{id}/actions``) and the CLI (``provenance gate``):
one shape, the same numbers, scoped to the tenant, zero model calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.action_turns import IBAN, injected
from support.api_server import InProcessApi

from provenance_api.cli.main import main

PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessApi, httpx.Client]]:
    with (
        InProcessApi(tmp_path_factory.mktemp("actions"), warm_up=False) as srv,
        srv.client(srv.key("acme", "ann")) as client,
    ):
        assert client.post("/v1/turns", json=injected().model_dump(mode="json")).status_code == 201
        plain = {"turn_id": "t-plain", "query": "Hi", "response": "Hello! How can I help today?"}
        assert client.post("/v1/turns", json=plain).status_code == 201
        yield srv, client


def test_the_api_lists_each_action_with_its_sources_origin_and_the_screen(
    api: tuple[InProcessApi, httpx.Client],
) -> None:
    _, client = api
    r = client.get("/v1/turns/t-act/actions")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["summary"] == "2 actions: 1 steered by tool data" and body["steered"] == 1
    assert [(a["id"], a["tool"], a["call_id"], a["origin"]) for a in body["actions"]] == [
        ("a0", "fetch_page", "c1", "user"),
        ("a1", "transfer_money", "c2", "data"),
    ]
    page = next(s for s in body["sources"] if s["call_id"] == "c1")
    assert page["layer"] == "tools" and page["tool"] == "fetch_page"
    transfer = body["actions"][1]
    iban = next(a for a in transfer["argument_sources"] if a["path"] == "iban")
    assert iban["value"] == IBAN and iban["source_id"] == page["id"] and IBAN in iban["quote"]
    assert transfer["suspect_injection"] and transfer["injection"]["source_id"] == page["id"]
    assert transfer["reported_by"] == ["r1"]


def test_a_turn_without_tool_calls_has_no_actions_and_other_tenants_see_nothing(
    api: tuple[InProcessApi, httpx.Client],
) -> None:
    srv, client = api
    quiet = client.get("/v1/turns/t-plain/actions").json()
    assert quiet["summary"] == "no actions" and quiet["actions"] == [] and quiet["steered"] == 0
    with srv.client(srv.key("other", "bob")) as other:
        r = other.get("/v1/turns/t-act/actions")
    assert r.status_code == 404 and r.headers["content-type"].startswith(PROBLEM)
    missing = client.get("/v1/turns/nope/actions")
    assert missing.status_code == 404 and missing.json()["title"]


def test_the_cli_gate_prints_the_same_actions_and_counts_them(
    api: tuple[InProcessApi, httpx.Client], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, client = api
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps(injected().model_dump(mode="json")), encoding="utf-8")
    assert main(["gate", str(turn), "--json"]) == 0
    gate = json.loads(capsys.readouterr().out)
    served = client.get("/v1/turns/t-act/actions").json()
    assert gate["actions"] == served["actions"] and gate["sources"] == served["sources"]
    assert gate["summary"]["actions"] == 2 and gate["summary"]["steered_by_tool_data"] == 1
    assert gate["summary"]["line"].endswith("· 2 actions: 1 steered by tool data")
    assert main(["gate", str(turn)]) == 0
    text = capsys.readouterr().out
    assert "2 actions: 1 steered by tool data" in text and "steered by tool data: transfer_money" in text
    assert f"iban = '{IBAN}' ← s0, line 5" in text
