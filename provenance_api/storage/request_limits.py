"""The request-rate limit of the endpoints that call no model (the free tier): ``max_requests`` per
``window_seconds`` per caller, over a sliding window.

These endpoints (quotes among them) cost no model call but do cost CPU (tokenizing, building the corpus,
searching, pricing), so a caller hammering them is refused with 429 (``RateLimited``, ``Retry-After`` saying
when the oldest request in the window ages out). ``InProcessRequestLimiter`` keeps the window in memory (the
embedded mode: one process); ``RedisRequestLimiter`` keeps it in Redis, shared by every API process, one atomic
Lua script per request on the Redis server's clock. A refused request is not counted.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from redis.asyncio import Redis

from provenance_api.core.errors import RateLimited

LIMIT_NAME = "free_tier_requests"


class RequestLimiter(Protocol):
    max_requests: int
    window: int

    async def hit(self, caller: str) -> None:
        """Count one request of ``caller`` or raise RateLimited (with retry_after)."""
        ...


def too_many_requests(max_requests: int, window: int, wait: float) -> RateLimited:
    """The refusal every RequestLimiter raises: which limit, its size, and when to retry."""
    return RateLimited(
        f"request rate exceeded: the endpoints that call no model (segments, sources, search, gating report, "
        f"quotes, verify, viewer reads) allow {max_requests} requests per {window} s per user; retry in "
        f"{max(1, math.ceil(wait))} s",
        retry_after=max(1.0, float(math.ceil(wait))),
        fix="wait for Retry-After seconds and send fewer requests, or ask the operator for a larger "
        "PROVENANCE_FREE_TIER_RATE_MAX_REQUESTS",
        extra={"limit_name": LIMIT_NAME, "limit": max_requests, "window_seconds": window},
    )


class InProcessRequestLimiter:
    """A sliding-window request count per caller, in memory (one process)."""

    def __init__(self, max_requests: int, window_seconds: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_requests = max_requests
        self.window = window_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, deque[float]] = {}
        self._swept = clock()

    def _sweep(self, now: float) -> None:
        """Forget callers idle for a whole window (at most once a window), so memory follows active callers."""
        if now - self._swept < self.window:
            return
        self._swept = now
        for caller in [c for c, times in self._seen.items() if not times or times[-1] <= now - self.window]:
            del self._seen[caller]

    async def hit(self, caller: str) -> None:
        with self._lock:
            now = self._clock()
            self._sweep(now)
            times = self._seen.setdefault(caller, deque())
            while times and times[0] <= now - self.window:
                times.popleft()
            if len(times) >= self.max_requests:
                raise too_many_requests(self.max_requests, self.window, times[0] + self.window - now)
            times.append(now)


HIT = """
if redis.replicate_commands then redis.replicate_commands() end
local max_requests = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now
if ARGV[3] ~= '' then
  now = tonumber(ARGV[3])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= max_requests then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, string.format('%.17g', tonumber(oldest[2]) + window - now)}
end
local seq = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], now, string.format('%.17g', now) .. '-' .. seq)
redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000) + 1000)
return {1, '0'}
"""


class RedisRequestLimiter:
    """``RequestLimiter`` over Redis, shared by every process: a sorted set of request times per caller
    (``<prefix>:requests:<caller>``), trimmed, counted and added to in one Lua script."""

    def __init__(
        self,
        redis: Redis,
        max_requests: int,
        window_seconds: int,
        *,
        prefix: str = "provenance",
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.redis = redis
        self.max_requests = max_requests
        self.window = window_seconds
        self.prefix = prefix
        self._clock = clock
        self._hit = redis.register_script(HIT)

    async def hit(self, caller: str) -> None:
        now = "" if self._clock is None else repr(float(self._clock()))
        out: list[Any] = await self._hit(
            keys=[f"{self.prefix}:requests:{caller}", f"{self.prefix}:requests-seq"],
            args=[self.max_requests, self.window, now],
        )
        if int(out[0]) == 0:
            raise too_many_requests(self.max_requests, self.window, float(out[1]))
