"""``/v1/traces``: start a trace as a job, read its status and result, stream its progress."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status
from fastapi.responses import StreamingResponse

from estimator.loo.logprob_cost import EstimatorChoice
from estimator.results.models import Verdict
from provenance_api.core.schemas import JobStatus, TraceIn, TraceList, TraceOut, TraceSort, problem_responses
from provenance_api.http.deps import Caller, Svc
from provenance_api.operations import export, listing, records
from provenance_api.operations import tracing as operations
from provenance_api.operations.auth import Principal
from provenance_api.operations.records import JobKind
from provenance_api.operations.services import Services

router = APIRouter(prefix="/v1/traces", tags=["traces"], responses=problem_responses(401, 422))

TraceId = Annotated[str, Path(min_length=1, max_length=40, description="the trace job id (tr_…)")]
KEEPALIVE_SECONDS = 15.0


@router.post(
    "",
    response_model=TraceOut,
    status_code=status.HTTP_202_ACCEPTED,
    responses=problem_responses(404, 409, 410, 413, 429),
    summary="Start a trace",
)
async def start_trace(svc: Svc, caller: Caller, body: TraceIn, response: Response) -> TraceOut:
    """`{quote_id}` or `{turn_id, sentence, max_cost_usd}`. The quoted calls are reserved from the
    caller's model-call budget before the job starts (429 with Retry-After when they do not fit);
    the unused part is released when it ends. Poll `Location`, or stream its `/events`."""
    job = await operations.start_trace(svc, caller, body)
    state = await svc.limiter.state(caller.budget_key)
    response.headers["Location"] = f"/v1/traces/{job.id}"
    response.headers["X-RateLimit-Limit"] = str(state.limit)
    response.headers["X-RateLimit-Remaining"] = str(state.remaining)
    return operations.trace_out(job)


@router.get("", response_model=TraceList, summary="List traces across turns")
async def list_traces(
    svc: Svc,
    caller: Caller,
    turn_id: Annotated[str | None, Query(max_length=256, description="keep the traces of this turn")] = None,
    verdict: Annotated[Verdict | None, Query(description="keep succeeded traces with this verdict")] = None,
    model: Annotated[str | None, Query(max_length=256, description="keep traces judged by exactly this model")] = None,
    status: Annotated[JobStatus | None, Query(description="keep traces in this status")] = None,
    estimator: Annotated[EstimatorChoice | None, Query(description="keep traces started with this estimator")] = None,
    sort: Annotated[
        TraceSort,
        Query(
            description="created_at or cost, descending with a leading '-'; traces without a cost come last either way"
        ),
    ] = "-created_at",
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[
        str | None,
        Query(
            max_length=1400,
            description="next_cursor of the previous page (opaque); valid only with the same filters and sort",
        ),
    ] = None,
) -> TraceList:
    """The tenant's traces (probes are not listed), newest first unless `sort` says otherwise, with `total`
    (the matches on all pages), each with its verdict (when succeeded), estimator, judge model, calls, cost,
    times and `source` (`api`, or `cli` for a trace `provenance trace` ran)."""
    query = listing.TraceQuery(
        turn_id=turn_id, verdict=verdict, model=model, status=status, estimator=estimator, sort=sort
    )
    return await listing.trace_list(svc, caller, query, limit, cursor)


@router.get(
    "/{trace_id}/export",
    response_class=Response,
    responses={
        200: {
            "description": "The trace as a file (Content-Disposition: attachment): `json`, exactly the body of "
            "GET /v1/traces/{id}; `markdown`, a citation block (claim, verdict in words, sources with verified "
            "quotes and line ranges, model, estimator, calls, cost, prompt versions, trace id and date).",
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/TraceOut"}},
                "text/markdown": {"schema": {"type": "string"}},
            },
        },
        **problem_responses(404),
    },
    summary="Export a trace as JSON or as a Markdown citation block",
)
async def export_trace(
    svc: Svc,
    caller: Caller,
    trace_id: TraceId,
    format: Annotated[export.ExportFormat, Query(description="json or markdown")] = "json",
) -> Response:
    """A trace that is not `succeeded` exports its status and reason, never a verdict."""
    exported = await export.export_trace(svc, caller, trace_id, format)
    return Response(
        exported.body,
        media_type=exported.media_type,
        headers={"Content-Disposition": f'attachment; filename="{exported.filename}"'},
    )


@router.get("/{trace_id}", response_model=TraceOut, responses=problem_responses(404), summary="A trace's status")
async def get_trace(
    svc: Svc,
    caller: Caller,
    trace_id: TraceId,
    wait: Annotated[bool, Query(description="hold the request until the trace ends")] = False,
    timeout: Annotated[float | None, Query(gt=0, le=600, description="longest wait (s)")] = None,
) -> TraceOut:
    """Status, calls made and billed, and — only when `succeeded` — the result. A `failed` or
    `interrupted` trace carries its reason and billed calls, never a result."""
    job = await records.get_job(svc, caller, trace_id, "trace")
    if wait:
        limit = min(timeout or svc.settings.wait_max_seconds, svc.settings.wait_max_seconds)
        deadline = time.monotonic() + limit
        while not job.terminal and (left := deadline - time.monotonic()) > 0:
            await svc.hub.wait(trace_id, min(left, svc.settings.sse_poll_seconds))
            job = await records.get_job(svc, caller, trace_id, "trace")
    return operations.trace_out(job)


def _sse(event: str, data: str) -> bytes:
    return f"event: {event}\ndata: {data}\n\n".encode()


async def _events(svc: Services, caller: Principal, trace_id: str, kind: JobKind = "trace") -> AsyncIterator[bytes]:
    """A job's progress events (a trace's or a probe's), then one ``end``."""
    last = ""
    quiet_since = time.monotonic()
    while True:
        job = await records.get_job(svc, caller, trace_id, kind)
        data = operations.progress_out(job, svc).model_dump_json()
        if data != last:
            yield _sse("progress", data)
            last, quiet_since = data, time.monotonic()
        elif time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
            yield b": keep-alive\n\n"
            quiet_since = time.monotonic()
        if job.terminal:
            end = {
                f"{kind}_id": job.id,
                "status": job.status,
                "reason": job.reason,
                "calls": operations.job_calls(job).model_dump(),
            }
            yield _sse("end", json.dumps(end))
            return
        await svc.hub.wait(trace_id, svc.settings.sse_poll_seconds)


@router.get(
    "/{trace_id}/events",
    responses={
        200: {
            "description": "Server-sent events: `progress` (`calls`: made of planned, cached, billed, failed; round; "
            "partial layer scores) whenever it changes, then one `end` with the final status and `calls`.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **problem_responses(404),
    },
    response_class=StreamingResponse,
    summary="Stream a trace's progress",
)
async def trace_events(svc: Svc, caller: Caller, trace_id: TraceId) -> StreamingResponse:
    await records.get_job(svc, caller, trace_id, "trace")  # 404 before the stream starts
    return StreamingResponse(
        _events(svc, caller, trace_id),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
