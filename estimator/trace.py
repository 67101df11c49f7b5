"""One entry point for a trace, whatever its scalar, and the one function that plans its calls.

``judged`` — the forced-choice judge's digit; ``expected`` — the same judge's expected digit from its
top log-probabilities; ``logprob`` — log p(claim) from a scoring-capable model; ``both`` — the judged
trace, then the log-probability one reusing its span checks, with their agreement; ``proxy`` — a local
scoring model ranks the sources by log-probability and the judge confirms the ranking in a few calls,
running the full judged search only when it disagrees (``proxy.py``). The job runner, the
CLI and the quote endpoint call ``planned_calls`` and ``run_trace`` and nothing else: the choice and the
plan are worked out here once. Every call of the trace, scoring included, goes through one ledger (under
``proxy`` the local scoring passes, free, go through one of their own: ``calls.scored``, not ``made``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

from estimator.audit.agreement import agreement
from estimator.audit.invariants import violations
from estimator.corpus.units import Corpus
from estimator.cost import plan_calls
from estimator.ledger import CallLedger
from estimator.loo.judged import trace_claim
from estimator.loo.logprob import trace_logprob
from estimator.loo.logprob_cost import EstimatorChoice
from estimator.params import DEFAULT_PARAMS, Params
from estimator.proxy.driver import planned_proxy_calls, trace_proxy
from estimator.results.models import (
    AgreementModel,
    DeclaredAuditModel,
    DumpsAsModel,
    LogprobTraceResultModel,
    TraceJobResult,
    TraceResultModel,
    trace_job_result,
)
from estimator.results.trace import ProgressEvent
from estimator.seams.llm import LLM
from estimator.seams.scorer import Scorer
from estimator.target import SENTENCE, Wording
from estimator.tokens import ApproxTokenizer, Tokenizer

__all__ = ["ESTIMATORS", "EstimatorChoice", "TraceOutcome", "checked", "needs_scorer", "planned_calls", "run_trace"]

ESTIMATORS: tuple[str, ...] = get_args(EstimatorChoice)
LOG = logging.getLogger("estimator.invariants")


def needs_scorer(choice: EstimatorChoice) -> bool:
    return choice in ("logprob", "both", "proxy")


def planned_calls(choice: EstimatorChoice, corpus: Corpus, params: Params = DEFAULT_PARAMS) -> int:
    """The worst case of a trace with ``choice``: the ceiling its ledger enforces and the budget reserved.
    Rounds, redundancy resolution and span checks; under ``both`` the scoring rounds are added and the
    span checks are shared."""
    if choice == "proxy":  # hosted calls only: the local scoring passes are free and metered apart
        return planned_proxy_calls(corpus, params)
    plan = plan_calls(corpus, params)
    return plan.total + plan.ablation if choice == "both" else plan.total


@dataclass(frozen=True)
class TraceOutcome(DumpsAsModel):
    """What one trace produced: the result, and under ``both`` the log-probability result and agreement.
    ``result.calls`` counts every call of the trace (under ``both``, both estimators' calls)."""

    result: TraceResultModel
    logprob: LogprobTraceResultModel | None = None
    agreement: AgreementModel | None = None

    def to_model(self, declared: DeclaredAuditModel | None = None) -> TraceJobResult:
        """The job result, the variant of the trace's estimator: the trace (with its log-probability fields
        under ``logprob``, the proxy's under ``proxy``), under ``both`` the judged trace with the
        log-probability trace and the agreement, and the sentence's ``declared`` audit when given."""
        fields = {**dict(self.result), "declared": declared}
        if self.logprob is not None or self.agreement is not None:
            fields.update(estimator="both", logprob=self.logprob, agreement=self.agreement)
        return trace_job_result(fields)


def checked(outcome: TraceOutcome) -> TraceOutcome:
    """The run-time half of ``audit.invariants``: every result of a trace is checked against the rules that tie
    its words to its numbers before anyone stores or shows it. A violation is a bug of ours: it is logged
    (logger ``estimator.invariants``, level ERROR, with the rule and the values) and the result is returned as
    measured, so a bug in a word never loses the measurement it describes."""
    for result in (outcome.result, outcome.logprob):
        if result is None:
            continue
        for violation in violations(result):
            LOG.error("trace result breaks an invariant (%s estimator): %s", result.estimator, violation)
    return outcome


async def run_trace(
    choice: EstimatorChoice,
    claim: str,
    query: str,
    corpus: Corpus,
    *,
    llm: LLM,
    scorer: Scorer | None = None,
    params: Params = DEFAULT_PARAMS,
    tokenizer: Tokenizer | None = None,
    on_progress: Callable[[ProgressEvent], None] | None = None,
    ledger: CallLedger | None = None,
    wording: Wording = SENTENCE,
) -> TraceOutcome:
    """Run one trace and check its result (``checked``). ``ledger``: the caller's meter (its hook persists
    progress and settles a budget); a fresh one capped at ``planned_calls(choice, ...)`` when None.
    ``wording``: the questions asked of the target — a sentence (``claim``), or an action (``claim`` is the
    call's text; see ``actions.trace``)."""
    if needs_scorer(choice) and scorer is None:
        raise ValueError(f"estimator {choice!r} needs a scoring-capable model (a scorer)")
    tok = tokenizer or ApproxTokenizer()
    ledger = ledger or CallLedger(planned=planned_calls(choice, corpus, params), concurrency=params.concurrency)
    if choice in ("judged", "expected", "both"):
        judged = await trace_claim(
            llm,
            claim,
            query,
            corpus,
            params=params,
            tokenizer=tok,
            on_progress=on_progress,
            expected=choice == "expected",
            ledger=ledger,
            wording=wording,
        )
        if choice != "both":
            return checked(TraceOutcome(judged))
        assert scorer is not None
        supports = {s.source_id: s.support for s in judged.sources if s.support is not None}
        logprob = await trace_logprob(
            scorer,
            None,
            claim,
            query,
            corpus,
            params=params,
            tokenizer=tok,
            on_progress=on_progress,
            supports=supports,
            ledger=ledger,
            wording=wording,
        )
        both = TraceOutcome(judged.model_copy(update={"calls": ledger.account()}), logprob, agreement(judged, logprob))
        return checked(both)
    assert scorer is not None
    run = trace_proxy if choice == "proxy" else trace_logprob
    traced = await run(
        scorer,
        llm,
        claim,
        query,
        corpus,
        params=params,
        tokenizer=tok,
        on_progress=on_progress,
        ledger=ledger,
        wording=wording,
    )
    return checked(TraceOutcome(traced))
