"""Money under the operator's control: which judge model runs, at what price, and within which budget.

Each test proves one finding of "a tenant chooses what the operator pays for": a stored turn's own model no
longer picks the judge (only the operator's allow-list does, per tenant where set), an explicitly requested
model must be allowed, an unpriced model is refused unless the operator prices it, budgets are kept in USD per
user and per tenant (reserved at the quote's price, settled at the billed price, remembered across a restart,
in all three limiters), and a model string that names a host is refused without any network contact.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
from redis.asyncio import Redis
from support.api_server import TEST_PRICES, InProcessApi, KeyedJudge, small_turn
from support.services import create_database
from test_network_blocked import GUARD

from estimator.seams.llm import LLMError, LLMRequest, LLMResponse, ScriptedLLM
from provenance_api.core.errors import RateLimited
from provenance_api.core.settings import Settings
from provenance_api.jobs.runner import LLMFactory
from provenance_api.storage.db_limits import DatabaseLimiter
from provenance_api.storage.limits import BudgetState, InProcessLimiter, Limiter
from provenance_api.storage.redis_limits import RedisLimiter
from provenance_api.storage.session import Database

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = "application/problem+json"
DEFAULT = "openai/gpt-4o-mini"  # the service's default judge when PROVENANCE_DEFAULT_MODEL is unset
FAKE_PRICE = (
    TEST_PRICES["openai/fake-judge"]["input_per_mtok"] / 1e6,
    TEST_PRICES["openai/fake-judge"]["output_per_mtok"] / 1e6,
)


def problem(r: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = r.json()
    if field is not None:
        assert body["field"] == field, body
    assert body["fix"], body
    return body


class Judge:
    """The scripted judge of the API tests, recording which models it was built for and the usage it
    reported (so the billed cost can be computed independently)."""

    def __init__(self, latency: float = 0.0) -> None:
        self.models: list[str] = []
        self.input_tokens = 0
        self.output_tokens = 0
        self.latency = latency
        self._keyed = KeyedJudge()
        self._lock = threading.Lock()

    def answer(self, request: LLMRequest) -> LLMResponse:
        response = self._keyed.scripted(request)
        with self._lock:
            self.input_tokens += response.usage.input_tokens
            self.output_tokens += response.usage.output_tokens
        return response

    @property
    def factory(self) -> LLMFactory:
        def build(model: str, api_base: str | None) -> ScriptedLLM:
            self.models.append(model)
            return ScriptedLLM(self.answer, model=model, latency=self.latency)

        return build

    def billed_usd(self, price: tuple[float, float]) -> float:
        return self.input_tokens * price[0] + self.output_tokens * price[1]


def quote(api: httpx.Client, turn_id: str = "t-small-1", **body: Any) -> httpx.Response:
    return api.post("/v1/quotes", json={"turn_id": turn_id, "sentence": "r0", **body})


def budget_state(settings: Settings, user: str) -> BudgetState:
    """The budget as the service's database keeps it, read by a limiter of our own on the same database."""

    async def read() -> BudgetState:
        db = Database(settings.effective_database_url)
        try:
            limiter = DatabaseLimiter(
                db,
                settings.base_params.rate_max_calls,
                settings.base_params.rate_window_seconds,
                max_usd_per_user=settings.budget_usd_per_user,
                max_usd_per_tenant=settings.budget_usd_per_tenant,
            )
            return await limiter.state(user)
        finally:
            await db.dispose()

    return asyncio.run(read())


# --------------------------------------------------------------------------- which model runs


def test_a_turn_naming_o1_pro_runs_the_default_and_the_quote_says_why(tmp_path: Path) -> None:
    judge = Judge()
    with InProcessApi(tmp_path, llm_factory=judge.factory, warm_up=False) as srv, srv.client(srv.admin_key) as api:
        api.post("/v1/turns", json=small_turn(model="openai/o1-pro"))
        q = quote(api)
        assert q.status_code == 201, q.text
        body = q.json()
        assert body["model"] == DEFAULT
        assert body["model_reason"] == (
            "the default: the turn's model openai/o1-pro is not on this service's allow-list"
        )
        started = api.post("/v1/traces", json={"quote_id": body["quote_id"]})
        assert started.status_code == 202, started.text
        done = api.get(started.headers["location"], params={"wait": "true"}).json()
        assert done["status"] == "succeeded" and done["model"] == DEFAULT
        assert judge.models == [DEFAULT]  # the operator's key never paid for o1-pro

        api.post("/v1/turns", json=small_turn("t-allowed", model="openai/fake-judge"))
        allowed = quote(api, "t-allowed").json()
        assert allowed["model"] == "openai/fake-judge"
        assert allowed["model_reason"] == "the turn's own model, on the allow-list"


