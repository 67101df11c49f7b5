"""The one meter: every model call of a trace (judge, span check, probe, scorer) goes through one ledger.

The ledger is the only counter and the only concurrency cap: at most ``concurrency`` calls in flight
(an anyio CapacityLimiter), never more than ``planned`` calls sent (the cost gate's worst case; an
extra call is refused before it is sent, so never billed), and the provider-reported usage and cost.

A call answered from a judgement cache (``LLMResponse.cached``) is ``cached``, not ``made``: it was
not a model call and was not billed. ``on_call`` is awaited before every call leaves (``sending``: ``made``
already counts it) and after it with what happened, so a service persists ``made`` before the provider can
bill the call, and settles a budget from the same numbers the result reports.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import anyio

from .llm import LLM, LLMError, LLMRequest, LLMResponse, Message, Usage
from .result import CallAccount
from .scorer import ScoredTarget, Scorer, ScorerError

__all__ = ["CallAbandoned", "CallBudgetExceeded", "CallEvent", "CallLedger", "CallOutcome"]

CallOutcome = Literal["sending", "answered", "cached", "failed", "failed_billed", "refused"]
_T = TypeVar("_T")


class CallBudgetExceeded(LLMError):
    """A call the plan did not allow for; refused before it was sent (so never billed)."""


class CallAbandoned(Exception):
    """A call its caller no longer wanted by the time a slot was free (``wanted`` said no): never sent,
    never counted."""


@dataclass(frozen=True)
class CallEvent:
    """One call as the ledger saw it: its outcome, its usage, and the error text of a failed call."""

    outcome: CallOutcome
    kind: Literal["chat", "score"]
    usage: Usage
    error: str | None = None


OnCall = Callable[["CallLedger", CallEvent], Awaitable[None]]


class CallLedger:
    """Every model call of one trace: the concurrency cap, the plan's ceiling, the account, the hook."""

    def __init__(self, *, planned: int | None, concurrency: int, on_call: OnCall | None = None) -> None:
        self.planned = planned
        self.limiter = anyio.CapacityLimiter(concurrency)
        self.on_call = on_call
        self.made = 0
        self.answered = 0
        self.billed = 0
        self.saved = 0
        self.cached = 0
        self.failed = 0
        self.failed_billed = 0
        self.refused = 0
        self.last_error: str | None = None
        self.usage = Usage()
        self._cost = 0.0
        self._cost_known = True

    @property
    def cost_usd(self) -> float | None:
        """Sum of provider-reported costs; None when any call's cost is unknown."""
        return self._cost if self._cost_known else None

    def account(self) -> CallAccount:
        """The trace's calls so far, as the result reports them."""
        return CallAccount(planned=self.planned or 0, made=self.made, saved=self.saved, cached=self.cached,
                           failed=self.failed, failed_billed=self.failed_billed, refused=self.refused,
                           billed=self.billed)

    def failure(self) -> str | None:
        """Why the trace failed as a whole — every call it sent failed, so nothing was measured — or None.
        A failed trace is a failure, never a result of "no information" (the service and the CLI both ask
        this)."""
        if self.made and not self.answered:
            return f"every model call failed ({self.made} calls); last error: {self.last_error or 'unknown'}"
        return None

    def note_saved(self) -> None:
        """A measurement answered from the per-trace memo instead of a call."""
        self.saved += 1

    def _admit(self) -> None:
        if self.planned is not None and self.made >= self.planned:
            self.refused += 1
            raise CallBudgetExceeded(f"call refused: the plan allows {self.planned} calls")
        self.made += 1

    def _failed(self, exc: LLMError | ScorerError, kind: Literal["chat", "score"]) -> CallEvent:
        self.failed += 1
        self.last_error = str(exc)[:300]
        if exc.billed:
            self.failed_billed += 1
            self.billed += 1
            self._cost_known = False  # billed, at a price the provider did not report
        return CallEvent("failed_billed" if exc.billed else "failed", kind, Usage(), self.last_error)

    def _answered(self, usage: Usage, *, cached: bool, kind: Literal["chat", "score"]) -> CallEvent:
        self.answered += 1
        if cached:  # answered by a judgement cache: not a model call, not billed
            self.made -= 1
            self.cached += 1
            return CallEvent("cached", kind, usage)
        self.billed += 1
        self.usage = self.usage + usage
        if usage.cost_usd is None:
            self._cost_known = False
        else:
            self._cost += usage.cost_usd
        return CallEvent("answered", kind, usage)

    async def _notify(self, event: CallEvent) -> None:
        if self.on_call is not None:
            await self.on_call(self, event)

    async def _metered(self, kind: Literal["chat", "score"], send: Callable[[], Awaitable[_T]],
                       usage_of: Callable[[_T], tuple[Usage, bool]],
                       wanted: Callable[[], bool] | None = None) -> _T:
        """One call under the cap and the plan's ceiling. ``on_call`` hears ``sending`` before the call
        leaves (so a service persists ``made`` before the provider can bill it), then its outcome.
        ``wanted`` is asked once a slot is free: False abandons the call (CallAbandoned), unsent."""
        borrower = object()
        await self.limiter.acquire_on_behalf_of(borrower)
        try:
            if wanted is not None and not wanted():
                raise CallAbandoned("the caller no longer wanted this call")
            try:
                self._admit()
            except CallBudgetExceeded as exc:
                await self._notify(CallEvent("refused", kind, Usage(), str(exc)))
                raise
            await self._notify(CallEvent("sending", kind, Usage()))
            try:
                answer = await send()
            except (LLMError, ScorerError) as exc:
                await self._notify(self._failed(exc, kind))
                raise
            usage, cached = usage_of(answer)
            event = self._answered(usage, cached=cached, kind=kind)
        finally:
            self.limiter.release_on_behalf_of(borrower)
        await self._notify(event)
        return answer

    async def call(self, llm: LLM, request: LLMRequest, *, wanted: Callable[[], bool] | None = None) -> LLMResponse:
        """Send one chat request under the cap. Raises LLMError (a failed call), CallBudgetExceeded, or
        CallAbandoned when ``wanted`` says no once a slot is free."""
        return await self._metered("chat", lambda: llm.complete(request),
                                   lambda response: (response.usage, response.cached), wanted)

    async def score(self, scorer: Scorer, messages: Sequence[Message], target: str) -> ScoredTarget:
        """One teacher-forced scoring call under the same cap and ceiling: a scoring call is a model call.
        Raises ScorerError (a failed call) or CallBudgetExceeded."""

        def usage_of(scored: ScoredTarget) -> tuple[Usage, bool]:
            return Usage(input_tokens=scored.prompt_tokens + scored.n_tokens, cost_usd=0.0), False

        return await self._metered("score", lambda: scorer.score(messages, target), usage_of)
