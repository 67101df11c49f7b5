"""The one meter: every model call of a trace (judge, span check, probe, scorer) goes through one ledger.

The ledger is the only counter and the only concurrency cap: at most ``concurrency`` calls in flight
(an anyio CapacityLimiter), never more than ``planned`` calls sent (the cost gate's worst case; an
extra call is refused before it is sent, so never billed), and the provider-reported usage and cost.

A call answered from a judgement cache (``LLMResponse.cached``) is ``cached``, not ``made``: it was
not a model call and was not billed. ``on_call`` is awaited before every call leaves (``sending``: ``made``
already counts it) and after it with what happened, so a service persists ``made`` before the provider can
bill the call, and settles a budget from the same numbers the result reports.

**Attempts.** A client that repeats a call's HTTP request (a retry after a 429, 5xx or timeout, or a fallback
after a rejected ``response_format``) awaits ``another_attempt()`` before each repeat. Every HTTP request is a
made call: the repeat counts in ``made`` (and the failed request before it in ``failed``), under the same
ceiling — a repeat over ``planned`` is refused unsent (``AttemptRefused``) — and ``on_call`` hears it
(``retrying``) before it leaves, so what a service persists and budgets is every request the provider
received. A call's record counts its ``attempts``.

**Price.** Given the judge's ``price`` (USD per input and output token), every chat call is priced at it (its
usage's tokens, reported or ``estimated``); without one, the provider-reported cost is kept.

Every call is also kept as a ``CallRecord`` (``calls()``): its stage and mask in words, the messages as
sent, the reply, the scalar the estimator read from it (``parse``), when it started, how long it took, its
usage and outcome. A caller names the stage and mask with keyword arguments, or around a block of calls
with ``labelled(stage, mask)`` (how the leave-one-out driver labels every scalar's calls without the
scalar knowing). The records are kept beside the counts, never instead of them: the counts above are
the only meter.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal, TypeVar

import anyio

from estimator.results.models import CallAccountModel
from estimator.seams.llm import LLM, LLMError, LLMRequest, LLMResponse, Message, Usage
from estimator.seams.scorer import ScoredTarget, Scorer, ScorerError

__all__ = [
    "AttemptRefused",
    "CallAbandoned",
    "CallBudgetExceeded",
    "CallEvent",
    "CallKind",
    "CallLabel",
    "CallLedger",
    "CallOutcome",
    "CallRecord",
    "CallStage",
    "another_attempt",
    "labelled",
]

CallOutcome = Literal["sending", "retrying", "answered", "cached", "failed", "failed_billed", "refused"]
"""A call's outcome; ``retrying`` is an event only (a repeated request about to leave: its record stays
``sending``)."""
CallKind = Literal["chat", "score"]
CallStage = Literal["round1", "round2", "redundancy", "spans", "probe", "gamma", "other"]
"""What a call was for: Γ's s(1) and s(0) (``gamma``), a layer removed (``round1``), a source removed
(``round2``), a source or layer kept alone (``redundancy``), a span check (``spans``), a probe's
regeneration (``probe``), anything else (``other``)."""
_T = TypeVar("_T")


@dataclass(frozen=True)
class CallLabel:
    """A call's stage and its mask in words ("all sources", "without s2", "span check of s0")."""

    stage: CallStage = "other"
    mask: str = ""


_LABEL: ContextVar[CallLabel | None] = ContextVar("estimator_call_label", default=None)


@contextmanager
def labelled(stage: CallStage, mask: str) -> Iterator[None]:
    """Label every ledger call made inside this block (in this task and the tasks it starts) that does not
    name its own stage and mask."""
    token = _LABEL.set(CallLabel(stage, mask))
    try:
        yield
    finally:
        _LABEL.reset(token)