def test_with_no_allow_list_only_the_default_runs(tmp_path: Path) -> None:
    with (
        InProcessApi(tmp_path, llm_factory=Judge().factory, warm_up=False, allowed_models=[], model_prices={}) as srv,
        srv.client(srv.admin_key) as api,
    ):
        api.post("/v1/turns", json=small_turn(model="openai/gpt-4o"))  # priced, but not allowed
        body = quote(api).json()
        assert body["model"] == DEFAULT and "openai/gpt-4o is not on this service's allow-list" in body["model_reason"]
        refused = problem(quote(api, model="openai/gpt-4o"), 422, field="model")
        assert "PROVENANCE_ALLOWED_MODELS" in refused["fix"] and refused["allowed_models"] == [DEFAULT]
        assert quote(api, model=DEFAULT).json()["model_reason"] == "requested explicitly, on the allow-list"


def test_an_explicit_model_not_on_the_allow_list_is_refused_naming_model_and_the_fix(tmp_path: Path) -> None:
    judge = Judge()
    with InProcessApi(tmp_path, llm_factory=judge.factory, warm_up=False) as srv, srv.client(srv.admin_key) as api:
        api.post("/v1/turns", json=small_turn())
        body = problem(quote(api, model="openai/o1-pro"), 422, field="model")
        assert "'openai/o1-pro' is not on this service's allow-list" in body["detail"]
        assert "PROVENANCE_ALLOWED_MODELS" in body["fix"] and DEFAULT in body["fix"]
        inline = {"turn_id": "t-small-1", "sentence": "r0", "model": "openai/o1-pro", "max_cost_usd": 100.0}
        problem(api.post("/v1/traces", json=inline), 422, field="model")
        verify = api.post("/v1/turns/t-small-1/verify", json={"max_cost_usd": 100.0, "model": "openai/o1-pro"})
        problem(verify, 422, field="model")
        assert judge.models == []  # nothing ran


def test_a_tenants_own_list_is_honoured_and_not_another_tenants(tmp_path: Path) -> None:
    with (
        InProcessApi(
            tmp_path,
            llm_factory=Judge().factory,
            warm_up=False,
            allowed_models=[],
            tenant_models={"acme": ["openai/gpt-4o"]},
        ) as srv,
        srv.client(srv.key("acme", "alice")) as acme,
        srv.client(srv.key("globex", "gary")) as globex,
    ):
        for api in (acme, globex):
            api.post("/v1/turns", json=small_turn(model="openai/gpt-4o"))
        assert quote(acme, model="openai/gpt-4o").status_code == 201
        own = quote(acme).json()
        assert own["model"] == "openai/gpt-4o" and own["model_reason"] == "the turn's own model, on the allow-list"
        body = problem(quote(globex, model="openai/gpt-4o"), 422, field="model")
        assert "PROVENANCE_ALLOWED_MODELS" in body["fix"]
        assert quote(globex).json()["model"] == DEFAULT
        # acme's list replaces the service's list for acme: the default still runs, nothing else does
        body = problem(quote(acme, model="openai/fake-judge"), 422, field="model")
        assert "PROVENANCE_TENANT_MODELS for tenant 'acme'" in body["fix"]


def test_the_allow_list_and_prices_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVENANCE_ALLOWED_MODELS", "openai/gpt-4o, anthropic/claude-sonnet-4-0")
    monkeypatch.setenv("PROVENANCE_TENANT_MODELS", '{"acme": ["openai/gpt-4o"]}')
    monkeypatch.setenv("PROVENANCE_MODEL_PRICES", '{"house/judge": {"input_per_mtok": 1, "output_per_mtok": 4}}')
    monkeypatch.setenv("PROVENANCE_BUDGET_USD_PER_USER", "2.5")
    settings = Settings()
    assert settings.allowed_models == ["openai/gpt-4o", "anthropic/claude-sonnet-4-0"]
    assert settings.tenant_models == {"acme": ["openai/gpt-4o"]}
    assert settings.model_prices["house/judge"].per_token() == (1e-6, 4e-6)
    assert settings.budget_usd_per_user == 2.5 and settings.budget_usd_per_tenant is None
    monkeypatch.setenv("PROVENANCE_ALLOWED_MODELS", '["openai/gpt-4o"]')
    assert Settings().allowed_models == ["openai/gpt-4o"]


