"""When a trace failed as a whole: the one rule, for every estimator, asked by the CLI and the service alike.

A trace that measured nothing is a failure, never a result of "no information": it is not stored or shown as a
result, the service ends its job ``failed`` and ``provenance trace`` exits 1, each with the cause and the setting
to fix. A trace failed when

* every model call it sent failed, whatever the calls were for; or
* every call of one of the scalars it measures did: the scoring model's under ``logprob``, ``both`` and ``proxy``
  (no scoring call gave a finite log-probability: each failed, or answered without one), or the judge's
  measurements under ``judged``, ``expected``, ``both`` and ``proxy`` (no judge call of Γ, the rounds and the
  redundancy gave a value: each failed, or answered without one — under ``expected`` an answer whose server sent
  no top log-probabilities, under ``judged`` an answer that is not a digit 1–9).

Span checks that answered do not make a result of a trace whose scalar measured nothing: under ``logprob`` they
are chat calls beside scoring calls that all failed, and counting them hid the failure (the trace ended
``succeeded`` with every score missing).

The scoring calls are counted by ``ScoringTally``, a plain wrapper around the trace's scorer, because under
``proxy`` they go through a ledger of their own (free local passes), not the trace's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from estimator.judge import parse_digit
from estimator.ledger import CallLedger, CallRecord, CallStage
from estimator.seams.llm import LLMError, Message
from estimator.seams.scorer import ScoredTarget, Scorer, ScorerError

__all__ = ["MEASURING_STAGES", "ScoringTally", "TraceFailure", "failed_trace"]

MEASURING_STAGES: frozenset[CallStage] = frozenset({"gamma", "round1", "round2", "redundancy"})
"""The stages whose calls measure the scalar (the span checks, probes and anything else do not)."""
_FAILED = ("failed", "failed_billed")
_ERROR_CHARS = 300


class ScoringTally:
    """The trace's scorer, counting what its calls gave: sent, failed (``ScorerError``), and valued (a finite
    log-probability). Everything else is the scorer's own."""

    def __init__(self, inner: Scorer) -> None:
        self.inner = inner
        self.sent = 0
        self.failed = 0
        self.valued = 0
        self.last_error: str | None = None

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def evaluated_tokens(self) -> int | None:
        """The inner scorer's count of prompt tokens evaluated, when it keeps one (the proxy reports it)."""
        value = getattr(self.inner, "evaluated_tokens", None)
        return value if isinstance(value, int) else None

    async def score(self, messages: Sequence[Message], target: str) -> ScoredTarget:
        self.sent += 1
        try:
            scored = await self.inner.score(messages, target)
        except ScorerError as exc:
            self.failed += 1
            self.last_error = str(exc)[:_ERROR_CHARS]
            raise
        if math.isfinite(scored.logprob_total):
            self.valued += 1
        else:
            self.last_error = "the scorer returned no finite log-probability"
        return scored


@dataclass(frozen=True)
class TraceFailure:
    """Why a trace failed as a whole (``reason``, in words), whose calls failed — the scoring model's
    (``scorer``), the judge's (``judge``), or both — and the last error the judge's client raised (``error``: its
    type names the setting to fix; None when the judge did not fail or raised none)."""

    reason: str
    scorer: bool
    judge: bool
    error: LLMError | None = None
    unvalued: bool = False
    """The judge answered (some or all of its calls) but no answer carried the scalar: the model or its server is
    the setting to fix (one that returns top log-probabilities under ``expected``), not the connection."""


def _last_error(records: Sequence[CallRecord]) -> str:
    failed = [r.error for r in records if r.outcome in _FAILED and r.error]
    return failed[-1][:_ERROR_CHARS] if failed else "unknown"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def failed_trace(ledger: CallLedger, scoring: ScoringTally | None = None) -> TraceFailure | None:
    """The trace's failure by the rule above, or None when it measured something. ``ledger``: the trace's
    meter; ``scoring``: its scorer's tally (None for an estimator without one)."""
    sent = [r for r in ledger.calls() if r.outcome not in ("refused", "sending")]
    chat = [r for r in sent if r.kind == "chat"]
    judged = [r for r in chat if r.stage in MEASURING_STAGES]
    judge_failed = bool(judged) and all(r.outcome in _FAILED for r in judged)
    judge_unvalued = bool(judged) and not judge_failed and all(r.parsed is None for r in judged)
    scored = [r for r in sent if r.kind == "score"]
    scores_sent = scoring.sent if scoring is not None else len(scored)
    scores_valued = scoring.valued if scoring is not None else sum(r.parsed is not None for r in scored)
    scorer_failed = scores_sent > 0 and scores_valued == 0
    error = ledger.last_exception if isinstance(ledger.last_exception, LLMError) else None
    if ledger.made and not ledger.answered and scores_valued == 0:
        last = ledger.last_error or (scoring.last_error if scoring is not None else None) or "unknown"
        return TraceFailure(
            f"every model call failed ({ledger.made} calls); last error: {last[:_ERROR_CHARS]}",
            scorer=scores_sent > 0,
            judge=bool(chat),
            error=error if chat else None,
        )
    parts: list[str] = []
    if scorer_failed:
        last = (scoring.last_error if scoring is not None else None) or _last_error(scored)
        failed = scoring.failed if scoring is not None else sum(r.outcome in _FAILED for r in scored)
        parts.append(
            f"no scoring call gave a log-probability ({_plural(scores_sent, 'call')}: {failed} failed, "
            f"{scores_sent - failed} answered without one); last error: {last}"
        )
    if judge_failed:
        parts.append(
            f"every judge call of the measurements failed ({_plural(len(judged), 'call')}); "
            f"last error: {_last_error(judged)}"
        )
    if judge_unvalued:
        failed = sum(r.outcome in _FAILED for r in judged)
        parts.append(
            f"no judge call of the measurements gave a value ({_plural(len(judged), 'call')}: {failed} failed, "
            f"{len(judged) - failed} answered without one); {_unvalued_why(judged)}"
        )
    if not parts:
        return None
    return TraceFailure(
        "nothing was measured: " + "; and ".join(parts),
        scorer=scorer_failed,
        judge=judge_failed or judge_unvalued,
        error=error if judge_failed else None,
        unvalued=judge_unvalued,
    )


def _unvalued_why(judged: Sequence[CallRecord]) -> str:
    """Why the judge's answers carried no value, from the last one that answered: a digit read without its
    alternatives means the server sent no top log-probabilities (``expected``); anything else is not a digit."""
    answered = [r for r in judged if r.outcome not in _FAILED]
    reply = (answered[-1].reply or "").strip() if answered else ""
    if reply and not math.isnan(parse_digit(reply)):
        return f"the judge answered {reply!r} but its server returned no top log-probabilities"
    shown = reply if len(reply) <= 40 else reply[:39] + "…"
    return f"last answer: {shown!r}, not a single digit 1–9"
