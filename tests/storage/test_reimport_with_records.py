"""A history imported again after its importer learned to keep recorded times and origins (evidence envelopes)
is the turn already stored — never a conflict — while any other difference still is."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from support.api_server import InProcessApi, small_turn

from provenance_api.storage.crud_turns import same_turn


def with_records(turn: dict[str, Any]) -> dict[str, Any]:
    """``turn`` as the importer writes it today: the call's times and its return's origin recorded."""
    recorded = copy.deepcopy(turn)
    call = recorded["response_payload"]["tool_calls"][0]
    call.update(
        made_at="2025-03-03T10:00:00+00:00",
        observed_at="2025-03-03T10:00:01+00:00",
        provenance={"server": "orders"},
    )
    return recorded


def body(turn: dict[str, Any]) -> str:
    return json.dumps(turn, sort_keys=True)


def test_recorded_times_and_origins_the_stored_turn_lacks_are_not_a_difference() -> None:
    old = small_turn()
    assert same_turn(body(old), body(with_records(old)))


def test_a_changed_return_or_a_changed_recorded_time_is_still_a_difference() -> None:
    old = small_turn()
    edited = with_records(old)
    edited["response_payload"]["tool_calls"][0]["response"] = "Order A-1 is lost."
    assert not same_turn(body(old), body(edited))
    stored = with_records(old)
    later = copy.deepcopy(stored)
    later["response_payload"]["tool_calls"][0]["observed_at"] = "2025-03-04T10:00:01+00:00"
    assert not same_turn(body(stored), body(later))
    assert not same_turn(body(old), body({**old, "timestamp": "2025-03-03T10:00:00Z", "agent": "other"}))


def test_the_api_keeps_the_stored_turn_when_it_is_imported_again_with_records(tmp_path: Path) -> None:
    with InProcessApi(tmp_path / "data", warm_up=False) as srv, srv.client(srv.key("acme", "ann")) as api:
        assert api.post("/v1/turns", json=small_turn()).status_code == 201
        again = api.post("/v1/turns", json=with_records(small_turn()))
        assert again.status_code == 200, again.text  # found stored with the same content, not 409
        stored = api.get("/v1/turns/t-small-1").json()
        assert "observed_at" not in json.dumps(stored)  # kept as stored: never overwritten
        changed = with_records(small_turn(response="Order A-1 is lost."))
        assert api.post("/v1/turns", json=changed).status_code == 409
