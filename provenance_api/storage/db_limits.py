"""The per-user model-call budget in the service's database: the embedded mode's limiter.

Same semantics as ``limits.InProcessLimiter`` and ``redis_limits.RedisLimiter`` (the shared suite
``tests/service/test_limiter.py`` runs all three): a sliding window of ``max_calls`` per ``window_seconds`` per user; a
reservation is refused whole or granted whole; settling keeps the calls used (at the reservation's time) and
releases the rest. Kept in the database, so a restart remembers what was spent in the window (an in-memory
window started from zero after a crash). A reservation still open when the process died stays counted at its
reserved size until its window passes: the budget errs on the side of the operator's money.

Time is wall-clock (``time.time``), which survives a restart; tests may pass their own ``clock``. Each reserve
is one transaction that purges expired entries (SQLite's write lock is held from that first write on) and inserts
only if the live sum leaves room, in one ``INSERT … SELECT … WHERE``; PostgreSQL adds a per-user advisory lock. Two
processes can never both take the last calls.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from provenance_api.core.errors import RateLimited
from provenance_api.storage.limits import (
    MONEY_EPSILON,
    BudgetState,
    Reservation,
    budget_exhausted,
    kept_on_settle,
    money_refused,
    money_wait,
    over_whole_budget,
    tenant_of,
)
from provenance_api.storage.session import Database


def _lock_key(user: str) -> int:
    return int.from_bytes(hashlib.sha256(b"budget:" + user.encode()).digest()[:8], "big", signed=True)


def _tenant_lock_key(tenant: str) -> int:
    return int.from_bytes(hashlib.sha256(b"budget-tenant:" + tenant.encode()).digest()[:8], "big", signed=True)


def _usd_fits(key_column: str, key: str, cap: str) -> str:
    """The SQL condition that the window's USD of ``key_column = :key`` plus this reservation stays within
    ``:cap`` (with the float slack ``:eps``)."""
    return (
        f" AND (SELECT COALESCE(SUM(cost_usd), 0) FROM budget_entries WHERE {key_column} = "
        f"CAST(:{key} AS VARCHAR(260)) AND at > CAST(:cut AS DOUBLE PRECISION)) + "
        f"CAST(:c AS DOUBLE PRECISION) <= CAST(:{cap} AS DOUBLE PRECISION) + CAST(:eps AS DOUBLE PRECISION)"
    )


class DatabaseLimiter:
    """A sliding-window call (and money) budget per user, and money per tenant, in the ``budget_entries``
    table (one row per reservation: its user, its tenant, the calls and the USD it holds)."""

    def __init__(
        self,
        db: Database,
        max_calls: int,
        window_seconds: int,
        *,
        clock: Callable[[], float] = time.time,
        max_usd_per_user: float | None = None,
        max_usd_per_tenant: float | None = None,
    ) -> None:
        self.db = db
        self.max_calls = max_calls
        self.window = window_seconds
        self.max_usd_per_user = max_usd_per_user
        self.max_usd_per_tenant = max_usd_per_tenant
        self._clock = clock

    async def _live(self, conn: AsyncConnection, user: str, now: float) -> list[tuple[float, int, float]]:
        await conn.execute(
            text("DELETE FROM budget_entries WHERE user_key = :u AND at <= :cut"), {"u": user, "cut": now - self.window}
        )
        rows = (
            await conn.execute(
                text("SELECT at, calls, cost_usd FROM budget_entries WHERE user_key = :u ORDER BY at"), {"u": user}
            )
        ).all()
        return [(float(r[0]), int(r[1]), float(r[2] or 0.0)) for r in rows]

    async def _tenant_spend(self, conn: AsyncConnection, tenant: str, now: float) -> list[tuple[float, float]]:
        rows = (
            await conn.execute(
                text("SELECT at, cost_usd FROM budget_entries WHERE tenant_key = :t AND at > :cut ORDER BY at"),
                {"t": tenant, "cut": now - self.window},
            )
        ).all()
        return [(float(r[0]), float(r[1] or 0.0)) for r in rows]

    async def _money_refusal(
        self, conn: AsyncConnection, user: str, entries: list[tuple[float, int, float]], cost: float, now: float
    ) -> RateLimited | None:
        """The money budget this reservation would break (user first, then tenant), or None."""
        checks: list[tuple[str, str, float, list[tuple[float, float]]]] = []
        if self.max_usd_per_user is not None:
            checks.append(("user", user, self.max_usd_per_user, [(at, usd) for at, _, usd in entries]))
        if self.max_usd_per_tenant is not None:
            tenant = tenant_of(user)
            checks.append(("tenant", tenant, self.max_usd_per_tenant, await self._tenant_spend(conn, tenant, now)))
        for scope, name, limit, spend in checks:
            spent = sum(usd for _, usd in spend)
            if cost > limit + MONEY_EPSILON:
                return money_refused(scope, name, cost, spent, limit, self.window, None)
            if spent + cost > limit + MONEY_EPSILON:
                wait = money_wait(spend, limit, spent, cost, now, self.window)
                return money_refused(scope, name, cost, spent, limit, self.window, wait)
        return None

    def _retry_after(self, entries: list[tuple[float, int, float]], need: int, now: float) -> float:
        free = self.max_calls - sum(n for _, n, _ in entries)
        for at, n, _ in entries:
            free += n
            if free >= need:
                return max(0.0, at + self.window - now)
        return float(self.window)

    async def reserve(self, user: str, calls: int, cost_usd: float = 0.0) -> Reservation:
        tenant = tenant_of(user)
        async with self.db.engine.begin() as conn:
            if conn.dialect.name != "sqlite":  # SQLite: the first write below takes the database's write lock
                if self.max_usd_per_tenant is not None:  # always tenant, then user: no lock-order deadlock
                    await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _tenant_lock_key(tenant)})
                await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_key(user)})
            now = self._clock()
            entries = await self._live(conn, user, now)
            used = sum(n for _, n, _ in entries)
            if calls > self.max_calls:
                raise over_whole_budget(calls, used, self.max_calls, self.window)
            values = {
                "u": user,
                "t": tenant,
                "at": now,
                "n": calls,
                "c": float(cost_usd),
                "cut": now - self.window,
                "max": self.max_calls,
                "eps": MONEY_EPSILON,
            }
            money = ""
            if self.max_usd_per_user is not None:
                money += _usd_fits("user_key", "u", "umax")
                values["umax"] = self.max_usd_per_user
            if self.max_usd_per_tenant is not None:
                money += _usd_fits("tenant_key", "t", "tmax")
                values["tmax"] = self.max_usd_per_tenant
            rid = (
                await conn.execute(
                    text(
                        "INSERT INTO budget_entries (user_key, tenant_key, at, calls, cost_usd) "
                        "SELECT CAST(:u AS VARCHAR(260)), CAST(:t AS VARCHAR(260)), CAST(:at AS DOUBLE PRECISION), "
                        "CAST(:n AS INTEGER), CAST(:c AS DOUBLE PRECISION) WHERE "
                        "(SELECT COALESCE(SUM(calls), 0) FROM budget_entries WHERE user_key = CAST(:u AS VARCHAR(260)) "
                        "AND at > CAST(:cut AS DOUBLE PRECISION)) + CAST(:n AS INTEGER) <= CAST(:max AS INTEGER)"
                        + money
                        + " RETURNING id"
                    ),
                    values,
                )
            ).scalar_one_or_none()
            if rid is None:
                if used + calls > self.max_calls:
                    raise budget_exhausted(
                        calls, used, self.max_calls, self.window, self._retry_after(entries, calls, now)
                    )
                refusal = await self._money_refusal(conn, user, entries, float(cost_usd), now)
                raise refusal or budget_exhausted(
                    calls, used, self.max_calls, self.window, self._retry_after(entries, calls, now)
                )
        return Reservation(int(rid), user, calls, now, float(cost_usd))

    async def settle(self, reservation: Reservation, used: int, billed_usd: float | None = None) -> None:
        kept, cost = kept_on_settle(reservation, used, billed_usd)
        async with self.db.engine.begin() as conn:
            if kept or cost:
                await conn.execute(
                    text("UPDATE budget_entries SET calls = :n, cost_usd = :c WHERE id = :id AND user_key = :u"),
                    {"n": kept, "c": cost, "id": reservation.id, "u": reservation.user},
                )
            else:
                await conn.execute(
                    text("DELETE FROM budget_entries WHERE id = :id AND user_key = :u"),
                    {"id": reservation.id, "u": reservation.user},
                )

    async def state(self, user: str) -> BudgetState:
        async with self.db.engine.begin() as conn:
            now = self._clock()
            entries = await self._live(conn, user, now)
            tenant = await self._tenant_spend(conn, tenant_of(user), now)
        used = sum(n for _, n, _ in entries)
        return BudgetState(
            limit=self.max_calls,
            remaining=max(0, self.max_calls - used),
            window_seconds=self.window,
            usd_limit=self.max_usd_per_user,
            usd_spent=sum(usd for _, _, usd in entries),
            tenant_usd_limit=self.max_usd_per_tenant,
            tenant_usd_spent=sum(usd for _, usd in tenant),
        )
