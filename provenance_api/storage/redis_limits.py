"""The per-user model-call budget in Redis, shared by every API process and worker.

Same semantics as ``limits.InProcessLimiter`` (the shared suite ``tests/service/test_limiter.py`` runs both):
a sliding window of ``max_calls`` per ``window_seconds`` per user; a reservation is refused whole or
granted whole; settling keeps the calls used (at the reservation's time) and releases the rest.

Each user's live reservations are one Redis hash (``<prefix>:budget:<user>``: reservation id →
``"<time> <calls> <usd>"``), and each tenant's one more (``<prefix>:budget-tenant:<tenant>``: id →
``"<time> <usd>"``), for the money budgets per user and per tenant.
Reserve, settle and state are each one Lua script, so the purge of expired entries, the sum and the insert
happen atomically on the server — two processes can never both take
the last calls. Time is the Redis server's clock (``TIME``), one clock for every process; tests may
pass their own ``clock``. The hash expires a window after its last write, so idle users cost nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis

from provenance_api.storage.limits import (
    BudgetState,
    Reservation,
    budget_exhausted,
    kept_on_settle,
    money_refused,
    over_whole_budget,
    tenant_of,
)

_PURGE = """
local function parse(v)
  local out = {}
  for w in string.gmatch(v, '%S+') do table.insert(out, tonumber(w)) end
  return out
end
local function live(key, now, window)
  local flat = redis.call('HGETALL', key)
  local entries = {}
  for i = 1, #flat, 2 do
    local e = parse(flat[i + 1])
    if e[1] <= now - window then
      redis.call('HDEL', key, flat[i])
    else
      table.insert(entries, e)
    end
  end
  return entries
end
local function total(entries, k)
  local s = 0
  for _, e in ipairs(entries) do s = s + (e[k] or 0) end
  return s
end
local function wait_for(entries, k, limit, used, need, now, window)
  table.sort(entries, function(a, b) return a[1] < b[1] or (a[1] == b[1] and (a[k] or 0) < (b[k] or 0)) end)
  local free = limit - used
  for _, e in ipairs(entries) do
    free = free + (e[k] or 0)
    if free + 1e-9 >= need then return math.max(0, e[1] + window - now) end
  end
  return window
end
local function fmt(x) return string.format('%.17g', x) end
local function clock(given)
  if given ~= '' then return tonumber(given) end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
if redis.replicate_commands then redis.replicate_commands() end
"""

RESERVE = (
    _PURGE
    + """
local max_calls = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local calls = tonumber(ARGV[3])
local now = clock(ARGV[4])
local cost = tonumber(ARGV[5])
local entries = live(KEYS[1], now, window)
local used = total(entries, 2)
if calls > max_calls then
  return {2, fmt(used), fmt(now), fmt(window)}
end
if used + calls > max_calls then
  return {1, fmt(used), fmt(now), fmt(wait_for(entries, 2, max_calls, used, calls, now, window))}
end
if ARGV[6] ~= '' then
  local limit = tonumber(ARGV[6])
  local spent = total(entries, 3)
  if cost > limit + 1e-9 then return {4, fmt(spent), fmt(now), fmt(window)} end
  if spent + cost > limit + 1e-9 then
    return {3, fmt(spent), fmt(now), fmt(wait_for(entries, 3, limit, spent, cost, now, window))}
  end
end
local tenant = live(KEYS[3], now, window)
if ARGV[7] ~= '' then
  local limit = tonumber(ARGV[7])
  local spent = total(tenant, 2)
  if cost > limit + 1e-9 then return {6, fmt(spent), fmt(now), fmt(window)} end
  if spent + cost > limit + 1e-9 then
    return {5, fmt(spent), fmt(now), fmt(wait_for(tenant, 2, limit, spent, cost, now, window))}
  end