# --------------------------------------------------------------------------- prices


def test_an_unpriced_model_is_refused_even_on_the_allow_list(tmp_path: Path) -> None:
    judge = Judge()
    with (
        InProcessApi(
            tmp_path, llm_factory=judge.factory, warm_up=False, allowed_models=["house/judge"], model_prices={}
        ) as srv,
        srv.client(srv.admin_key) as api,
    ):
        api.post("/v1/turns", json=small_turn(model="house/judge"))
        body = problem(quote(api, model="house/judge"), 422, field="model")
        assert "no price is known for judge model 'house/judge'" in body["detail"]
        assert "PROVENANCE_MODEL_PRICES" in body["fix"]
        problem(quote(api), 422, field="model")  # the turn's own (allowed) model: still unpriced
        inline = {"turn_id": "t-small-1", "sentence": "r0", "max_cost_usd": 100.0}
        problem(api.post("/v1/traces", json=inline), 422, field="model")
        assert judge.models == []


def test_an_operator_price_makes_a_model_accepted_and_priced(tmp_path: Path) -> None:
    prices = {"house/judge": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}
    judge = Judge()
    with (
        InProcessApi(
            tmp_path, llm_factory=judge.factory, warm_up=False, allowed_models=["house/judge"], model_prices=prices
        ) as srv,
        srv.client(srv.admin_key) as api,
    ):
        api.post("/v1/turns", json=small_turn(model="house/judge"))
        body = quote(api).json()
        assert body["model"] == "house/judge"
        assert body["cost_usd"] == pytest.approx(body["input_tokens"] * 2e-6 + body["output_tokens"] * 8e-6, abs=1e-6)
        assert not any("No price" in w for w in body["warnings"])
        started = api.post("/v1/traces", json={"quote_id": body["quote_id"]})
        assert api.get(started.headers["location"], params={"wait": "true"}).json()["status"] == "succeeded"
        # the budget was settled at the operator's price for the tokens the judge reported
        state = budget_state(srv.settings, f"{srv.settings.admin_tenant}/{srv.settings.admin_user}")
        assert state.usd_spent == pytest.approx(judge.billed_usd((2e-6, 8e-6)), rel=1e-9)


# --------------------------------------------------------------------------- money budgets over HTTP


def small_quote_cost(tmp_path: Path) -> float:
    """The price of the small turn's quote under the test servers' policy."""
    with (
        InProcessApi(tmp_path / "probe-price", llm_factory=Judge().factory, warm_up=False) as srv,
        srv.client(srv.admin_key) as api,
    ):
        api.post("/v1/turns", json=small_turn())
        cost: float = quote(api).json()["cost_usd"]
    assert cost > 0
    return cost


def test_a_user_usd_budget_refuses_with_429_naming_the_user_budget(tmp_path: Path) -> None:
    cost = small_quote_cost(tmp_path)
    judge = Judge(latency=0.3)  # the first trace is still running, its quote reserved, when the second asks
    with (
        InProcessApi(
            tmp_path / "data", llm_factory=judge.factory, warm_up=False, budget_usd_per_user=cost * 1.5
        ) as srv,
        srv.client(srv.key("acme", "alice")) as alice,
        srv.client(srv.key("acme", "bob")) as bob,
    ):
        alice.post("/v1/turns", json=small_turn())
        first = alice.post("/v1/traces", json={"quote_id": quote(alice).json()["quote_id"]})
        assert first.status_code == 202, first.text
        refused = alice.post("/v1/traces", json={"quote_id": quote(alice).json()["quote_id"]})
        body = problem(refused, 429)
        assert body["budget"] == "user_usd" and body["remaining_usd"] == pytest.approx(cost * 0.5, abs=1e-6)
        assert "user USD budget exhausted" in body["detail"] and "acme/alice" in body["detail"]
        assert 0 < int(refused.headers["retry-after"]) <= 300
        bob.post("/v1/turns", json=small_turn())  # per user: bob still has his
        assert bob.post("/v1/traces", json={"quote_id": quote(bob).json()["quote_id"]}).status_code == 202
        assert alice.get(first.headers["location"], params={"wait": "true"}).json()["status"] == "succeeded"
    with (
        InProcessApi(tmp_path / "whole", llm_factory=judge.factory, warm_up=False, budget_usd_per_user=cost / 2) as srv,
        srv.client(srv.admin_key) as api,
    ):
        api.post("/v1/turns", json=small_turn())
        body = problem(api.post("/v1/traces", json={"quote_id": quote(api).json()["quote_id"]}), 429)
        assert body["budget"] == "user_usd" and "more than the whole per-user budget" in body["detail"]
        assert "PROVENANCE_BUDGET_USD_PER_USER" in body["fix"]


