"""The per-user model-call budget in the service's database: the embedded mode's limiter.

Same semantics as ``limits.InProcessLimiter`` and ``redis_limits.RedisLimiter`` (the shared suite
``tests/test_limiter.py`` runs all three): a sliding window of ``max_calls`` per ``window_seconds`` per user; a
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

from provenance_api.storage.limits import BudgetState, Reservation, budget_exhausted, over_whole_budget
from provenance_api.storage.session import Database


def _lock_key(user: str) -> int:
    return int.from_bytes(hashlib.sha256(b"budget:" + user.encode()).digest()[:8], "big", signed=True)


class DatabaseLimiter:
    """A sliding-window call budget per user, in the ``budget_entries`` table."""

    def __init__(self, db: Database, max_calls: int, window_seconds: int, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.max_calls = max_calls
        self.window = window_seconds
        self._clock = clock

    async def _live(self, conn: AsyncConnection, user: str, now: float) -> list[tuple[float, int]]:
        await conn.execute(text("DELETE FROM budget_entries WHERE user_key = :u AND at <= :cut"),
                           {"u": user, "cut": now - self.window})
        rows = (await conn.execute(text("SELECT at, calls FROM budget_entries WHERE user_key = :u ORDER BY at"),
                                   {"u": user})).all()
        return [(float(r[0]), int(r[1])) for r in rows]

    def _retry_after(self, entries: list[tuple[float, int]], need: int, now: float) -> float:
        free = self.max_calls - sum(n for _, n in entries)
        for at, n in entries:
            free += n
            if free >= need:
                return max(0.0, at + self.window - now)
        return float(self.window)

    async def reserve(self, user: str, calls: int) -> Reservation:
        async with self.db.engine.begin() as conn:
            if conn.dialect.name != "sqlite":  # SQLite: the first write below takes the database's write lock
                await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_key(user)})
            now = self._clock()
            entries = await self._live(conn, user, now)
            used = sum(n for _, n in entries)
            if calls > self.max_calls:
                raise over_whole_budget(calls, used, self.max_calls, self.window)
            rid = (await conn.execute(text(
                "INSERT INTO budget_entries (user_key, at, calls) "
                "SELECT CAST(:u AS VARCHAR(260)), CAST(:at AS DOUBLE PRECISION), CAST(:n AS INTEGER) WHERE "
                "(SELECT COALESCE(SUM(calls), 0) FROM budget_entries WHERE user_key = CAST(:u AS VARCHAR(260)) "
                "AND at > CAST(:cut AS DOUBLE PRECISION)) + CAST(:n AS INTEGER) <= CAST(:max AS INTEGER) "
                "RETURNING id"), {"u": user, "at": now, "n": calls, "cut": now - self.window, "max": self.max_calls},
            )).scalar_one_or_none()
            if rid is None:
                raise budget_exhausted(calls, used, self.max_calls, self.window, self._retry_after(entries, calls, now))
        return Reservation(int(rid), user, calls, now)

    async def settle(self, reservation: Reservation, used: int) -> None:
        kept = max(0, min(used, reservation.calls))
        async with self.db.engine.begin() as conn:
            if kept:
                await conn.execute(text("UPDATE budget_entries SET calls = :n WHERE id = :id AND user_key = :u"),
                                   {"n": kept, "id": reservation.id, "u": reservation.user})
            else:
                await conn.execute(text("DELETE FROM budget_entries WHERE id = :id AND user_key = :u"),
                                   {"id": reservation.id, "u": reservation.user})

    async def state(self, user: str) -> BudgetState:
        async with self.db.engine.begin() as conn:
            entries = await self._live(conn, user, self._clock())
        used = sum(n for _, n in entries)
        return BudgetState(limit=self.max_calls, remaining=max(0, self.max_calls - used), window_seconds=self.window)
