"""The per-user model-call budget in Redis, shared by every API process and worker.

Same semantics as ``limits.InProcessLimiter`` (the shared suite ``tests/test_limiter.py`` runs both):
a sliding window of ``max_calls`` per ``window_seconds`` per user; a reservation is refused whole or
granted whole; settling keeps the calls used (at the reservation's time) and releases the rest.

Each user's live reservations are one Redis hash (``<prefix>:budget:<user>``: reservation id →
``"<time> <calls>"``). Reserve, settle and state are each one Lua script, so the purge of expired
entries, the sum and the insert happen atomically on the server — two processes can never both take
the last calls. Time is the Redis server's clock (``TIME``), one clock for every process; tests may
pass their own ``clock``. The hash expires a window after its last write, so idle users cost nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis

from provenance_api.storage.limits import BudgetState, Reservation, budget_exhausted, over_whole_budget

_PURGE = """
local function live(key, now, window)
  local flat = redis.call('HGETALL', key)
  local entries = {}
  local used = 0
  for i = 1, #flat, 2 do
    local at, n = string.match(flat[i + 1], '^(%S+) (%S+)$')
    at = tonumber(at)
    n = tonumber(n)
    if at <= now - window then
      redis.call('HDEL', key, flat[i])
    else
      used = used + n
      table.insert(entries, {at, n})
    end
  end
  return entries, used
end
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
local entries, used = live(KEYS[1], now, window)
if calls > max_calls then
  return {2, used, string.format('%.17g', now), tostring(window)}
end
if used + calls > max_calls then
  table.sort(entries, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  local free = max_calls - used
  local wait = window
  for _, e in ipairs(entries) do
    free = free + e[2]
    if free >= calls then
      wait = math.max(0, e[1] + window - now)
      break
    end
  end
  return {1, used, string.format('%.17g', now), string.format('%.17g', wait)}
end
local id = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], id, string.format('%.17g %d', now, calls))
redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000) + 1000)
return {0, id, string.format('%.17g', now), '0'}
"""
)

SETTLE = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local at = string.match(v, '^(%S+) ')
local kept = tonumber(ARGV[2])
if kept > 0 then
  redis.call('HSET', KEYS[1], ARGV[1], at .. ' ' .. string.format('%d', kept))
else
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 1
"""

STATE = (
    _PURGE
    + """
local entries, used = live(KEYS[1], clock(ARGV[2]), tonumber(ARGV[1]))
return used
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
    ) -> None:
        self.redis = redis
        self.max_calls = max_calls
        self.window = window_seconds
        self.prefix = prefix
        self._clock = clock
        self._reserve = redis.register_script(RESERVE)
        self._settle = redis.register_script(SETTLE)
        self._state = redis.register_script(STATE)

    def _key(self, user: str) -> str:
        return f"{self.prefix}:budget:{user}"

    def _now(self) -> str:
        return "" if self._clock is None else repr(float(self._clock()))

    async def reserve(self, user: str, calls: int) -> Reservation:
        out: list[Any] = await self._reserve(
            keys=[self._key(user), f"{self.prefix}:budget-seq"],
            args=[self.max_calls, self.window, calls, self._now()],
        )
        code, value, now = int(out[0]), int(out[1]), float(out[2])
        if code == 2:
            raise over_whole_budget(calls, value, self.max_calls, self.window)
        if code == 1:
            raise budget_exhausted(calls, value, self.max_calls, self.window, float(out[3]))
        return Reservation(value, user, calls, now)

    async def settle(self, reservation: Reservation, used: int) -> None:
        kept = max(0, min(used, reservation.calls))
        await self._settle(keys=[self._key(reservation.user)], args=[reservation.id, kept])

    async def state(self, user: str) -> BudgetState:
        used = int(await self._state(keys=[self._key(user)], args=[self.window, self._now()]))
        return BudgetState(limit=self.max_calls, remaining=max(0, self.max_calls - used), window_seconds=self.window)