def test_a_tenant_usd_budget_refuses_another_user_of_the_same_tenant(tmp_path: Path) -> None:
    cost = small_quote_cost(tmp_path)
    judge = Judge(latency=0.3)
    with (
        InProcessApi(
            tmp_path / "data", llm_factory=judge.factory, warm_up=False, budget_usd_per_tenant=cost * 1.5
        ) as srv,
        srv.client(srv.key("acme", "alice")) as alice,
        srv.client(srv.key("acme", "bob")) as bob,
        srv.client(srv.key("globex", "gary")) as gary,
    ):
        for api in (alice, bob, gary):
            api.post("/v1/turns", json=small_turn())
        first = alice.post("/v1/traces", json={"quote_id": quote(alice).json()["quote_id"]})
        assert first.status_code == 202
        refused = bob.post("/v1/traces", json={"quote_id": quote(bob).json()["quote_id"]})
        body = problem(refused, 429)
        assert body["budget"] == "tenant_usd" and "tenant acme" in body["detail"]
        assert body["limit_usd"] == pytest.approx(cost * 1.5) and int(refused.headers["retry-after"]) > 0
        other = gary.post("/v1/traces", json={"quote_id": quote(gary).json()["quote_id"]})
        assert other.status_code == 202, other.text  # another tenant's budget is its own
        assert alice.get(first.headers["location"], params={"wait": "true"}).json()["status"] == "succeeded"


def test_a_reservation_holds_the_quoted_price_then_settles_at_the_billed_price(tmp_path: Path) -> None:
    judge = Judge(latency=0.3)
    with (
        InProcessApi(
            tmp_path, llm_factory=judge.factory, warm_up=False, budget_usd_per_user=10.0, budget_usd_per_tenant=20.0
        ) as srv,
        srv.client(srv.key("acme", "alice")) as api,
    ):
        api.post("/v1/turns", json=small_turn())
        q = quote(api).json()
        started = api.post("/v1/traces", json={"quote_id": q["quote_id"]})
        running = budget_state(srv.settings, "acme/alice")
        assert running.usd_spent == pytest.approx(q["cost_usd"]) and running.tenant_usd_spent == pytest.approx(
            q["cost_usd"]
        )
        assert running.usd_remaining == pytest.approx(10.0 - q["cost_usd"])
        assert api.get(started.headers["location"], params={"wait": "true"}).json()["status"] == "succeeded"
        settled = budget_state(srv.settings, "acme/alice")
        billed = judge.billed_usd(FAKE_PRICE)
        assert 0 < billed < q["cost_usd"]  # the quote is a worst case
        assert settled.usd_spent == pytest.approx(billed, rel=1e-9)
        assert settled.tenant_usd_spent == pytest.approx(billed, rel=1e-9)


def test_a_failed_trace_settles_what_was_billed(tmp_path: Path) -> None:
    def billed_failure(request: LLMRequest) -> LLMResponse:
        raise LLMError("the provider charged for an answer it did not deliver", billed=True)

    def factory(model: str, api_base: str | None) -> ScriptedLLM:
        return ScriptedLLM(billed_failure, model=model)

    with (
        InProcessApi(tmp_path, llm_factory=factory, warm_up=False, budget_usd_per_user=10.0) as srv,
        srv.client(srv.key("acme", "alice")) as api,
    ):
        api.post("/v1/turns", json=small_turn())
        q = quote(api).json()
        started = api.post("/v1/traces", json={"quote_id": q["quote_id"]})
        done = api.get(started.headers["location"], params={"wait": "true"}).json()
        assert done["status"] == "failed" and done["calls"]["billed"] > 0
        # billed calls that reported no usage cost the quote's price per call; nothing else is kept
        per_call = q["cost_usd"] / q["planned_calls"]
        state = budget_state(srv.settings, "acme/alice")
        assert state.usd_spent == pytest.approx(done["calls"]["billed"] * per_call, rel=1e-9)
        assert state.usd_spent < q["cost_usd"] and state.remaining == 400 - done["calls"]["made"]


