"""Operations and spend: the judgement cache kept per tenant, the free tier's request-rate limit, provider
addresses kept out of scorer errors, and spend that survives a SIGKILL.

Real parts throughout: the service over real HTTP (in a thread, or as a process for the crash), real SQLite
and Redis, a fake OpenAI-compatible provider on loopback for the judge; the scoring server is a port where
nothing listens, or a small HTTP server that names its own address in its error."""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from redis import Redis as SyncRedis
from redis.asyncio import Redis
from support.api_server import (
    SMALL_CLAIM,
    InProcessApi,
    KeyedJudge,
    ServerProcess,
    make_key,
    scripted_factory,
    small_turn,
)
from support.fake_openai import FakeOpenAI, FakeReply
from support.judgement_stores import open_store

from estimator.seams.llm import LLMRequest, Message, ScriptedLLM
from provenance_api.core.errors import RateLimited
from provenance_api.core.settings import Settings
from provenance_api.providers.llm_cache import CachingLLM, JudgementCache
from provenance_api.providers.scorer_completions import CompletionsScorer
from provenance_api.storage.judgement_cache import (
    SHARED_SCOPE,
    RedisJudgementCache,
    tenant_scope,
    turn_scope,
)
from provenance_api.storage.request_limits import InProcessRequestLimiter, RedisRequestLimiter
from provenance_api.wiring import default_llm_factory

PROBLEM = "application/problem+json"
PROVIDER_KEY = "sk-operations-provider-key"
JUDGE = LLMRequest(messages=(Message("system", "judge"), Message("user", "claim + sources")), purpose="judge")


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed again: nothing listens there


def numbered() -> ScriptedLLM:
    count = [0]

    def script(request: LLMRequest) -> str:
        count[0] += 1
        return f"answer {count[0]}"

    return ScriptedLLM(script, model="openai/judge")


def traced(api: httpx.Client) -> dict[str, Any]:
    """Store the small turn and trace its claim to the end, as this caller."""
    assert api.post("/v1/turns", json=small_turn()).status_code in (200, 201)
    quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM})
    assert quote.status_code == 201, quote.text
    started = api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
    assert started.status_code == 202, started.text
    done: dict[str, Any] = api.get(started.headers["location"], params={"wait": "true"}).json()
    for _ in range(20):
        if done["status"] in ("succeeded", "failed", "interrupted"):
            break
        done = api.get(started.headers["location"], params={"wait": "true"}).json()
    return done


# --------------------------------------------------------------------------- the judgement cache per tenant


@pytest.fixture(params=["sqlite", "redis"])
def cache_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class _Stores:
    """The judgement store of one test, and how the service is given it."""

    def __init__(self, backend: str, request: pytest.FixtureRequest) -> None:
        self.backend = backend
        self.prefix = f"test-{secrets.token_hex(4)}"
        self.redis_url = request.getfixturevalue("redis_url") if backend == "redis" else ""

    def server(self, tmp_path: Path, base_url: str, shared: bool) -> InProcessApi:
        settings: dict[str, Any] = {
            "judge_api_base": base_url,
            "judge_api_key": PROVIDER_KEY,
            "warm_up": False,
            "judgement_cache_shared": shared,
        }
        if self.backend == "sqlite":  # the service's own wiring: the SQLite file in the data directory
            return InProcessApi(tmp_path, **settings)
        # the service's wiring of the judge, on a Redis store (the embedded service runs the traces)
        store = RedisJudgementCache(Redis.from_url(self.redis_url), 3600, prefix=self.prefix)
        factory = default_llm_factory(Settings(data_dir=tmp_path, **settings), store)
        return InProcessApi(tmp_path, llm_factory=factory, **settings)

    def entries(self, tmp_path: Path) -> set[str]:
        """The scopes holding entries."""
        if self.backend == "sqlite":
            import sqlite3

            with sqlite3.connect(tmp_path / "judgements.db") as conn:
                return {r[0] for r in conn.execute("SELECT scope FROM judgement_entries")}
        client = SyncRedis.from_url(self.redis_url)
        try:
            return {k.decode().split(":")[2] for k in client.scan_iter(match=f"{self.prefix}:judgement:*")}
        finally:
            client.close()

    def clean(self) -> None:
        if self.backend == "redis":
            client = SyncRedis.from_url(self.redis_url)
            try:
                keys = list(client.scan_iter(match=f"{self.prefix}:*"))
                if keys:
                    client.delete(*keys)
            finally:
                client.close()


