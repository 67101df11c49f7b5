"""One suite for every ``Limiter``: the in-process window, the Redis one and the database one (the embedded
mode's, on SQLite and on a real Postgres) must behave the same.

Each test runs against ``InProcessLimiter``, ``RedisLimiter`` (on a real Redis server) and ``DatabaseLimiter``
with the same controllable clock, and asserts exact numbers: what is granted, what is refused, the
Retry-After of a refusal, and what settling gives back.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Protocol

import pytest
from redis.asyncio import Redis
from support.services import create_database

from provenance_api.core.errors import RateLimited
from provenance_api.storage.db_limits import DatabaseLimiter
from provenance_api.storage.limits import InProcessLimiter, Limiter
from provenance_api.storage.redis_limits import RedisLimiter
from provenance_api.storage.session import Database


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class MakeLimiter(Protocol):
    def __call__(self, max_calls: int, window: int, clock: Callable[[], float] | None = ...) -> Limiter: ...


@pytest.fixture(params=["memory", "redis", "sqlite", "postgres"])
async def make(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MakeLimiter]:
    if request.param in ("sqlite", "postgres"):
        url = (
            f"sqlite+aiosqlite:///{tmp_path / 'budget.db'}"
            if request.param == "sqlite"
            else await asyncio.to_thread(create_database, request.getfixturevalue("postgres_url"))
        )
        db = Database(url)
        await db.migrate()

        def database(max_calls: int, window: int, clock: Callable[[], float] | None = None) -> Limiter:
            if clock is None:
                return DatabaseLimiter(db, max_calls, window)
            return DatabaseLimiter(db, max_calls, window, clock=clock)

        try:
            yield database
        finally:
            await db.dispose()
        return
    if request.param == "memory":

        def memory(max_calls: int, window: int, clock: Callable[[], float] | None = None) -> Limiter:
            return InProcessLimiter(max_calls, window, clock=clock) if clock else InProcessLimiter(max_calls, window)

        yield memory
        return
    client = Redis.from_url(request.getfixturevalue("redis_url"))
    prefix = f"test-{secrets.token_hex(4)}"

    def redis(max_calls: int, window: int, clock: Callable[[], float] | None = None) -> Limiter:
        return RedisLimiter(client, max_calls, window, prefix=prefix, clock=clock)

    try:
        yield redis
    finally:
        keys = [k async for k in client.scan_iter(match=f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


async def refused(limiter: Limiter, user: str, calls: int) -> RateLimited:
    with pytest.raises(RateLimited) as info:
        await limiter.reserve(user, calls)
    return info.value


def budget(refusal: RateLimited) -> dict[str, object]:
    return {k: refusal.extra[k] for k in ("limit", "remaining", "requested")}


async def test_the_window_slides_and_settling_keeps_only_used_calls(make: MakeLimiter) -> None:
    clock = Clock()
    limiter = make(10, 100, clock)
    first = await limiter.reserve("t/u", 8)
    assert first.calls == 8 and first.user == "t/u" and first.at == clock.now
    refusal = await refused(limiter, "t/u", 5)
    assert refusal.retry_after == 100.0
    await limiter.settle(first, 3)  # 5 released at once
    assert (await limiter.state("t/u")).remaining == 7
    clock.now += 50
    second = await limiter.reserve("t/u", 5)
    clock.now += 10
    assert (await limiter.state("t/u")).remaining == 2
    clock.now += 40.5  # the first reservation's 3 calls left the window
    assert (await limiter.state("t/u")).remaining == 5
    await limiter.settle(second, 0)
    assert (await limiter.state("t/u")).remaining == 10
    state = await limiter.state("t/u")
    assert (state.limit, state.window_seconds) == (10, 100)


async def test_retry_after_is_when_enough_calls_age_out(make: MakeLimiter) -> None:
    clock = Clock()
    limiter = make(10, 60, clock)
    await limiter.reserve("t/u", 4)  # at 1000
    clock.now += 10
    await limiter.reserve("t/u", 4)  # at 1010
    clock.now += 5  # 1015: 2 left
    refusal = await refused(limiter, "t/u", 5)  # needs the first to age out: at 1060
    assert refusal.retry_after == pytest.approx(45.0)
    assert budget(refusal) == {"limit": 10, "remaining": 2, "requested": 5}
    assert "only 2 of 10 per 60 s remain" in refusal.detail and "retry in 45 s" in refusal.detail
    refusal = await refused(limiter, "t/u", 7)  # needs both to age out: at 1070
    assert refusal.retry_after == pytest.approx(55.0)
    assert (await limiter.reserve("t/u", 2)).calls == 2  # exactly fills the budget
    assert (await limiter.state("t/u")).remaining == 0


async def test_a_reservation_larger_than_the_whole_budget_is_refused(make: MakeLimiter) -> None:
    limiter = make(10, 60, Clock())
    refusal = await refused(limiter, "t/u", 11)
    assert refusal.retry_after == 60.0 and "more than the whole per-user budget of 10" in refusal.detail
    assert budget(refusal) == {"limit": 10, "remaining": 10, "requested": 11}
    assert (await limiter.state("t/u")).remaining == 10


async def test_budgets_are_per_user_and_settling_twice_or_late_is_harmless(make: MakeLimiter) -> None:
    clock = Clock()
    limiter = make(6, 30, clock)
    alice = await limiter.reserve("acme/alice", 6)
    bob = await limiter.reserve("acme/bob", 6)
    assert alice.id != bob.id
    await refused(limiter, "acme/alice", 1)
    await limiter.settle(alice, 2)
    await limiter.settle(alice, 1)  # settles against the original reservation, counted once
    assert (await limiter.state("acme/alice")).remaining == 5
    assert (await limiter.state("acme/bob")).remaining == 0
    clock.now += 31
    await limiter.settle(bob, 6)  # already out of the window: nothing comes back
    assert (await limiter.state("acme/bob")).remaining == 6
    assert (await limiter.state("acme/alice")).remaining == 6


async def test_concurrent_reservations_never_overspend(make: MakeLimiter) -> None:
    limiter = make(20, 3600)  # the real clock (Redis: the server's)
    outcomes = await asyncio.gather(*(limiter.reserve("t/u", 3) for _ in range(40)), return_exceptions=True)
    granted = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(granted) == 6 and all(isinstance(o, RateLimited) for o in outcomes if o not in granted)
    assert len({r.id for r in granted}) == 6
    assert (await limiter.state("t/u")).remaining == 2


async def test_redis_budget_holds_across_separate_clients(redis_url: str) -> None:
    """Two processes are two connections: many clients racing for one user's budget."""
    prefix = f"test-{secrets.token_hex(4)}"
    clients = [Redis.from_url(redis_url) for _ in range(4)]
    try:
        limiters = [RedisLimiter(c, 25, 3600, prefix=prefix) for c in clients]
        outcomes = await asyncio.gather(*(limiters[i % 4].reserve("t/u", 4) for i in range(30)), return_exceptions=True)
        granted = [o for o in outcomes if not isinstance(o, BaseException)]
        assert len(granted) == 6
        assert (await limiters[1].state("t/u")).remaining == 1
        await limiters[2].settle(granted[0], 1)
        assert (await limiters[3].state("t/u")).remaining == 4
    finally:
        for c in clients:
            await c.aclose()