def test_a_restart_remembers_usd_spend(tmp_path: Path) -> None:
    data = tmp_path / "data"
    judge = Judge()
    with (
        InProcessApi(data, llm_factory=judge.factory, warm_up=False, budget_usd_per_user=10.0) as srv,
        srv.client(srv.admin_key) as api,
    ):
        api.post("/v1/turns", json=small_turn())
        q = quote(api).json()
        started = api.post("/v1/traces", json={"quote_id": q["quote_id"]})
        assert api.get(started.headers["location"], params={"wait": "true"}).json()["status"] == "succeeded"
    billed = judge.billed_usd(FAKE_PRICE)
    cap = q["cost_usd"] + billed / 2  # a fresh window would fit the next quote; the remembered spend does not
    with (
        InProcessApi(data, llm_factory=judge.factory, warm_up=False, budget_usd_per_user=cap) as srv,
        srv.client(srv.admin_key) as api,
    ):
        state = budget_state(srv.settings, f"{srv.settings.admin_tenant}/{srv.settings.admin_user}")
        assert state.usd_spent == pytest.approx(billed, rel=1e-9)
        body = problem(api.post("/v1/traces", json={"quote_id": quote(api).json()["quote_id"]}), 429)
        assert body["budget"] == "user_usd" and body["remaining_usd"] == pytest.approx(cap - billed, abs=1e-6)


# --------------------------------------------------------------------------- the three limiters


class MakeLimiter(Protocol):
    def __call__(
        self, clock: Callable[[], float], *, user_usd: float | None = ..., tenant_usd: float | None = ...
    ) -> Limiter: ...


@pytest.fixture(params=["memory", "redis", "sqlite", "postgres"])
async def make(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MakeLimiter]:
    if request.param == "memory":

        def memory(
            clock: Callable[[], float], *, user_usd: float | None = None, tenant_usd: float | None = None
        ) -> Limiter:
            return InProcessLimiter(100, 60, clock=clock, max_usd_per_user=user_usd, max_usd_per_tenant=tenant_usd)

        yield memory
        return
    if request.param == "redis":
        client = Redis.from_url(request.getfixturevalue("redis_url"))
        prefix = f"test-{secrets.token_hex(4)}"

        def redis(
            clock: Callable[[], float], *, user_usd: float | None = None, tenant_usd: float | None = None
        ) -> Limiter:
            return RedisLimiter(
                client, 100, 60, prefix=prefix, clock=clock, max_usd_per_user=user_usd, max_usd_per_tenant=tenant_usd
            )

        try:
            yield redis
        finally:
            keys = [k async for k in client.scan_iter(match=f"{prefix}:*")]
            if keys:
                await client.delete(*keys)
            await client.aclose()
        return
    url = (
        f"sqlite+aiosqlite:///{tmp_path / 'budget.db'}"
        if request.param == "sqlite"
        else await asyncio.to_thread(create_database, request.getfixturevalue("postgres_url"))
    )
    db = Database(url)
    await db.migrate()

    def database(
        clock: Callable[[], float], *, user_usd: float | None = None, tenant_usd: float | None = None
    ) -> Limiter:
        return DatabaseLimiter(db, 100, 60, clock=clock, max_usd_per_user=user_usd, max_usd_per_tenant=tenant_usd)

    try:
        yield database
    finally:
        await db.dispose()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def refusal(limiter: Limiter, user: str, calls: int, usd: float) -> RateLimited:
    with pytest.raises(RateLimited) as info:
        await limiter.reserve(user, calls, usd)
    return info.value


async def test_every_limiter_keeps_usd_per_user_reserved_then_settled_at_the_billed_cost(make: MakeLimiter) -> None:
    clock = Clock()
    limiter = make(clock, user_usd=1.0)
    first = await limiter.reserve("acme/alice", 5, 0.75)
    assert first.cost_usd == 0.75
    refused = await refusal(limiter, "acme/alice", 1, 0.5)
    assert refused.extra["budget"] == "user_usd" and refused.extra["remaining_usd"] == pytest.approx(0.25)
    assert refused.retry_after == pytest.approx(60.0)
    clock.now += 10
    await limiter.settle(first, 3, 0.2)  # billed 0.2 of the 0.75 reserved
    state = await limiter.state("acme/alice")
    assert state.usd_spent == pytest.approx(0.2) and state.usd_remaining == pytest.approx(0.8)
    assert state.remaining == 97
    second = await limiter.reserve("acme/alice", 1, 0.8)  # exactly fills the money budget
    assert (await refusal(limiter, "acme/alice", 1, 0.01)).retry_after == pytest.approx(50.0)
    await limiter.settle(second, 0)  # nothing made: nothing kept
    assert (await limiter.state("acme/alice")).usd_spent == pytest.approx(0.2)
    whole = await refusal(limiter, "acme/bob", 1, 1.5)
    assert whole.extra["budget"] == "user_usd" and "more than the whole per-user budget" in whole.detail
    clock.now += 51  # the first reservation left the window
    assert (await limiter.state("acme/alice")).usd_spent == pytest.approx(0.0)


