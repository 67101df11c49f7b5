"""A stored, succeeded trace around a result, as ``GET /v1/traces/{id}`` returns it: for checking what the
exports (the Markdown citation) make of a result without running the service."""

from __future__ import annotations

from datetime import datetime

from estimator.results.models import TraceResultModel
from provenance_api.core.schemas import TraceOut


def succeeded_trace(result: TraceResultModel, *, turn_id: str, claim: str, at: datetime) -> TraceOut:
    """``result`` as the stored trace ``tr_000…`` of sentence r0 of ``turn_id``, finished at ``at``."""
    return TraceOut.model_validate(
        {
            "trace_id": "tr_" + "0" * 20,
            "status": "succeeded",
            "turn_id": turn_id,
            "quote_id": "q_1",
            "claim": claim,
            "segment_id": "r0",
            "model": "m",
            "calls": {"planned": 40, "made": 20, "cached": 0, "billed": 20, "failed": 0},
            "round": None,
            "message": None,
            "layer_scores": {},
            "reason": None,
            "created_at": at,
            "started_at": at,
            "finished_at": at,
            "result": result.to_dict(),
        }
    )
