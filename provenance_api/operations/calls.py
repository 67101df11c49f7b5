"""A trace's model calls, for the caller's tenant: ``trace_calls``.

The trace must be the caller's (another tenant's, or a probe, is RecordMissing like a missing one, mapped to
404 in ``http.problems``); its calls are read from where the runner kept them when it ended.
"""

from __future__ import annotations

from provenance_api.core.schemas_calls import ModelCallOut, PromptMessageOut, TraceCallsOut
from provenance_api.operations.auth import Principal
from provenance_api.operations.services import Services
from provenance_api.storage import crud_calls, crud_traces
from provenance_api.storage.crud_calls import KeptCall

__all__ = ["trace_calls"]


def _out(call: KeptCall) -> ModelCallOut:
    return ModelCallOut.model_validate(
        {
            "index": call.index,
            "stage": call.stage,
            "mask": call.mask,
            "kind": call.kind,
            "outcome": call.outcome,
            "prompt": [PromptMessageOut(role=role, content=content) for role, content in call.prompt],
            "prompt_truncated": call.prompt_truncated,
            "reply": call.reply,
            "parsed": call.parsed,
            "started_at": call.started_at,
            "seconds": call.seconds,
            "input_tokens": call.input_tokens,
            "output_tokens": call.output_tokens,
            "cost_usd": call.cost_usd,
            "error": call.error,
            "attempts": call.attempts,
            "estimated": call.estimated,
        }
    )


async def trace_calls(svc: Services, caller: Principal, trace_id: str) -> TraceCallsOut:
    """The caller's trace ``trace_id``'s model calls in the order sent, with ``total`` and ``kept``."""
    await crud_traces.get_job(svc.db, caller.tenant, trace_id, "trace")  # RecordMissing: 404
    kept = await crud_calls.calls_of(svc.db, caller.tenant, trace_id)
    return TraceCallsOut(trace_id=trace_id, total=kept.total, kept=kept.kept, calls=[_out(c) for c in kept.calls])
