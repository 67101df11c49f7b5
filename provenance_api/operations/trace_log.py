"""The command line's trace log: a trace ``provenance trace`` runs is stored where the service stores its own.

The turn is stored (unless the tenant already has it), the cost gate's quote and the job are created
with ``source='cli'`` and marked running before the first call, and the job ends ``succeeded`` with its
result (the same typed result the service stores) or ``failed`` with its reason and the calls it made.
So the viewer's trace list, ``GET /v1/traces/{id}`` and ``provenance traces`` all show it, with the same
numbers. A turn id the tenant already holds with other content is a ``RecordConflict``: the caller runs
the trace unlogged.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Literal, get_args

from estimator.corpus.turn import StoredTurn
from estimator.cost import CostQuote
from estimator.ledger import CallLedger
from estimator.loo.logprob_cost import EstimatorChoice
from estimator.params import Params
from estimator.results.models import TraceJobResult, Verdict
from provenance_api.core.schemas import TraceSummary
from provenance_api.operations.tracing import job_calls
from provenance_api.storage import crud_calls, crud_traces, crud_turns
from provenance_api.storage.crud_traces import JobRecord, Progress, ResultAudit
from provenance_api.storage.crud_turns import TurnRecord
from provenance_api.storage.quotes import StoredQuote, quote_times
from provenance_api.storage.session import Database

log = logging.getLogger(__name__)

__all__ = [
    "CliTrace",
    "LoggedTrace",
    "ShownTrace",
    "finish_cli_trace",
    "logged_trace",
    "logged_traces",
    "start_cli_trace",
    "summary",
]

_VERDICTS: frozenset[str] = frozenset(get_args(Verdict))
_ESTIMATORS: frozenset[str] = frozenset(get_args(EstimatorChoice))


@dataclass(frozen=True)
class CliTrace:
    """What the command line is about to trace, as its cost gate priced it."""

    turn: StoredTurn
    sentence: str
    claim: str
    segment_id: str | None
    model: str
    params: Params
    quote: CostQuote
    estimator: EstimatorChoice
    planned: int
    cost_usd: float | None


@dataclass(frozen=True)
class LoggedTrace:
    """A started CLI trace: its job and the stored turn it belongs to."""

    job: JobRecord
    turn: TurnRecord


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def start_cli_trace(db: Database, tenant: str, user: str, trace: CliTrace, quote_ttl: int) -> LoggedTrace:
    """Store the turn (if new), the quote and the job (``source='cli'``), running. RecordConflict when the
    tenant holds another turn under this id."""
    turn, _ = await crud_turns.put_turn(db, tenant, user, trace.turn)
    created_at, expires_at = quote_times(quote_ttl)
    stored = StoredQuote(
        tenant=tenant,
        user=user,
        turn_id=trace.turn.turn_id,
        sentence=trace.sentence,
        claim=trace.claim,
        segment_id=trace.segment_id,
        model=trace.model,
        probe=False,
        params=trace.params.model_dump(),
        estimator=trace.estimator,
        planned_calls=trace.planned,
        cost_usd=trace.cost_usd,
        refused=None,
        priced=trace.quote,
        created_at=created_at,
        expires_at=expires_at,
    )
    quote = await crud_traces.create_quote(db, stored, quote_ttl)
    job = await crud_traces.create_job(db, quote, max_cost_usd=None, source="cli")
    await crud_traces.mark_running(db, job.id)
    return LoggedTrace(job, turn)


def _counts(ledger: CallLedger) -> Progress:
    return Progress(
        calls_made=ledger.made,
        calls_billed=ledger.billed,
        calls_cached=ledger.cached,
        calls_failed=ledger.failed,
        round="done",
    )


async def finish_cli_trace(
    db: Database,
    logged: LoggedTrace,
    ledger: CallLedger,
    *,
    result: TraceJobResult | None,
    reason: str | None,
    query: str,
    corpus_digest: str,
    interrupted: bool = False,
) -> JobRecord:
    """End the job: ``succeeded`` with ``result`` and its audit record, or ``failed`` (``interrupted``) with
    ``reason``; the calls as the ledger counted them either way."""
    job = logged.job
    counts = _counts(ledger)
    try:  # the model calls, as the service keeps them (GET /v1/traces/{id}/calls, the viewer's panel)
        await crud_calls.keep_calls(db, job, ledger.calls())
    except Exception as exc:  # keeping them never fails the trace
        log.warning("the CLI trace's model calls were not kept: %s", type(exc).__name__)
    if result is None:
        status: Literal["failed", "interrupted"] = "interrupted" if interrupted else "failed"
        await crud_traces.finish_unsuccessful(db, job.id, status, (reason or status)[:400], counts)
    else:
        usage = ledger.usage
        await crud_traces.finish_succeeded(
            db,
            job,
            ResultAudit(
                turn_digest=logged.turn.digest,
                claim_digest=_digest(job.claim),
                query_digest=_digest(query),
                corpus_digest=corpus_digest,
                prompt_versions=dict(result.prompt_versions),
                params=dict(result.params),
                model=result.model or job.model,
                result=result.model_dump(mode="json"),
                calls_planned=job.calls_planned,
                calls_made=ledger.made,
                calls_billed=ledger.billed,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cost_usd=result.cost_usd,
            ),
            counts,
        )
    return await crud_traces.get_job(db, job.tenant, job.id, "trace")


def summary(job: JobRecord) -> TraceSummary:
    """A logged trace as the trace list (``GET /v1/traces``) shows it: verdict and cost from its result."""
    result = job.result or {}
    verdict = result.get("verdict") if job.status == "succeeded" else None
    estimator = result.get("estimator")
    return TraceSummary.model_validate(
        {
            "trace_id": job.id,
            "turn_id": job.turn_id,
            "claim": job.claim,
            "status": job.status,
            "verdict": verdict if verdict in _VERDICTS else None,
            "estimator": estimator if estimator in _ESTIMATORS else None,
            "model": job.model,
            "calls": job_calls(job),
            "cost_usd": result.get("cost_usd"),
            "created_at": job.created_at,
            "finished_at": job.finished_at,
            "source": job.source,
        }
    )


async def logged_traces(db: Database, tenant: str, *, limit: int, everything: bool = False) -> list[JobRecord]:
    """The tenant's CLI traces (with ``everything``, the service's too), newest first, with their results."""
    return await crud_traces.recent_jobs(db, tenant, source=None if everything else "cli", limit=limit)


@dataclass(frozen=True)
class ShownTrace:
    """One trace with the turn it traced (to render its sources)."""

    job: JobRecord
    turn: StoredTurn


async def logged_trace(db: Database, tenant: str, trace_id: str) -> ShownTrace:
    """One of the tenant's traces by id, with its result and turn (RecordMissing when the tenant has none)."""
    job = await crud_traces.get_job(db, tenant, trace_id, "trace")
    return ShownTrace(job, (await crud_turns.get_turn(db, tenant, job.turn_id)).turn)