async def test_every_limiter_keeps_usd_per_tenant_across_its_users(make: MakeLimiter) -> None:
    clock = Clock()
    limiter = make(clock, tenant_usd=1.0)
    alice = await limiter.reserve("acme/alice", 2, 0.6)
    refused = await refusal(limiter, "acme/bob", 2, 0.6)
    assert refused.extra["budget"] == "tenant_usd" and "tenant acme" in refused.detail
    assert refused.extra["remaining_usd"] == pytest.approx(0.4)
    await limiter.reserve("globex/gary", 2, 0.9)  # another tenant
    await limiter.settle(alice, 2, 0.3)
    await limiter.reserve("acme/bob", 2, 0.6)
    state = await limiter.state("acme/alice")
    assert state.tenant_usd_spent == pytest.approx(0.9) and state.usd_spent == pytest.approx(0.3)
    assert state.tenant_usd_remaining == pytest.approx(0.1) and state.usd_limit is None


async def test_settling_without_a_billed_cost_keeps_the_reserved_price(make: MakeLimiter) -> None:
    limiter = make(Clock(), user_usd=5.0)
    held = await limiter.reserve("acme/alice", 4, 1.25)
    await limiter.settle(held, 2)  # calls made, price unknown: the reserved price stays counted
    assert (await limiter.state("acme/alice")).usd_spent == pytest.approx(1.25)


# --------------------------------------------------------------------------- hosts in model names


PROBE = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, "TESTS")
    from pathlib import Path
    from support.api_server import ApiServer, KeyedJudge, small_turn
    from support.fake_openai import FakeOpenAI

    hub = "huggingface/http://203.0.113.7/generate"
    out = {}
    judge = KeyedJudge()
    with FakeOpenAI(judge.openai) as provider:
        with ApiServer(Path(sys.argv[1]), warm_up=False, judgement_cache=False, allowed_models=[hub],
                       judge_api_base=provider.base_url, judge_api_key="test-key") as srv, \\
                srv.client(srv.admin_key, timeout=120) as api:
            api.post("/v1/turns", json=small_turn(model=hub))
            explicit = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0", "model": hub})
            out["explicit"] = [explicit.status_code, explicit.json()]
            own = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0"})
            out["own"] = [own.status_code, own.json()]
            if own.status_code == 201:
                started = api.post("/v1/traces", json={"quote_id": own.json()["quote_id"]})
                out["trace"] = api.get(started.headers["location"], params={"wait": "true"}).json()["status"]
        out["provider_models"] = sorted({body["model"] for body in provider.requests})
    print(json.dumps(out))
""")


@pytest.mark.slow  # a child process (the service under a network guard) importing the provider library
def test_a_model_naming_a_host_is_refused_and_nothing_leaves_the_machine(tmp_path: Path) -> None:
    guard_dir = tmp_path / "guard"
    guard_dir.mkdir()
    (guard_dir / "sitecustomize.py").write_text(GUARD, encoding="utf-8")
    log = tmp_path / "attempts.jsonl"
    log.write_text("", encoding="utf-8")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TIKTOKEN_", "HF_", "OPENAI_", "ANTHROPIC_", "HUGGINGFACE_", "PROVENANCE_"))
    }
    env.update(
        {
            "NETGUARD_LOG": str(log),
            "NO_PROXY": "*",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join([str(guard_dir), str(ROOT), str(ROOT / "tests")]),
        }
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE.replace("TESTS", str(ROOT / "tests")), str(tmp_path / "data")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])

    status, body = out["explicit"]  # on the allow-list by mistake, and still refused
    assert status == 422 and body["field"] == "model" and "names a host" in body["detail"]
    assert "PROVENANCE_JUDGE_API_BASE" in body["fix"]
    status, body = out["own"]  # the turn's own model names a host: the default runs instead
    assert status == 201 and body["model"] == DEFAULT and "names a host" in body["model_reason"]
    assert out["trace"] == "succeeded"
    assert out["provider_models"] == ["gpt-4o-mini"]  # only the configured provider was called
    assert log.read_text(encoding="utf-8").splitlines() == []  # and nothing else was contacted
