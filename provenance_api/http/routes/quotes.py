"""``/v1/quotes``: the cost gate, priced before anything is spent."""

from __future__ import annotations

from fastapi import APIRouter, status

from provenance_api.core.schemas import QuoteIn, QuoteOut, problem_responses
from provenance_api.http.deps import FreeTierCaller, Svc
from provenance_api.operations import tracing as operations

router = APIRouter(prefix="/v1/quotes", tags=["quotes"], responses=problem_responses(401, 404, 413, 422, 429))


@router.post("", response_model=QuoteOut, status_code=status.HTTP_201_CREATED, summary="Price a trace")
async def create_quote(svc: Svc, caller: FreeTierCaller, body: QuoteIn) -> QuoteOut:
    """Sources, planned calls (the worst case a trace may spend), input tokens, estimated cost and
    warnings — or a refusal with its reason. The quote id can start a trace until `expires_at`.
    The sentence must occur in the turn's response (after normalisation) or be a segment id, else 422; an
    action is quoted with `target: {"action": "a3"}` (priced on what the agent had seen when it made the call).
    A quote calls no model but costs CPU, so it counts against the free tier's request rate (429 above it)."""
    quote = await operations.make_quote(
        svc,
        caller,
        body.turn_id,
        body.selected(),
        model=body.model,
        probe=body.probe,
        overrides=body.overrides(),
        estimator=body.estimator,
    )
    return operations.quote_out(quote)
