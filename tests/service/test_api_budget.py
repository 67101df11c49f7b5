"""The per-user model-call budget through the whole app (in process, over ASGI): quoted calls are reserved
before a trace starts, a trace that does not fit is 429 with Retry-After, and the unused part comes back at
the end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.api_server import SMALL_CLAIM, InProcessApi, scripted_factory, small_turn
from support.services import DbBackend

from estimator.seams.llm import ScriptedLLM
from provenance_api.storage.limits import InProcessLimiter

PLANNED = 14  # the small turn's quote: (2+2) + (2+2) + 2 (redundancy: each source kept alone) + 2·2
BUDGET = 2 * PLANNED - 1  # one running trace fits; a second one only after the first gives calls back


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, db_backend: DbBackend) -> Iterator[InProcessApi]:
    params = {"rate_max_calls": BUDGET, "rate_window_seconds": 3600}
    # a slow judge keeps the first trace running while the second asks
    with InProcessApi(
        tmp_path_factory.mktemp("budget"),
        llm_factory=scripted_factory(latency=0.25),
        params=params,
        warm_up=False,
        database_url=db_backend.fresh_url(),
    ) as srv:
        yield srv


def quote(api: httpx.Client) -> str:
    r = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM})
    assert r.status_code == 201 and r.json()["planned_calls"] == PLANNED
    quote_id: str = r.json()["quote_id"]
    return quote_id


def test_reservation_refusal_and_release(server: InProcessApi) -> None:
    with server.client(server.key("acme", "alice")) as alice, server.client(server.key("acme", "bob")) as bob:
        alice.post("/v1/turns", json=small_turn())
        first = alice.post("/v1/traces", json={"quote_id": quote(alice)})
        assert first.status_code == 202
        assert first.headers["x-ratelimit-remaining"] == str(BUDGET - PLANNED)

        # while the first runs, its whole quote is reserved: a second trace does not fit
        second_quote = quote(alice)
        refused = alice.post("/v1/traces", json={"quote_id": second_quote})
        assert refused.status_code == 429
        assert refused.headers["content-type"].startswith("application/problem+json")
        problem = refused.json()
        assert problem["type"].endswith("rate-limited") and problem["remaining"] == BUDGET - PLANNED
        assert f"reserves {PLANNED} calls" in problem["detail"] and "retry in" in problem["detail"]
        assert 0 < int(refused.headers["retry-after"]) <= 3600
        assert alice.get(first.headers["location"]).json()["status"] in ("queued", "running")

        # the budget is per user: bob is not affected by alice's reservation
        bob.post("/v1/turns", json=small_turn())
        bob_trace = bob.post("/v1/traces", json={"quote_id": quote(bob)})
        assert bob_trace.status_code == 202
        assert bob.get(bob_trace.headers["location"], params={"wait": "true"}).json()["status"] == "succeeded"

        done = alice.get(first.headers["location"], params={"wait": "true"}).json()
        assert done["status"] == "succeeded"
        made = done["calls"]["made"]
        assert 0 < made < PLANNED  # the plan is a worst case

        # the unused part was released: the refused quote (never consumed) now fits
        retried = alice.post("/v1/traces", json={"quote_id": second_quote})
        assert retried.status_code == 202, retried.text
        assert retried.headers["x-ratelimit-remaining"] == str(BUDGET - made - PLANNED)
        assert alice.get(retried.headers["location"], params={"wait": "true"}).json()["status"] == "succeeded"
        metrics = alice.get("/metrics").text
        assert "provenance_budget_refusals_total 1.0" in metrics


def test_a_trace_larger_than_the_whole_budget_is_refused(tmp_path: Path, db_backend: DbBackend) -> None:
    params = {"rate_max_calls": PLANNED - 1, "rate_window_seconds": 60}
    with (
        InProcessApi(
            tmp_path,
            llm_factory=scripted_factory(),
            params=params,
            warm_up=False,
            database_url=db_backend.fresh_url(),
        ) as srv,
        srv.client(srv.admin_key) as api,
    ):
        api.post("/v1/turns", json=small_turn())
        r = api.post("/v1/traces", json={"quote_id": quote(api)})
        assert r.status_code == 429 and "more than the whole per-user budget" in r.json()["detail"]
        assert r.headers["retry-after"] == "60"


async def test_window_slides_and_settling_keeps_only_used_calls() -> None:
    now = [0.0]
    limiter = InProcessLimiter(10, 100, clock=lambda: now[0])
    first = await limiter.reserve("t/u", 8)
    with pytest.raises(Exception) as refused:
        await limiter.reserve("t/u", 5)
    assert getattr(refused.value, "retry_after", None) == 100.0
    await limiter.settle(first, 3)  # 5 released at once
    assert (await limiter.state("t/u")).remaining == 7
    now[0] = 50.0
    second = await limiter.reserve("t/u", 5)
    now[0] = 60.0
    assert (await limiter.state("t/u")).remaining == 2
    now[0] = 100.5  # the first reservation's 3 calls left the window
    assert (await limiter.state("t/u")).remaining == 5
    await limiter.settle(second, 0)
    assert (await limiter.state("t/u")).remaining == 10


def test_per_trace_concurrency_is_capped_and_overrides_cannot_raise_it(tmp_path: Path) -> None:
    built: list[ScriptedLLM] = []
    inner = scripted_factory(latency=0.1)

    def factory(model: str, api_base: str | None) -> ScriptedLLM:
        llm = inner(model, api_base)
        assert isinstance(llm, ScriptedLLM)
        built.append(llm)
        return llm

    with (
        InProcessApi(tmp_path, llm_factory=factory, params={"concurrency": 3}, warm_up=False) as srv,
        srv.client(srv.admin_key) as api,
    ):
        api.post("/v1/turns", json=small_turn())
        over = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0", "params": {"concurrency": 4}})
        assert over.status_code == 422 and over.json()["field"] == "params.concurrency"
        for cap in (3, 1):
            q = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0", "params": {"concurrency": cap}})
            started = api.post("/v1/traces", json={"quote_id": q.json()["quote_id"]})
            assert api.get(started.headers["location"], params={"wait": "true"}).json()["status"] == "succeeded"
            assert built[-1].max_in_flight == cap
