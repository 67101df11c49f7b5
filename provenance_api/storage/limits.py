"""Limits: the per-user model-call budget and the per-request ceilings of §7.8.

The budget is ``RATE_MAX_CALLS`` model calls per ``RATE_WINDOW_SECONDS`` per user, over a sliding
window. A trace reserves its quoted (worst-case) calls atomically before it starts; when it ends
the reservation is settled to the calls actually made and the unused part is released at once.
A reservation that does not fit is refused with 429, ``Retry-After`` saying when it would.

``Limiter`` is the protocol the service uses; ``InProcessLimiter`` keeps the window in memory
(one process); ``redis_limits.RedisLimiter`` keeps it in Redis, shared by every process, with the
same semantics (both pass ``tests/service/test_limiter.py``).

Budgets are kept in money as well as calls: a reservation also holds the quote's price (``cost_usd``),
checked against ``max_usd_per_user`` (the user's spend in the window) and ``max_usd_per_tenant`` (every user
of the tenant: the budget key's part before ``/``); None is no money cap. Settling keeps the calls used and
the billed cost (``billed_usd``; when unknown, the reserved price if any call was made). A refusal names the
budget it hit in ``extra["budget"]``: ``user_calls``, ``user_usd`` or ``tenant_usd``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from provenance_api.core.errors import RateLimited

MONEY_EPSILON = 1e-9
"""Float slack when comparing sums of USD with a cap."""


@dataclass(frozen=True)
class Reservation:
    id: int
    user: str
    calls: int
    at: float
    cost_usd: float = 0.0


@dataclass(frozen=True)
class BudgetState:
    limit: int
    remaining: int
    window_seconds: int
    usd_limit: float | None = None  # the user's money cap per window (None: none)
    usd_spent: float = 0.0  # the user's reserved and billed USD in the window
    tenant_usd_limit: float | None = None
    tenant_usd_spent: float = 0.0

    @property
    def usd_remaining(self) -> float | None:
        return None if self.usd_limit is None else max(0.0, self.usd_limit - self.usd_spent)

    @property
    def tenant_usd_remaining(self) -> float | None:
        return None if self.tenant_usd_limit is None else max(0.0, self.tenant_usd_limit - self.tenant_usd_spent)


class Limiter(Protocol):
    async def reserve(self, user: str, calls: int, cost_usd: float = 0.0) -> Reservation:
        """Reserve ``calls`` and ``cost_usd`` for ``user`` or raise RateLimited (with retry_after)."""
        ...

    async def settle(self, reservation: Reservation, used: int, billed_usd: float | None = None) -> None:
        """Keep ``used`` of the reservation's calls and ``billed_usd`` (counted at its time) and release the rest;
        ``billed_usd`` None keeps the reserved price when any call was used, else nothing."""
        ...

    async def state(self, user: str) -> BudgetState: ...


def tenant_of(user: str) -> str:
    """The tenant of a budget key ``tenant/user``."""
    return user.split("/", 1)[0]


def kept_on_settle(reservation: Reservation, used: int, billed_usd: float | None) -> tuple[int, float]:
    """The calls and USD a settled reservation keeps (every ``Limiter`` settles the same)."""
    kept = max(0, min(used, reservation.calls))
    if billed_usd is not None:
        return kept, max(0.0, float(billed_usd))
    return kept, reservation.cost_usd if kept else 0.0


def money_wait(
    entries: Sequence[tuple[float, float]], limit: float, spent: float, need: float, now: float, window: int
) -> float:
    """Seconds until enough spend ((time, USD) entries) ages out of the window for ``need`` more USD."""
    free = limit - spent
    for at, usd in sorted(entries):
        free += usd
        if free + MONEY_EPSILON >= need:
            return max(0.0, at + window - now)
    return float(window)


def money_refused(
    scope: str, name: str, cost: float, spent: float, limit: float, window: int, wait: float | None
) -> RateLimited:
    """The refusal of a reservation over the ``scope`` (``user`` or ``tenant``) USD budget; ``wait`` None: the
    trace alone costs more than the whole budget."""
    remaining = max(0.0, limit - spent)
    budget = f"{scope}_usd"
    setting = "PROVENANCE_BUDGET_USD_PER_USER" if scope == "user" else "PROVENANCE_BUDGET_USD_PER_TENANT"
    extra = {
        "budget": budget,
        "limit_usd": limit,
        "remaining_usd": round(remaining, 6),
        "requested_usd": round(cost, 6),
    }
    if wait is None:
        return RateLimited(
            f"this trace is quoted at ${cost:.4f}, more than the whole per-{scope} budget of ${limit:.4f} per "
            f"{window} s ({scope} {name})",
            retry_after=float(window),
            fix=f"lower params.max_sources or choose a cheaper model, or ask the operator for a larger {setting}",
            extra=extra,
        )
    return RateLimited(
        f"{scope} USD budget exhausted: this trace reserves ${cost:.4f} but only ${remaining:.4f} of ${limit:.4f} "
        f"per {window} s remain for {scope} {name} (including what running traces reserved); "
        f"retry in {math.ceil(wait)} s",
        retry_after=wait,
        fix="wait for Retry-After seconds, or for a running trace to finish",
        extra=extra,
    )


def over_whole_budget(calls: int, used: int, max_calls: int, window: int) -> RateLimited:
    """The refusal of a reservation larger than the whole budget (every Limiter raises the same)."""
    return RateLimited(
        f"this trace needs up to {calls} model calls, more than the whole per-user budget of "
        f"{max_calls} calls per {window} s",
        retry_after=float(window),
        fix="lower params.max_calls or params.max_sources, or ask for a larger RATE_MAX_CALLS",
        extra={"budget": "user_calls", "limit": max_calls, "remaining": max_calls - used, "requested": calls},
    )


def budget_exhausted(calls: int, used: int, max_calls: int, window: int, wait: float) -> RateLimited:
    """The refusal of a reservation that does not fit what is left of the window."""
    return RateLimited(
        f"model-call budget exhausted: this trace reserves {calls} calls but only "
        f"{max_calls - used} of {max_calls} per {window} s remain for this user "
        f"(including calls reserved by running traces); retry in {math.ceil(wait)} s",
        retry_after=wait,
        fix="wait for Retry-After seconds, or for a running trace to finish",
        extra={"budget": "user_calls", "limit": max_calls, "remaining": max_calls - used, "requested": calls},
    )


class InProcessLimiter:
    """A sliding-window call (and money) budget per user, and money per tenant, in memory."""

    def __init__(
        self,
        max_calls: int,
        window_seconds: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_usd_per_user: float | None = None,
        max_usd_per_tenant: float | None = None,
    ) -> None:
        self.max_calls = max_calls
        self.window = window_seconds
        self.max_usd_per_user = max_usd_per_user
        self.max_usd_per_tenant = max_usd_per_tenant
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, dict[int, tuple[float, int, float]]] = {}
        self._next = 0

    def _live(self, user: str, now: float) -> dict[int, tuple[float, int, float]]:
        entries = self._entries.setdefault(user, {})
        for rid in [r for r, (at, _, _) in entries.items() if at <= now - self.window]:
            del entries[rid]
        return entries

    def _tenant_spend(self, tenant: str, now: float) -> list[tuple[float, float]]:
        return [
            (at, usd)
            for user in list(self._entries)
            if tenant_of(user) == tenant
            for at, _, usd in self._live(user, now).values()
        ]

    def _retry_after(self, entries: Mapping[int, tuple[float, int, float]], need: int, now: float) -> float:
        """Seconds until enough entries age out of the window for ``need`` more calls."""
        free = self.max_calls - sum(n for _, n, _ in entries.values())
        for at, n, _ in sorted(entries.values()):
            free += n
            if free >= need:
                return max(0.0, at + self.window - now)
        return float(self.window)

    def _check_money(self, user: str, entries: Mapping[int, tuple[float, int, float]], cost: float, now: float) -> None:
        checks = []
        if self.max_usd_per_user is not None:
            checks.append(("user", user, self.max_usd_per_user, [(at, usd) for at, _, usd in entries.values()]))
        if self.max_usd_per_tenant is not None:
            tenant = tenant_of(user)
            checks.append(("tenant", tenant, self.max_usd_per_tenant, self._tenant_spend(tenant, now)))
        for scope, name, limit, spend in checks:
            spent = sum(usd for _, usd in spend)
            if cost > limit + MONEY_EPSILON:
                raise money_refused(scope, name, cost, spent, limit, self.window, None)
            if spent + cost > limit + MONEY_EPSILON:
                wait = money_wait(spend, limit, spent, cost, now, self.window)
                raise money_refused(scope, name, cost, spent, limit, self.window, wait)

    async def reserve(self, user: str, calls: int, cost_usd: float = 0.0) -> Reservation:
        with self._lock:
            now = self._clock()
            entries = self._live(user, now)
            used = sum(n for _, n, _ in entries.values())
            if calls > self.max_calls:
                raise over_whole_budget(calls, used, self.max_calls, self.window)
            if used + calls > self.max_calls:
                raise budget_exhausted(calls, used, self.max_calls, self.window, self._retry_after(entries, calls, now))
            self._check_money(user, entries, cost_usd, now)
            self._next += 1
            entries[self._next] = (now, calls, cost_usd)
            return Reservation(self._next, user, calls, now, cost_usd)

    async def settle(self, reservation: Reservation, used: int, billed_usd: float | None = None) -> None:
        with self._lock:
            entries = self._entries.get(reservation.user, {})
            if reservation.id not in entries:
                return
            kept, cost = kept_on_settle(reservation, used, billed_usd)
            if kept or cost:
                entries[reservation.id] = (reservation.at, kept, cost)
            else:
                del entries[reservation.id]

    async def state(self, user: str) -> BudgetState:
        with self._lock:
            now = self._clock()
            entries = self._live(user, now)
            used = sum(n for _, n, _ in entries.values())
            spent = sum(usd for _, _, usd in entries.values())
            tenant_spent = sum(usd for _, usd in self._tenant_spend(tenant_of(user), now))
        return BudgetState(
            limit=self.max_calls,
            remaining=max(0, self.max_calls - used),
            window_seconds=self.window,
            usd_limit=self.max_usd_per_user,
            usd_spent=spent,
            tenant_usd_limit=self.max_usd_per_tenant,
            tenant_usd_spent=tenant_spent,
        )
