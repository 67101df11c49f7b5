"""``/v1/probes``: would the agent still say this without that source? (Algorithm 6, as a job.)"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status
from fastapi.responses import StreamingResponse

from provenance_api.core.schemas import ProbeIn, ProbeOut, problem_responses
from provenance_api.http.deps import Caller, Svc
from provenance_api.http.routes.traces import _events
from provenance_api.operations import records
from provenance_api.operations import tracing as operations

router = APIRouter(prefix="/v1/probes", tags=["probes"], responses=problem_responses(401, 422))

ProbeId = Annotated[str, Path(min_length=1, max_length=40, description="the probe job id (pr_…)")]


@router.post(
    "",
    response_model=ProbeOut,
    status_code=status.HTTP_202_ACCEPTED,
    responses=problem_responses(404, 409, 410, 413, 429),
    summary="Start a probe",
)
async def start_probe(svc: Svc, caller: Caller, body: ProbeIn, response: Response) -> ProbeOut:
    """`{quote_id, source_id}` (a quote made with `probe: true`) or `{turn_id, sentence, source_id,
    max_cost_usd, k?}`. k regenerations with every source and k without `source_id` (2k sampled
    calls, never cached, each capped at `causal_max_output` tokens), reserved from the caller's
    budget like a trace. Poll `Location` (with `?wait=true`), or stream its `/events`."""
    job = await operations.start_probe(svc, caller, body)
    state = await svc.limiter.state(caller.budget_key)
    response.headers["Location"] = f"/v1/probes/{job.id}"
    response.headers["X-RateLimit-Limit"] = str(state.limit)
    response.headers["X-RateLimit-Remaining"] = str(state.remaining)
    return operations.probe_out(job)


@router.get("/{probe_id}", response_model=ProbeOut, responses=problem_responses(404), summary="A probe's status")
async def get_probe(
    svc: Svc,
    caller: Caller,
    probe_id: ProbeId,
    wait: Annotated[bool, Query(description="hold the request until the probe ends")] = False,
    timeout: Annotated[float | None, Query(gt=0, le=600, description="longest wait (s)")] = None,
) -> ProbeOut:
    """Status, calls, and — only when `succeeded` — the verdict with its note, B/k and W/k."""
    job = await records.get_job(svc, caller, probe_id, "probe")
    if wait:
        limit = min(timeout or svc.settings.wait_max_seconds, svc.settings.wait_max_seconds)
        deadline = time.monotonic() + limit
        while not job.terminal and (left := deadline - time.monotonic()) > 0:
            await svc.hub.wait(probe_id, min(left, svc.settings.sse_poll_seconds))
            job = await records.get_job(svc, caller, probe_id, "probe")
    return operations.probe_out(job)


@router.get(
    "/{probe_id}/events",
    responses={
        200: {
            "description": "Server-sent events: `progress` whenever its `calls` change (made of planned, …), "
            "then one `end`.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **problem_responses(404),
    },
    response_class=StreamingResponse,
    summary="Stream a probe's progress",
)
async def probe_events(svc: Svc, caller: Caller, probe_id: ProbeId) -> StreamingResponse:
    await records.get_job(svc, caller, probe_id, "probe")  # 404 before the stream starts
    return StreamingResponse(
        _events(svc, caller, probe_id, "probe"),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