@pytest.fixture
def stores(cache_backend: str, request: pytest.FixtureRequest) -> Iterator[_Stores]:
    found = _Stores(cache_backend, request)
    try:
        yield found
    finally:
        found.clean()


def test_another_tenants_identical_trace_makes_its_own_model_calls_and_is_not_cached(
    tmp_path: Path, stores: _Stores
) -> None:
    """The finding: the judgement cache was shared across tenants, so tenant B's trace of content tenant A
    had traced came back `cached` at $0 — telling B what A traced."""
    judge = KeyedJudge()
    with (
        FakeOpenAI(lambda req: FakeReply(text=judge.openai(req)), api_key=PROVIDER_KEY) as provider,
        stores.server(tmp_path, provider.base_url, shared=False) as srv,
        srv.client(srv.key("acme", "alice"), timeout=60) as alice,
        srv.client(srv.key("globex", "bob"), timeout=60) as bob,
    ):
        first = traced(alice)
        answered_for_a = provider.answered
        second = traced(bob)
        again = traced(alice)  # the tenant's own cache still answers it
    assert first["status"] == second["status"] == again["status"] == "succeeded"
    assert first["calls"]["made"] == answered_for_a > 0
    assert second["calls"]["made"] == second["calls"]["billed"] == answered_for_a
    assert second["result"]["calls"]["cached"] == 0
    assert provider.answered == 2 * answered_for_a
    assert again["calls"]["made"] == 0 and again["result"]["calls"]["cached"] == answered_for_a
    assert stores.entries(tmp_path) == {turn_scope("acme", "t-small-1"), turn_scope("globex", "t-small-1")}


