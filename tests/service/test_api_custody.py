"""Envelopes, ages and freshness through the API: ``GET /v1/turns/{id}/segments`` gives each source its evidence
envelope and its age at the answer, and ``GET /v1/turns/{id}/actions`` checks the operator's freshness rules
(``PROVENANCE_FRESHNESS_RULES``) on each action — the same as ``provenance gate --json``."""

from __future__ import annotations

from pathlib import Path

from support.api_server import InProcessApi
from support.custody_turns import payment_turn

RULES = """
[[rules]]
action_tool = "send_money"
evidence_tool = "get_balance"
max_age_seconds = 30
"""


def test_segments_carry_envelopes_and_ages_and_actions_the_freshness_breach(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    with (
        InProcessApi(tmp_path / "data", warm_up=False, freshness_rules=rules) as srv,
        srv.client(srv.key("acme", "ann")) as client,
    ):
        assert client.post("/v1/turns", json=payment_turn().model_dump(mode="json")).status_code == 201
        segments = client.get("/v1/turns/pay/segments")
        actions = client.get("/v1/turns/pay/actions")
    assert segments.status_code == 200, segments.text
    body = segments.json()
    assert body["answered_at"] == "2026-03-02T09:00:50Z"
    balance = body["sources"][0]
    assert balance["envelope"]["tool"] == "get_balance" and balance["envelope"]["principal"] == "alice"
    assert (balance["age_seconds"], balance["age"]) == (50.0, "50 s")
    assert actions.status_code == 200, actions.text
    payment = next(a for a in actions.json()["actions"] if a["tool"] == "send_money")
    (finding,) = payment["freshness"]
    assert (finding["status"], finding["source_id"], finding["age_seconds"]) == ("breach", "s0", 45.0)
    assert actions.json()["freshness_rules"] == 1
