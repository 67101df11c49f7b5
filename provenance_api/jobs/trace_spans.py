"""A finished job's OpenTelemetry spans, handed to the OTLP exporter when an endpoint is configured.

The runner calls ``export_finished_job`` once a job has ended (its end written, its budget settled, its
event stream told): the job is read back as the API reports it (status, reason, verdict, Γ, estimator and
the call counts), its model calls come from the trace's ledger, and ``providers.otel_export`` queues the
spans. The exporter is imported here, on the first export, never at start-up, so a service with no endpoint
never loads OpenTelemetry's SDK. Nothing here can fail or hold up the job: any error is logged and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from estimator.ledger import CallRecord
from provenance_api.core.observability import log_fields
from provenance_api.core.settings import OtlpTarget
from provenance_api.storage import crud_traces
from provenance_api.storage.crud_traces import JobRecord
from provenance_api.storage.session import Database

if TYPE_CHECKING:
    from provenance_api.providers.otel_export import TraceSpan

__all__ = ["export_finished_job"]

log = logging.getLogger("provenance_api.jobs.trace_spans")


def _number(result: Mapping[str, Any], key: str) -> float | None:
    value = result.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(result: Mapping[str, Any], key: str) -> str | None:
    value = result.get(key)
    return value if isinstance(value, str) else None


async def export_finished_job(
    db: Database, target: OtlpTarget, job_id: str, calls: Sequence[CallRecord], billed_usd: float | None
) -> None:
    """Queue the spans of job ``job_id`` (ended) and of its ``calls`` for ``target``; never raises."""
    try:
        with anyio.CancelScope(shield=True):  # also after a cancellation (the service stopping)
            job = await crud_traces.get_job(db, None, job_id)
        from provenance_api.providers import otel_export  # only ever imported when an endpoint is configured

        otel_export.exporter_for(target).export(_trace_span(job, billed_usd), otel_export.call_spans(calls))
    except Exception as exc:
        log_fields(log, logging.WARNING, "the trace's spans were not exported", error=type(exc).__name__)


def _trace_span(job: JobRecord, billed_usd: float | None) -> TraceSpan:
    from provenance_api.providers.otel_export import TraceSpan

    result: Mapping[str, Any] = job.result or {}
    now = datetime.now(UTC)
    return TraceSpan(
        trace_id=job.id,
        kind=job.kind,
        tenant=job.tenant,
        turn_id=job.turn_id,
        claim=job.claim,
        model=job.model,
        status=job.status,
        reason=job.reason,
        verdict=_text(result, "verdict"),
        estimator=_text(result, "estimator"),
        gamma=_number(result, "gamma"),
        calls_planned=job.calls_planned,
        calls_made=job.calls_made,
        calls_cached=job.calls_cached,
        calls_billed=job.calls_billed,
        calls_failed=job.calls_failed,
        cost_usd=_number(result, "cost_usd") if result.get("cost_usd") is not None else billed_usd,
        started_at=job.started_at or job.created_at,
        finished_at=job.finished_at or now,
    )