end
local id = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], id, fmt(now) .. ' ' .. string.format('%d', calls) .. ' ' .. fmt(cost))
redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000) + 1000)
redis.call('HSET', KEYS[3], id, fmt(now) .. ' ' .. fmt(cost))
redis.call('PEXPIRE', KEYS[3], math.ceil(window * 1000) + 1000)
return {0, id, fmt(now), '0'}
"""
)

SETTLE = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local at = string.match(v, '^(%S+) ')
local kept = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
if kept > 0 or cost > 0 then
  redis.call('HSET', KEYS[1], ARGV[1], at .. ' ' .. string.format('%d', kept) .. ' ' .. string.format('%.17g', cost))
  if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
    redis.call('HSET', KEYS[2], ARGV[1], at .. ' ' .. string.format('%.17g', cost))
  end
else
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
end
return 1
"""

STATE = (
    _PURGE
    + """
local now = clock(ARGV[2])
local window = tonumber(ARGV[1])
local entries = live(KEYS[1], now, window)
local tenant = live(KEYS[2], now, window)
return {fmt(total(entries, 2)), fmt(total(entries, 3)), fmt(total(tenant, 2))}
"""
)


class RedisLimiter:
    """``limits.Limiter`` over Redis: atomic Lua scripts, the server's clock."""

    def __init__(
        self,
        redis: Redis,
        max_calls: int,
        window_seconds: int,
        *,
        prefix: str = "provenance",
        clock: Callable[[], float] | None = None,
        max_usd_per_user: float | None = None,
        max_usd_per_tenant: float | None = None,
    ) -> None:
        self.redis = redis
        self.max_calls = max_calls
        self.window = window_seconds
        self.prefix = prefix
        self.max_usd_per_user = max_usd_per_user
        self.max_usd_per_tenant = max_usd_per_tenant
        self._clock = clock
        self._reserve = redis.register_script(RESERVE)
        self._settle = redis.register_script(SETTLE)
        self._state = redis.register_script(STATE)

    def _key(self, user: str) -> str:
        return f"{self.prefix}:budget:{user}"

    def _tenant_key(self, user: str) -> str:
        return f"{self.prefix}:budget-tenant:{tenant_of(user)}"

    def _now(self) -> str:
        return "" if self._clock is None else repr(float(self._clock()))

    @staticmethod
    def _cap(value: float | None) -> str:
        return "" if value is None else repr(float(value))

    async def reserve(self, user: str, calls: int, cost_usd: float = 0.0) -> Reservation:
        out: list[Any] = await self._reserve(
            keys=[self._key(user), f"{self.prefix}:budget-seq", self._tenant_key(user)],
            args=[
                self.max_calls,
                self.window,
                calls,
                self._now(),
                repr(float(cost_usd)),
                self._cap(self.max_usd_per_user),
                self._cap(self.max_usd_per_tenant),
            ],
        )
        code, now = int(out[0]), float(out[2])
        if code == 0:
            return Reservation(int(out[1]), user, calls, now, float(cost_usd))
        used, wait = float(out[1]), float(out[3])
        if code == 2:
            raise over_whole_budget(calls, int(used), self.max_calls, self.window)
        if code == 1:
            raise budget_exhausted(calls, int(used), self.max_calls, self.window, wait)
        if code in (3, 4):
            assert self.max_usd_per_user is not None
            raise money_refused(
                "user", user, cost_usd, used, self.max_usd_per_user, self.window, wait if code == 3 else None
            )
        assert self.max_usd_per_tenant is not None
        raise money_refused(
            "tenant", tenant_of(user), cost_usd, used, self.max_usd_per_tenant, self.window, wait if code == 5 else None
        )

    async def settle(self, reservation: Reservation, used: int, billed_usd: float | None = None) -> None:
        kept, cost = kept_on_settle(reservation, used, billed_usd)
        await self._settle(
            keys=[self._key(reservation.user), self._tenant_key(reservation.user)],
            args=[reservation.id, kept, repr(float(cost))],
        )

    async def state(self, user: str) -> BudgetState:
        out: list[Any] = await self._state(
            keys=[self._key(user), self._tenant_key(user)], args=[self.window, self._now()]
        )
        used, spent, tenant_spent = int(float(out[0])), float(out[1]), float(out[2])
        return BudgetState(
            limit=self.max_calls,
            remaining=max(0, self.max_calls - used),
            window_seconds=self.window,
            usd_limit=self.max_usd_per_user,
            usd_spent=spent,
            tenant_usd_limit=self.max_usd_per_tenant,
            tenant_usd_spent=tenant_spent,
        )