@dataclass(frozen=True)
class CallRecord:
    """One model call as sent and as answered, for inspection.

    ``index`` is the order the ledger admitted it (from 0); ``messages`` are the request as sent (for a
    scoring call, the context; ``target`` is the text whose log-probability was asked for). ``outcome`` is
    ``sending`` while the call is in flight. ``reply`` is the model's text (None for scoring calls and
    failures); ``parsed`` the scalar the estimator read from the answer (a digit 1–9, an expected digit, a
    log-probability in nats, a probe's anchor coverage), None when it read none. ``seconds`` is the time from
    sending to the answer or failure."""

    index: int
    kind: CallKind
    stage: CallStage
    mask: str
    outcome: CallOutcome
    messages: tuple[Message, ...]
    started_at: datetime
    target: str | None = None
    reply: str | None = None
    parsed: float | None = None
    seconds: float = 0.0
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    attempts: int = 1
    """HTTP requests sent for this call (retries and fallbacks included); 0 for a cached or refused call."""
    max_tokens: int | None = None
    """The answer's token cap the request asked for (None: the provider's default)."""

    @property
    def prompt(self) -> tuple[Message, ...]:
        """The messages as sent; a scoring call's target follows as the assistant's message it scored."""
        if self.target is None:
            return self.messages
        return (*self.messages, Message("assistant", self.target))


class CallBudgetExceeded(LLMError):
    """A call the plan did not allow for; refused before it was sent (so never billed)."""


class AttemptRefused(CallBudgetExceeded):
    """A repeated request (retry or fallback) over the plan's ceiling: refused before it was sent. ``cause`` is
    the failure of the request it would have repeated, when the client knows it: the trace's reason names that
    failure (the provider could not be reached, …), not only the refusal."""

    cause: LLMError | None = None

    def with_cause(self, cause: LLMError) -> AttemptRefused:
        refused = AttemptRefused(f"{cause} (not retried: {self})")
        refused.cause = cause
        return refused


_ATTEMPT: ContextVar[Callable[[], Awaitable[None]] | None] = ContextVar("estimator_attempt_hook", default=None)


async def another_attempt() -> None:
    """Called by a client before it sends one more HTTP request for the call in progress (a retry or a
    fallback). Under a ledger, the request is counted as made (the one before it as failed), persisted through
    ``on_call`` before it leaves, or refused over the plan's ceiling (``AttemptRefused``, unsent). Outside a
    ledger it does nothing."""
    hook = _ATTEMPT.get()
    if hook is not None:
        await hook()


class CallAbandoned(Exception):
    """A call its caller no longer wanted by the time a slot was free (``wanted`` said no): never sent,
    never counted."""


@dataclass(frozen=True)
class CallEvent:
    """One call as the ledger saw it: its outcome, its usage, the error text of a failed call, and its
    ``record`` (the call in flight for ``sending``, then as it ended)."""

    outcome: CallOutcome
    kind: CallKind
    usage: Usage
    error: str | None = None
    record: CallRecord | None = None


OnCall = Callable[["CallLedger", CallEvent], Awaitable[None]]


