"""Tenant isolation through the whole app (in process, over ASGI): two tenants, every endpoint that takes an
id, every id of the other tenant → 404 exactly like an id that does not exist; lists never show the other
tenant."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from support.api_server import SMALL_CLAIM, InProcessApi, scripted_factory, small_turn
from support.services import DbBackend


@dataclass(frozen=True)
class Tenant:
    name: str
    client: httpx.Client
    turn_id: str  # a turn only this tenant has
    quote_id: str  # an unused quote
    trace_id: str  # a finished trace


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory, db_backend: DbBackend) -> Iterator[dict[str, Tenant]]:
    with InProcessApi(
        tmp_path_factory.mktemp("tenancy"),
        llm_factory=scripted_factory(),
        warm_up=False,
        database_url=db_backend.fresh_url(),
    ) as srv:
        out: dict[str, Tenant] = {}
        clients = []
        for name in ("acme", "globex"):
            client = srv.client(srv.key(name, "user-1"))
            clients.append(client)
            own = f"{name}-only"
            assert client.post("/v1/turns", json=small_turn(own)).status_code == 201
            # the same turn_id in both tenants, different content: two independent turns, no conflict
            shared = small_turn("shared-id", agent=f"{name} agent")
            assert client.post("/v1/turns", json=shared).status_code == 201
            quote = client.post("/v1/quotes", json={"turn_id": own, "sentence": SMALL_CLAIM}).json()["quote_id"]
            spent = client.post("/v1/quotes", json={"turn_id": own, "sentence": SMALL_CLAIM}).json()["quote_id"]
            trace = client.post("/v1/traces", json={"quote_id": spent})
            assert client.get(trace.headers["location"], params={"wait": "true"}).json()["status"] == "succeeded"
            out[name] = Tenant(name, client, own, quote, trace.json()["trace_id"])
        yield out
        for client in clients:
            client.close()


Request = Callable[[httpx.Client, Tenant], httpx.Response]

# Every endpoint that names an id, asked with the OTHER tenant's id.
MATRIX: dict[str, Request] = {
    "GET /v1/turns/{id}": lambda c, o: c.get(f"/v1/turns/{o.turn_id}"),
    "GET /v1/turns/{id}/sources": lambda c, o: c.get(f"/v1/turns/{o.turn_id}/sources"),
    "GET /v1/turns/{id}/segments": lambda c, o: c.get(f"/v1/turns/{o.turn_id}/segments"),
    "POST /v1/turns/{id}/segments": lambda c, o: c.post(
        f"/v1/turns/{o.turn_id}/segments", json={"segments": [{"text": SMALL_CLAIM}]}
    ),
    "POST /v1/quotes": lambda c, o: c.post("/v1/quotes", json={"turn_id": o.turn_id, "sentence": SMALL_CLAIM}),
    "POST /v1/traces {quote_id}": lambda c, o: c.post("/v1/traces", json={"quote_id": o.quote_id}),
    "POST /v1/traces {turn_id,…}": lambda c, o: c.post(
        "/v1/traces",
        json={
            "turn_id": o.turn_id,
            "sentence": SMALL_CLAIM,
            "max_cost_usd": 1.0,
            "model": "openai/gpt-4o-mini",
        },
    ),
    "GET /v1/traces/{id}": lambda c, o: c.get(f"/v1/traces/{o.trace_id}"),
    "GET /v1/traces/{id}?wait=true": lambda c, o: c.get(
        f"/v1/traces/{o.trace_id}", params={"wait": "true", "timeout": 1}
    ),
    "GET /v1/traces/{id}/events": lambda c, o: c.get(f"/v1/traces/{o.trace_id}/events"),
}


def _missing(other: Tenant) -> Tenant:
    return Tenant(other.name, other.client, "no-such-turn", "q_00000000000000000000", "tr_00000000000000000000")


@pytest.mark.parametrize("endpoint", list(MATRIX))
@pytest.mark.parametrize(("me", "other"), [("acme", "globex"), ("globex", "acme")])
def test_the_other_tenants_ids_are_404_like_missing_ones(
    tenants: dict[str, Tenant], endpoint: str, me: str, other: str
) -> None:
    caller, victim = tenants[me], tenants[other]
    foreign = MATRIX[endpoint](caller.client, victim)
    missing = MATRIX[endpoint](caller.client, _missing(victim))
    assert foreign.status_code == 404, foreign.text
    assert foreign.headers["content-type"].startswith("application/problem+json")
    a, b = foreign.json(), missing.json()
    assert (a["type"], a["field"], a["title"]) == (b["type"], b["field"], b["title"])
    # the answer is the same as for an id that never existed: only the id itself differs
    assert a["detail"].replace(victim.turn_id, "?").replace(victim.trace_id, "?").replace(victim.quote_id, "?") == b[
        "detail"
    ].replace("no-such-turn", "?").replace("tr_00000000000000000000", "?").replace("q_00000000000000000000", "?")
    echoed = foreign.text.replace(victim.turn_id, "").replace(victim.trace_id, "").replace(victim.quote_id, "")
    assert victim.name not in echoed


def test_lists_and_shared_turn_ids_never_leak(tenants: dict[str, Tenant]) -> None:
    for me, other in (("acme", "globex"), ("globex", "acme")):
        client = tenants[me].client
        listed = [t["turn_id"] for t in client.get("/v1/turns", params={"limit": 500}).json()["items"]]
        assert sorted(listed) == sorted([f"{me}-only", "shared-id"])
        assert f"{other}-only" not in listed
        assert client.get("/v1/turns/shared-id").json()["turn"]["agent"] == f"{me} agent"


def test_a_quote_probed_by_another_tenant_is_still_usable_by_its_owner(tenants: dict[str, Tenant]) -> None:
    owner, intruder = tenants["acme"], tenants["globex"]
    assert intruder.client.post("/v1/traces", json={"quote_id": owner.quote_id}).status_code == 404
    started = owner.client.post("/v1/traces", json={"quote_id": owner.quote_id})
    assert started.status_code == 202
    assert owner.client.get(started.headers["location"], params={"wait": "true"}).json()["status"] == "succeeded"
    assert intruder.client.get(started.headers["location"]).status_code == 404
