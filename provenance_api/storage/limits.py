"""Limits: the per-user model-call budget and the per-request ceilings of §7.8.

The budget is ``RATE_MAX_CALLS`` model calls per ``RATE_WINDOW_SECONDS`` per user, over a sliding
window. A trace reserves its quoted (worst-case) calls atomically before it starts; when it ends
the reservation is settled to the calls actually made and the unused part is released at once.
A reservation that does not fit is refused with 429, ``Retry-After`` saying when it would.

``Limiter`` is the protocol the service uses; ``InProcessLimiter`` keeps the window in memory
(one process); ``redis_limits.RedisLimiter`` keeps it in Redis, shared by every process, with the
same semantics (both pass ``tests/test_limiter.py``).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from provenance_api.core.errors import RateLimited


@dataclass(frozen=True)
class Reservation:
    id: int
    user: str
    calls: int
    at: float


@dataclass(frozen=True)
class BudgetState:
    limit: int
    remaining: int
    window_seconds: int


class Limiter(Protocol):
    async def reserve(self, user: str, calls: int) -> Reservation:
        """Reserve ``calls`` for ``user`` or raise RateLimited (with retry_after)."""
        ...

    async def settle(self, reservation: Reservation, used: int) -> None:
        """Keep ``used`` of the reservation (counted at its time) and release the rest."""
        ...

    async def state(self, user: str) -> BudgetState: ...


def over_whole_budget(calls: int, used: int, max_calls: int, window: int) -> RateLimited:
    """The refusal of a reservation larger than the whole budget (every Limiter raises the same)."""
    return RateLimited(
        f"this trace needs up to {calls} model calls, more than the whole per-user budget of "
        f"{max_calls} calls per {window} s",
        retry_after=float(window),
        fix="lower params.max_calls or params.max_sources, or ask for a larger RATE_MAX_CALLS",
        extra={"limit": max_calls, "remaining": max_calls - used, "requested": calls},
    )


def budget_exhausted(calls: int, used: int, max_calls: int, window: int, wait: float) -> RateLimited:
    """The refusal of a reservation that does not fit what is left of the window."""
    return RateLimited(
        f"model-call budget exhausted: this trace reserves {calls} calls but only "
        f"{max_calls - used} of {max_calls} per {window} s remain for this user "
        f"(including calls reserved by running traces); retry in {math.ceil(wait)} s",
        retry_after=wait,
        fix="wait for Retry-After seconds, or for a running trace to finish",
        extra={"limit": max_calls, "remaining": max_calls - used, "requested": calls},
    )


class InProcessLimiter:
    """A sliding-window call budget per user, in memory."""

    def __init__(
        self, max_calls: int, window_seconds: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_calls = max_calls
        self.window = window_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, dict[int, tuple[float, int]]] = {}
        self._next = 0

    def _live(self, user: str, now: float) -> dict[int, tuple[float, int]]:
        entries = self._entries.setdefault(user, {})
        for rid in [r for r, (at, _) in entries.items() if at <= now - self.window]:
            del entries[rid]
        return entries

    def _retry_after(self, entries: Mapping[int, tuple[float, int]], need: int, now: float) -> float:
        """Seconds until enough entries age out of the window for ``need`` more calls."""
        free = self.max_calls - sum(n for _, n in entries.values())
        for at, n in sorted(entries.values()):
            free += n
            if free >= need:
                return max(0.0, at + self.window - now)
        return float(self.window)

    async def reserve(self, user: str, calls: int) -> Reservation:
        with self._lock:
            now = self._clock()
            entries = self._live(user, now)
            used = sum(n for _, n in entries.values())
            if calls > self.max_calls:
                raise over_whole_budget(calls, used, self.max_calls, self.window)
            if used + calls > self.max_calls:
                raise budget_exhausted(calls, used, self.max_calls, self.window, self._retry_after(entries, calls, now))
            self._next += 1
            entries[self._next] = (now, calls)
            return Reservation(self._next, user, calls, now)

    async def settle(self, reservation: Reservation, used: int) -> None:
        with self._lock:
            entries = self._entries.get(reservation.user, {})
            if reservation.id not in entries:
                return
            kept = max(0, min(used, reservation.calls))
            if kept:
                entries[reservation.id] = (reservation.at, kept)
            else:
                del entries[reservation.id]

    async def state(self, user: str) -> BudgetState:
        with self._lock:
            entries = self._live(user, self._clock())
            used = sum(n for _, n in entries.values())
        return BudgetState(
            limit=self.max_calls, remaining=max(0, self.max_calls - used), window_seconds=self.window
        )
