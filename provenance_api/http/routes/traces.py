"""``/v1/traces``: start a trace as a job, read its status and result, stream its progress."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status
from fastapi.responses import StreamingResponse

from provenance_api.core.schemas import TraceIn, TraceOut, problem_responses
from provenance_api.http.deps import Caller, Svc
from provenance_api.operations import records
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


@router.get(
    "/{trace_id}", response_model=TraceOut, responses=problem_responses(404), summary="A trace's status"
)
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


async def _events(
    svc: Services, caller: Principal, trace_id: str, kind: JobKind = "trace"
) -> AsyncIterator[bytes]:
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
                "calls": {"planned": job.calls_planned, "made": job.calls_made, "billed": job.calls_billed},
            }
            yield _sse("end", json.dumps(end))
            return
        await svc.hub.wait(trace_id, svc.settings.sse_poll_seconds)


@router.get(
    "/{trace_id}/events",
    responses={
        200: {
            "description": "Server-sent events: `progress` (calls done of planned, round, partial layer "
            "scores) "
            "whenever it changes, then one `end` with the final status.",
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