class CallLedger:
    """Every model call of one trace: the concurrency cap, the plan's ceiling, the account, the hook."""

    def __init__(
        self,
        *,
        planned: int | None,
        concurrency: int,
        on_call: OnCall | None = None,
        price: tuple[float, float] | None = None,
    ) -> None:
        self.planned = planned
        self.price = price
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
        self.last_exception: LLMError | ScorerError | None = None  # the last a client raised (not a refused repeat)
        self.usage = Usage()
        self._cost = 0.0
        self._cost_known = True
        self.unpriced_billed = 0  # billed calls whose cost is unknown (no price, none reported)
        self._records: dict[int, CallRecord] = {}  # index → the call, in flight (``sending``) or ended

    def calls(self) -> list[CallRecord]:
        """Every call admitted or refused so far, in the order sent; a call still in flight (or cut off by a
        cancellation) has outcome ``sending``. Calls abandoned unsent (``wanted``) are not calls."""
        return [self._records[i] for i in sorted(self._records)]

    @property
    def cost_usd(self) -> float | None:
        """Sum of the calls' costs (at ``price`` when given, else as the provider reported them); None when any
        billed call's cost is unknown."""
        return self._cost if self._cost_known else None

    @property
    def known_cost_usd(self) -> float:
        """Sum of the costs that are known (the ``unpriced_billed`` calls left out)."""
        return self._cost

    def priced(self, usage: Usage, kind: CallKind) -> Usage:
        """``usage`` with its cost at the ledger's price (chat calls; scoring calls keep theirs)."""
        if self.price is None or kind != "chat":
            return usage
        return replace(usage, cost_usd=usage.input_tokens * self.price[0] + usage.output_tokens * self.price[1])

    def account(self) -> CallAccountModel:
        """The trace's calls so far, as the result reports them."""
        return CallAccountModel(
            planned=self.planned or 0,
            made=self.made,
            saved=self.saved,
            cached=self.cached,
            failed=self.failed,
            failed_billed=self.failed_billed,
            refused=self.refused,
            billed=self.billed,
        )

    def note_saved(self) -> None:
        """A measurement answered from the per-trace memo instead of a call."""
        self.saved += 1

    def _admit(self) -> None:
        if self.planned is not None and self.made >= self.planned:
            self.refused += 1
            raise CallBudgetExceeded(f"call refused: the plan allows {self.planned} calls")
        self.made += 1

    def _failed(self, exc: LLMError | ScorerError, kind: CallKind) -> CallEvent:
        if not isinstance(exc, AttemptRefused):
            self.failed += 1
            self.last_exception = exc
        elif exc.cause is not None:  # a refused repeat: the failure before it is already counted, and is its cause
            self.last_exception = exc.cause
        self.last_error = str(exc)[:300]
        usage = Usage()
        if exc.billed:
            self.failed_billed += 1
            self.billed += 1
            known = getattr(exc, "usage", None)
            usage = self.priced(known, kind) if isinstance(known, Usage) else Usage()
            if isinstance(known, Usage) and usage.cost_usd is not None:
                self.usage = self.usage + usage
                self._cost += usage.cost_usd
            else:
                self._cost_known = False  # billed, at a price the provider did not report
                self.unpriced_billed += 1
        return CallEvent("failed_billed" if exc.billed else "failed", kind, usage, self.last_error)

    def _answered(self, usage: Usage, *, cached: bool, kind: CallKind) -> CallEvent:
        self.answered += 1
        if cached:  # answered by a judgement cache: not a model call, not billed
            self.made -= 1
            self.cached += 1
            return CallEvent("cached", kind, usage)
        self.billed += 1
        usage = self.priced(usage, kind)
        self.usage = self.usage + usage
        if usage.cost_usd is None:
            self._cost_known = False
            self.unpriced_billed += 1
        else:
            self._cost += usage.cost_usd
        return CallEvent("answered", kind, usage)

    async def _notify(self, event: CallEvent) -> None:
        if self.on_call is not None:
            await self.on_call(self, event)

    def _open(
        self,
        kind: CallKind,
        label: CallLabel,
        messages: Sequence[Message],
        target: str | None,
        max_tokens: int | None = None,
    ) -> CallRecord:
        """The record of a call about to be admitted (or refused): the next index, the label, the request."""
        return CallRecord(
            index=len(self._records),
            kind=kind,
            stage=label.stage,
            mask=label.mask,
            outcome="sending",
            messages=tuple(messages),
            started_at=datetime.now(UTC),
            target=target,
            max_tokens=max_tokens,
        )

    def _keep(self, record: CallRecord) -> CallRecord:
        self._records[record.index] = record
        return record

    async def _metered(
        self,
        kind: CallKind,
        send: Callable[[], Awaitable[_T]],
        usage_of: Callable[[_T], tuple[Usage, bool]],
        wanted: Callable[[], bool] | None = None,
        *,
        request: tuple[Sequence[Message], str | None] = ((), None),
        label: CallLabel | None = None,
        answer_of: Callable[[_T], tuple[str | None, float | None]] | None = None,
        max_tokens: int | None = None,
    ) -> _T:
        """One call under the cap and the plan's ceiling. ``on_call`` hears ``sending`` before the call
        leaves (so a service persists ``made`` before the provider can bill it), then its outcome.
        ``wanted`` is asked once a slot is free: False abandons the call (CallAbandoned), unsent.
        ``request`` (messages, scored target), ``label`` and ``answer_of`` (reply text, parsed scalar) go
        into the call's record."""
        label = label or _LABEL.get() or CallLabel()
        borrower = object()
        await self.limiter.acquire_on_behalf_of(borrower)
        try:
            if wanted is not None and not wanted():
                raise CallAbandoned("the caller no longer wanted this call")
            record = self._open(kind, label, *request, max_tokens=max_tokens)
            try:
                self._admit()
            except CallBudgetExceeded as exc:
                refused = self._keep(replace(record, outcome="refused", error=str(exc), attempts=0))
                await self._notify(CallEvent("refused", kind, Usage(), str(exc), refused))
                raise
            self._keep(record)
            await self._notify(CallEvent("sending", kind, Usage(), None, record))
            record = self._keep(replace(record, started_at=datetime.now(UTC)))
            index = record.index

            async def repeat() -> None:
                await self._repeat(index, kind)

            started = time.perf_counter()
            hook = _ATTEMPT.set(repeat)
            try:
                answer = await send()
            except (LLMError, ScorerError) as exc:
                failed = self._failed(exc, kind)
                ended = self._keep(
                    replace(
                        self._records[index],
                        outcome=failed.outcome,
                        seconds=time.perf_counter() - started,
                        error=str(exc),
                        usage=failed.usage,
                    )
                )
                await self._notify(replace(failed, record=ended))
                raise
            finally:
                _ATTEMPT.reset(hook)
            seconds = time.perf_counter() - started
            usage, cached = usage_of(answer)
            event = self._answered(usage, cached=cached, kind=kind)
            record = self._records[index]
        finally:
            self.limiter.release_on_behalf_of(borrower)
        reply, parsed = answer_of(answer) if answer_of is not None else (None, None)
        ended = self._keep(
            replace(
                record,
                outcome=event.outcome,
                reply=reply,
                parsed=_finite(parsed),
                seconds=seconds,
                usage=event.usage,
                attempts=0 if event.outcome == "cached" else record.attempts,
            )
        )
        await self._notify(replace(event, record=ended))
        return answer

    async def _repeat(self, index: int, kind: CallKind) -> None:
        """One more HTTP request for call ``index`` (``another_attempt``): the one before it failed; this one is
        made, under the plan's ceiling, and heard by ``on_call`` before it leaves."""
        self.failed += 1
        if self.planned is not None and self.made >= self.planned:
            self.refused += 1
            raise AttemptRefused(
                f"retry refused: the plan allows {self.planned} requests to the provider and all were sent"
            )
        self.made += 1
        record = self._keep(replace(self._records[index], attempts=self._records[index].attempts + 1))
        await self._notify(CallEvent("retrying", kind, Usage(), None, record))

    async def call(
        self,
        llm: LLM,
        request: LLMRequest,
        *,
        wanted: Callable[[], bool] | None = None,
        stage: CallStage | None = None,
        mask: str | None = None,
        parse: Callable[[LLMResponse], float | None] | None = None,
    ) -> LLMResponse:
        """Send one chat request under the cap. Raises LLMError (a failed call), CallBudgetExceeded, or
        CallAbandoned when ``wanted`` says no once a slot is free. ``stage`` and ``mask`` label the call's
        record (else the enclosing ``labelled`` block's); ``parse`` reads the scalar it records."""

        def answer_of(response: LLMResponse) -> tuple[str | None, float | None]:
            return response.text, parse(response) if parse is not None else None

        return await self._metered(
            "chat",
            lambda: llm.complete(request),
            lambda response: (response.usage, response.cached),
            wanted,
            request=(request.messages, None),
            label=_label(stage, mask),
            answer_of=answer_of,
            max_tokens=request.max_tokens,
        )

    async def score(
        self,
        scorer: Scorer,
        messages: Sequence[Message],
        target: str,
        *,
        stage: CallStage | None = None,
        mask: str | None = None,
    ) -> ScoredTarget:
        """One teacher-forced scoring call under the same cap and ceiling: a scoring call is a model call.
        Raises ScorerError (a failed call) or CallBudgetExceeded. Its record's parsed value is the
        target's log-probability in nats."""

        def usage_of(scored: ScoredTarget) -> tuple[Usage, bool]:
            return Usage(input_tokens=scored.prompt_tokens + scored.n_tokens, cost_usd=0.0), False

        return await self._metered(
            "score",
            lambda: scorer.score(messages, target),
            usage_of,
            request=(messages, target),
            label=_label(stage, mask),
            answer_of=lambda scored: (None, scored.logprob_total),
        )


def _label(stage: CallStage | None, mask: str | None) -> CallLabel | None:
    """The label a caller gave (the enclosing block's for whatever it left out), or None for the block's."""
    if stage is None and mask is None:
        return None
    around = _LABEL.get() or CallLabel()
    return CallLabel(stage or around.stage, around.mask if mask is None else mask)


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) or math.isinf(value) else float(value)
