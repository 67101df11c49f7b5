"""``/v1/traces/{trace_id}/calls``: each model call of a trace, as sent and as answered."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from provenance_api.core.schemas import problem_responses
from provenance_api.core.schemas_calls import TraceCallsOut
from provenance_api.http.deps import Caller, Svc
from provenance_api.operations.calls import trace_calls

router = APIRouter(prefix="/v1/traces", tags=["traces"], responses=problem_responses(401, 422))

TraceId = Annotated[str, Path(min_length=1, max_length=40, description="the trace job id (tr_…)")]


@router.get(
    "/{trace_id}/calls", response_model=TraceCallsOut, responses=problem_responses(404), summary="A trace's model calls"
)
async def get_trace_calls(svc: Svc, caller: Caller, trace_id: TraceId) -> TraceCallsOut:
    """Each model call of the trace in the order sent: its stage, its mask in words, the prompt as sent
    (capped, `prompt_truncated`), the reply, the value the estimator read from it (`parsed`), when it started
    and how long it took, tokens, cost and outcome (`cached`: answered from the judgement cache, $0). Calls
    are kept when the trace ends — a failed trace keeps its failed calls with their errors — and deleted with
    its turn; `kept` < `total` when the per-trace cap dropped some."""
    return await trace_calls(svc, caller, trace_id)
