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
from typing import Any, Protocol

from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from estimator.params import Params

from .errors import InvalidInput, PayloadTooLarge, RateLimited


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


# --------------------------------------------------------------------------- per-request ceilings

# A request may lower these, never raise them above the server's value.
CEILINGS = (
    "max_calls",
    "max_evidence_tokens",
    "max_sources",
    "concurrency",
    "causal_samples",
    "causal_max_output",
    "source_token_cap",
    "support_token_cap",
    "history_max_messages",
)
# Server policy, not per-request.
SERVER_ONLY = ("rate_max_calls", "rate_window_seconds", "regex_timeout_seconds")


def request_params(base: Params, overrides: Mapping[str, Any] | None) -> Params:
    """``base`` with a request's overrides, validated: unknown names, bad values, server-only
    fields and raised ceilings are InvalidInput naming ``params.<field>``."""
    if not overrides:
        return base
    for name in overrides:
        if name in SERVER_ONLY:
            raise InvalidInput(
                f"params.{name} is server policy and cannot be set per request",
                field=f"params.{name}",
                fix=f"remove params.{name} from the request",
            )
    try:
        params = base.override(dict(overrides))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        name = f"params.{where}" if where else "params"
        raise InvalidInput(
            f"{name}: {first['msg']}",
            field=name,
            fix="see the Params schema for each constant's range; unknown names are rejected",
        ) from None
    for name in CEILINGS:
        if getattr(params, name) > getattr(base, name):
            raise InvalidInput(
                f"params.{name}={getattr(params, name)} is above this server's ceiling of "
                f"{getattr(base, name)}",
                field=f"params.{name}",
                fix=f"use a value of at most {getattr(base, name)}, or omit it",
            )
    return params


# --------------------------------------------------------------------------- request body size


class BodyLimitMiddleware:
    """Refuse a request body over ``max_bytes`` with 413 before any route reads it (by
    ``Content-Length`` when given, else by counting the chunks as they arrive)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(
            f"the request body is larger than this server's limit of {self.max_bytes:,} bytes",
            fix="send a smaller body (store long turns once, then refer to them by turn_id)",
            extra={"max_bytes": self.max_bytes},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from .problems import problem_response

        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await problem_response(self._too_large(), scope.get("path"))(scope, receive, send)
            return
        chunks: list[Message] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                chunks.append(message)
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await problem_response(self._too_large(), scope.get("path"))(scope, receive, send)
                return
            chunks.append(message)
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)