def test_deleting_a_turn_forgets_its_cached_judgements(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The finding: DELETE /v1/turns/{id} must take the turn's cached results with it — a turn stored again
    under the same id is judged afresh, not answered from what the deleted one left behind. (The service's
    own wiring of the store, the SQLite file; both stores' purge of a scope is tested below.)"""
    stores = _Stores("sqlite", request)
    judge = KeyedJudge()
    with (
        FakeOpenAI(lambda req: FakeReply(text=judge.openai(req)), api_key=PROVIDER_KEY) as provider,
        stores.server(tmp_path, provider.base_url, shared=False) as srv,
        srv.client(srv.key("acme", "alice"), timeout=60) as alice,
    ):
        first = traced(alice)
        answered = provider.answered
        assert stores.entries(tmp_path) == {turn_scope("acme", "t-small-1")}
        assert alice.delete("/v1/turns/t-small-1").status_code == 204
        assert stores.entries(tmp_path) == set()
        again = traced(alice)
    assert first["status"] == again["status"] == "succeeded" and answered > 0
    assert again["calls"]["made"] == answered and again["result"]["calls"]["cached"] == 0
    assert provider.answered == 2 * answered


def test_with_sharing_turned_on_another_tenants_identical_trace_is_answered_from_the_cache(
    tmp_path: Path, stores: _Stores
) -> None:
    judge = KeyedJudge()
    with (
        FakeOpenAI(lambda req: FakeReply(text=judge.openai(req)), api_key=PROVIDER_KEY) as provider,
        stores.server(tmp_path, provider.base_url, shared=True) as srv,
        srv.client(srv.key("acme", "alice"), timeout=60) as alice,
        srv.client(srv.key("globex", "bob"), timeout=60) as bob,
    ):
        first = traced(alice)
        answered = provider.answered
        second = traced(bob)
    assert first["status"] == second["status"] == "succeeded"
    assert second["calls"]["made"] == 0 and second["result"]["calls"]["cached"] == answered > 0
    assert provider.answered == answered
    assert stores.entries(tmp_path) == {SHARED_SCOPE}


@pytest.fixture
async def store(cache_backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    redis_url = request.getfixturevalue("redis_url") if cache_backend == "redis" else None
    async with open_store(cache_backend, tmp_path, redis_url) as opened:
        yield opened


async def test_a_tenants_cached_judgements_can_be_purged_without_touching_another_tenants(
    store: JudgementCache,
) -> None:
    """What turn deletion can use: the entries carry their tenant's scope, purged at once."""
    base = CachingLLM(numbered(), store)
    acme, globex = base.for_tenant("acme"), base.for_tenant("globex")
    await acme.complete(JUDGE)
    await globex.complete(JUDGE)
    assert (await acme.complete(JUDGE)).cached and (await globex.complete(JUDGE)).cached
    assert await store.purge(tenant_scope("acme")) == 1
    assert not (await acme.complete(JUDGE)).cached
    assert (await globex.complete(JUDGE)).cached


# --------------------------------------------------------------------------- the free tier's request rate


def free_tier_requests(turn_id: str, source_id: str) -> dict[str, tuple[str, str, dict[str, Any] | None]]:
    return {
        "segments": ("GET", f"/v1/turns/{turn_id}/segments", None),
        "client segments": (
            "POST",
            f"/v1/turns/{turn_id}/segments",
            {"segments": [{"id": "s1", "text": "Order A-1 shipped."}]},
        ),
        "sources": ("GET", f"/v1/turns/{turn_id}/sources", None),
        "search": ("GET", "/v1/turns?q=order", None),
        "gating report": ("GET", "/v1/reports/gating", None),
        "verify": ("POST", f"/v1/turns/{turn_id}/verify", {"max_cost_usd": 0}),
        "viewer turns": ("GET", "/ui/api/turns?q=order", None),
        "viewer source": ("GET", f"/ui/api/turns/{turn_id}/sources/{source_id}", None),
        "viewer traces": ("GET", f"/ui/api/turns/{turn_id}/traces", None),
    }


def test_each_free_tier_endpoint_is_rate_limited_per_caller_with_retry_after_and_the_limit_named(
    tmp_path: Path,
) -> None:
    """The finding: the endpoints that call no model (segments, sources, search, the gating report, verify,
    the viewer's reads) had no rate limit, and each costs CPU; a caller could hammer them."""
    limit = 3
    with InProcessApi(
        tmp_path,
        llm_factory=scripted_factory(),
        warm_up=False,
        free_tier_rate_max_requests=limit,
        free_tier_rate_window_seconds=600,
    ) as srv:
        with srv.client(srv.key("acme", "owner")) as owner:
            assert owner.post("/v1/turns", json=small_turn()).status_code == 201
            layers = owner.get("/v1/turns/t-small-1/sources").json()["layers"]
        source_id = layers[0]["sources"][0]["id"]
        for name, (method, path, body) in free_tier_requests("t-small-1", source_id).items():
            key = srv.key("acme", f"user-{name.replace(' ', '-')}")  # one caller per endpoint
            with srv.client(key) as api:
                for _ in range(limit):
                    answer = api.request(method, path, json=body)
                    assert answer.status_code in (200, 422), (name, answer.status_code, answer.text)
                refused = api.request(method, path, json=body)
                assert refused.status_code == 429, (name, refused.status_code, refused.text)
                assert refused.headers["content-type"].startswith(PROBLEM)
                assert 590 <= int(refused.headers["retry-after"]) <= 600, name
                problem = refused.json()
                assert problem["limit_name"] == "free_tier_requests" and problem["limit"] == limit
                assert problem["window_seconds"] == 600 and "3 requests per 600 s" in problem["detail"]
                assert "FREE_TIER_RATE_MAX_REQUESTS" in problem["fix"]
        # per caller: another user of the same tenant is not refused, and paid endpoints are not counted
        with srv.client(srv.key("acme", "someone-else")) as other:
            assert other.get("/v1/turns/t-small-1/segments").status_code == 200
            for _ in range(limit + 1):
                assert other.get("/v1/turns/t-small-1").status_code == 200


def test_the_free_tier_rate_slides_and_counts_no_refused_request() -> None:
    now = [1000.0]
    limiter = InProcessRequestLimiter(2, 10, clock=lambda: now[0])

    async def run() -> None:
        await limiter.hit("t/u")
        now[0] += 4
        await limiter.hit("t/u")
        with pytest.raises(RateLimited) as refused:
            await limiter.hit("t/u")
        assert refused.value.retry_after == 6.0
        now[0] += 6.5  # the first request left the window; the refused one never entered it
        await limiter.hit("t/u")
        with pytest.raises(RateLimited):
            await limiter.hit("t/u")
        await limiter.hit("t/other")

    asyncio.run(run())


async def test_the_free_tier_rate_is_shared_by_every_process_through_redis(redis_url: str) -> None:
    """Two API processes (two limiters on one Redis) count one caller's requests together."""
    clients = [Redis.from_url(redis_url), Redis.from_url(redis_url)]
    prefix = f"test-{secrets.token_hex(4)}"
    try:
        first, second = (RedisRequestLimiter(c, 3, 60, prefix=prefix) for c in clients)
        await first.hit("acme/alice")
        await second.hit("acme/alice")
        await first.hit("acme/alice")
        with pytest.raises(RateLimited) as refused:
            await second.hit("acme/alice")
        assert refused.value.retry_after is not None and 1 <= refused.value.retry_after <= 60
        assert refused.value.extra["limit_name"] == "free_tier_requests"
        await second.hit("acme/bob")
        assert await clients[0].zcard(f"{prefix}:requests:acme/alice") == 3  # the refused one not counted
    finally:
        keys = [k async for k in clients[0].scan_iter(match=f"{prefix}:*")]
        if keys:
            await clients[0].delete(*keys)
        for c in clients:
            await c.aclose()


def test_a_service_with_redis_answers_429_once_the_callers_requests_in_redis_fill_the_window(
    tmp_path: Path, redis_url: str
) -> None:
    prefix = f"test-{secrets.token_hex(4)}"
    sync = SyncRedis.from_url(redis_url)
    try:
        with (
            InProcessApi(
                tmp_path,
                llm_factory=scripted_factory(),
                warm_up=False,
                redis_url=redis_url,
                redis_prefix=prefix,
                free_tier_rate_max_requests=2,
            ) as srv,
            srv.client(srv.key("acme", "alice")) as api,
        ):
            assert api.post("/v1/turns", json=small_turn()).status_code == 201
            # another process of the service already served this caller once in the window
            seconds, _ = cast(tuple[int, int], sync.time())
            sync.zadd(f"{prefix}:requests:acme/alice", {"elsewhere-1": float(seconds)})
            assert api.get("/v1/turns/t-small-1/segments").status_code == 200
            refused = api.get("/v1/turns/t-small-1/segments")
            assert refused.status_code == 429 and refused.json()["limit_name"] == "free_tier_requests"
    finally:
        keys = list(sync.scan_iter(match=f"{prefix}:*"))
        if keys:
            sync.delete(*keys)
        sync.close()


# --------------------------------------------------------------------------- provider addresses in scorer errors


class _NamesItself(BaseHTTPRequestHandler):
    """A scoring server that refuses every request with an error naming its own address, as proxies do."""

    def do_POST(self) -> None:
        host, port = cast(tuple[str, int], self.server.server_address)[:2]
        body = json.dumps({"error": f"model not loaded on http://{host!s}:{port}/v1 (backend {host!s}:{port})"})
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def naming_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NamesItself)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("where", ["dead port", "server naming itself"])
def test_a_failed_scorer_reaches_the_tenant_without_the_scoring_servers_address(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    """The finding: errors of the completions scorer could carry the operator's internal scoring-server URL
    into the trace reason a tenant reads."""
    port = dead_port() if where == "dead port" else request.getfixturevalue("naming_server")
    base = f"http://127.0.0.1:{port}/v1"
    with (
        InProcessApi(
            tmp_path,
            llm_factory=scripted_factory(),
            warm_up=False,
            scorer_api_base=base,
            judge_api_key="sk-operator-scorer-secret",
        ) as srv,
        srv.client(srv.key("acme", "alice"), timeout=120) as alice,
    ):
        assert alice.post("/v1/turns", json=small_turn()).status_code == 201
        quote = alice.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "estimator": "logprob"})
        assert quote.status_code == 201, quote.text
        started = alice.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
        assert started.status_code == 202, started.text
        done = alice.get(started.headers["location"], params={"wait": "true"}).json()
        for _ in range(20):
            if done["status"] in ("succeeded", "failed", "interrupted"):
                break
            done = alice.get(started.headers["location"], params={"wait": "true"}).json()
        shown = json.dumps(done) + alice.get(f"{started.headers['location']}/events").text
        shown += alice.get("/ui/api/turns/t-small-1/traces").text
    # every scoring call failed: the trace failed (never a result), its reason the cause and the setting to fix,
    # without saying where the scoring server is
    assert done["status"] == "failed" and done["result"] is None, done
    assert "no scoring call gave a log-probability" in shown and "fix: " in shown, shown[:2000]
    if where == "server naming itself":
        assert "HTTP 400: " in shown and "model not loaded on [provider]" in shown
    else:
        assert "connection failed" in shown
    for secret in (base, f"127.0.0.1:{port}", str(port), "127.0.0.1", "sk-operator-scorer-secret"):
        assert secret not in shown, secret


async def test_the_scorer_names_its_server_only_when_the_endpoint_may_be_disclosed(naming_server: int) -> None:
    """The operator's own tools (the CLI) keep the address; the service's scorer does not."""
    base = f"http://127.0.0.1:{naming_server}/v1"
    messages = [Message("user", "Where is my order?")]
    failures = []
    for disclose in (True, False):
        scorer = CompletionsScorer("m", base, "sk-x", max_attempts=1, disclose_endpoint=disclose)
        with pytest.raises(Exception) as failed:
            await scorer.score(messages, "Shipped.")
        failures.append(str(failed.value))
    assert f"127.0.0.1:{naming_server}" in failures[0]
    assert f"127.0.0.1:{naming_server}" not in failures[1] and "[provider]" in failures[1]


# --------------------------------------------------------------------------- spend across a crash


def test_after_a_sigkill_mid_trace_the_restarted_service_still_counts_the_billed_calls_in_the_budget(
    tmp_path: Path,
) -> None:
    """The finding to guard: spend must survive a crash. The job is `interrupted` with its billed calls
    (as in tests/resilience/test_api_crash.py), and the budget window, kept in the database, still counts them after
    the restart (an in-memory window would start again from zero), settled to the calls the job made."""
    judge = KeyedJudge()
    slow_after_two = lambda index, request: None if index < 2 else FakeReply(delay=30, until_hangup=True)  # noqa: E731
    data = tmp_path / "data"
    with FakeOpenAI(judge.openai, faults=slow_after_two, api_key=PROVIDER_KEY) as provider:
        env = {"OPENAI_API_KEY": PROVIDER_KEY, "OPENAI_API_BASE": provider.base_url, "PROVENANCE_WARM_UP": "false"}
        server = ServerProcess(data, env=env).start()
        try:
            key = make_key(data, "acme", "alice")
            with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
                assert api.post("/v1/turns", json=small_turn()).status_code == 201
                quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM}).json()
                started = api.post("/v1/traces", json={"quote_id": quote["quote_id"]})
                assert started.status_code == 202
                limit = int(started.headers["x-ratelimit-limit"])
                location = started.headers["location"]
                state: dict[str, Any] = {}
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    state = api.get(location).json()
                    if state["calls"]["billed"] >= 2:
                        break
                    time.sleep(0.05)
                assert state["status"] == "running" and state["calls"]["billed"] == 2, state
            server.kill()  # SIGKILL: no shutdown code runs, nothing is settled
        finally:
            server.stop()
    # restarted with the provider gone: the trace started below fails fast instead of waiting on it
    gone = {
        "PROVENANCE_WARM_UP": "false",
        "OPENAI_API_KEY": PROVIDER_KEY,
        "OPENAI_API_BASE": f"http://127.0.0.1:{dead_port()}/v1",
    }
    restarted = ServerProcess(data, env=gone).start()
    try:
        with httpx.Client(base_url=restarted.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as api:
            job = api.get(location).json()
            assert job["status"] == "interrupted" and job["result"] is None
            # the 2 answered calls, and the calls in flight at the kill billed at their counted cost (the provider
            # had received them and may have answered): billed = made = what the provider received
            assert job["calls"]["made"] > 2 and job["calls"]["billed"] == job["calls"]["made"], job["calls"]
            again = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM}).json()
            second = api.post("/v1/traces", json={"quote_id": again["quote_id"]})
            assert second.status_code == 202, second.text
            remaining = int(second.headers["x-ratelimit-remaining"])
            # the killed trace's reservation was settled at the restart to the calls it made: they stay in the
            # window, and the rest of what it had reserved is released (not held until the window passes)
            assert job["calls"]["made"] < quote["planned_calls"]
            assert remaining == limit - job["calls"]["made"] - again["planned_calls"]
        restarted.kill()  # nothing more to see: no need to wait for the second trace to give up
    finally:
        restarted.stop()
