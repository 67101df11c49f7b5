"""``/v1/turns``: store a turn (idempotent), list and read stored turns, and the free tier."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Body, Query, Response, status
from fastapi import Path as PathParam

from estimator.corpus.turn import StoredTurn
from provenance_api.core.schemas import (
    SegmentsIn,
    SegmentsOut,
    SourcesOut,
    TurnList,
    TurnOut,
    TurnSort,
    TurnStored,
    VerifyIn,
    VerifyOut,
    problem_responses,
)
from provenance_api.core.schemas_actions import ActionsOut
from provenance_api.http.deps import Caller, FreeTierCaller, Svc
from provenance_api.operations import actions, listing, records, verify
from provenance_api.operations import tracing as operations

router = APIRouter(prefix="/v1/turns", tags=["turns"], responses=problem_responses(401, 422))

TurnId = Annotated[
    str,
    PathParam(
        min_length=1,
        max_length=256,
        description="the turn's turn_id (may contain /)",
        examples=["turn-support-fallback-0042"],
    ),
]


def _example_turn() -> dict[str, Any]:
    fixture = Path(__file__).resolve().parents[3] / "fixtures" / "fallback_path_turn.json"
    try:
        data: dict[str, Any] = json.loads(fixture.read_text(encoding="utf-8"))
        return data
    except (OSError, ValueError):
        return {
            "turn_id": "turn-0001",
            "model": "openai/gpt-4o-mini",
            "response": "Order A-10482 was delivered on 2025-03-03.",
            "query": "Where is my order?",
        }


@router.post(
    "",
    response_model=TurnStored,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": TurnStored, "description": "The same content was already stored."},
        **problem_responses(409, 413),
    },
    summary="Store a turn (idempotent on turn_id)",
)
async def store_turn(
    svc: Svc,
    caller: Caller,
    response: Response,
    turn: Annotated[
        StoredTurn,
        Body(openapi_examples={"support turn": {"summary": "a customer-support turn", "value": _example_turn()}}),
    ],
) -> TurnStored:
    """Same `turn_id` and same content → 200; same `turn_id`, different content → 409 naming the fields
    that differ. A stored turn is never overwritten."""
    record, created = await records.store_turn(svc, caller, turn)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    if created:
        response.headers["Location"] = "/v1/turns/" + quote(turn.turn_id, safe="")
    return TurnStored(turn_id=record.turn_id, digest=record.digest, stored_at=record.stored_at, created=created)


@router.get("", response_model=TurnList, responses=problem_responses(429), summary="List stored turns")
async def list_turns(
    svc: Svc,
    caller: FreeTierCaller,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[
        str | None,
        Query(
            max_length=4096,
            description="next_cursor of the previous page (opaque); valid only with the same q, filters and sort",
        ),
    ] = None,
    q: Annotated[
        str,
        Query(
            max_length=200,
            description="keep turns whose id, agent, model, query or response contain "
            "this text (case and spacing ignored); answered from the search index",
        ),
    ] = "",
    model: Annotated[str | None, Query(max_length=256, description="keep turns of exactly this model")] = None,
    agent: Annotated[str | None, Query(max_length=256, description="keep turns of exactly this agent")] = None,
    since: Annotated[
        datetime | None,
        Query(
            description="keep turns dated at or after this time (ISO 8601; "
            "without a zone, UTC). A turn's date is its created_at, else when "
            "it was stored"
        ),
    ] = None,
    until: Annotated[datetime | None, Query(description="keep turns dated before this time (exclusive)")] = None,
    min_traceable: Annotated[
        int | None,
        Query(ge=0, le=100_000, description="keep turns with at least this many sentences the free tier can trace"),
    ] = None,
    sort: Annotated[
        TurnSort,
        Query(
            description="field to sort on, descending with a leading '-'; turns without "
            "the value (no created_at, no model) come last either way"
        ),
    ] = "-stored_at",
) -> TurnList:
    """The tenant's turns matching `q` and every filter given, newest first unless `sort` says otherwise, with
    `total` (the matches on all pages) and per turn its `traceable` sentences and its `traces`."""
    query = listing.TurnQuery(
        q=q, model=model, agent=agent, since=since, until=until, min_traceable=min_traceable, sort=sort
    )
    return await listing.turn_list(svc, caller, query, limit, cursor)


@router.get(
    "/{turn_id:path}/sources",
    response_model=SourcesOut,
    responses=problem_responses(404, 429),
    summary="The turn's corpus by layer",
)
async def get_sources(svc: Svc, caller: FreeTierCaller, turn_id: TurnId) -> SourcesOut:
    """Ids, kinds, labels, token sizes, truncation, digests, the unversioned flag and unscorable
    attachments. Zero model calls."""
    return await operations.turn_sources(svc, caller, turn_id)


@router.get(
    "/{turn_id:path}/segments",
    response_model=SegmentsOut,
    responses=problem_responses(404, 429),
    summary="The free tier: every sentence with its status",
)
async def get_segments(svc: Svc, caller: FreeTierCaller, turn_id: TurnId) -> SegmentsOut:
    """Every sentence of the response with status, class, anchors, quotes with line spans, and the
    summary line. Zero model calls."""
    return await operations.turn_segments(svc, caller, turn_id)


@router.get(
    "/{turn_id:path}/actions",
    response_model=ActionsOut,
    responses=problem_responses(404, 429),
    summary="The free tier of the turn's actions: argument provenance, origin, steered by tool data",
)
async def get_actions(svc: Svc, caller: FreeTierCaller, turn_id: TurnId) -> ActionsOut:
    """Every tool call the agent made in this turn (a0, a1, … in order), each argument value with the first
    source holding it among those the agent could read when it made the call (line span, verbatim quote) or
    none, the action's origin (user, instructions, data, invented), whether a tool return that addresses the
    agent steered it (suspect_injection, with the instruction quoted), and the sentences that report it.
    Zero model calls."""
    return await actions.turn_actions(svc, caller, turn_id)


@router.post(
    "/{turn_id:path}/segments",
    response_model=SegmentsOut,
    responses=problem_responses(404, 413, 429),
    summary="The free tier on the client's own segments",
)
async def post_segments(svc: Svc, caller: FreeTierCaller, turn_id: TurnId, body: SegmentsIn) -> SegmentsOut:
    """Segments as the client's renderer drew them, used as given (never re-split). Zero model calls."""
    client = [(s.id, s.text) for s in body.segments]
    return await operations.turn_segments(svc, caller, turn_id, client, body.params)


@router.post(
    "/{turn_id:path}/verify",
    response_model=VerifyOut,
    responses=problem_responses(404, 413, 429),
    summary="The answer gate: allow, review or block the whole answer",
)
async def verify_turn(
    svc: Svc,
    caller: FreeTierCaller,
    turn_id: TurnId,
    body: VerifyIn,
    timeout: Annotated[float, Query(gt=0, le=600, description="longest wait for the traces (s)")] = 300.0,
) -> VerifyOut:
    """Traces every traceable sentence (quoted sentences pass for free) within one pre-quoted budget:
    the sum of the quotes must fit `max_cost_usd` (else 422 naming it, with `decision: block`) and
    their calls the caller's budget (else 429), before anything is spent. Holds the request until
    every trace ends; each stays readable at `/v1/traces/{id}`. Returns each sentence's outcome and the
    decision `allow | review | block` with the rule that fired. Fail closed: a failed, interrupted or
    unfinished trace blocks."""
    return await verify.verify_turn(svc, caller, turn_id, body, timeout)


@router.delete(
    "/{turn_id:path}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=problem_responses(404, 409),
    summary="Delete a stored turn with its quotes, traces and their results",
)
async def delete_turn(svc: Svc, caller: Caller, turn_id: TurnId) -> Response:
    """Removes the turn, its quotes, its traces and probes with their stored results, and its search-index
    entry (a turn that can no longer be read is deleted too). 404 for a turn the caller's tenant does not
    have; 409 naming the trace or probe while one of the turn's is queued or running (it is not cancelled:
    wait for it, then delete). A trace or probe started at the same time is serialised with the delete: it
    started first (this is a 409 naming it) or it is refused (404, no such turn) — never started on a deleted
    turn. The turn's cached judgements are purged with it."""
    await records.delete_turn(svc, caller, turn_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{turn_id:path}", response_model=TurnOut, responses=problem_responses(404), summary="Read a stored turn")
async def get_turn(svc: Svc, caller: Caller, turn_id: TurnId) -> TurnOut:
    record = await records.get_turn(svc, caller, turn_id)
    return TurnOut(turn_id=record.turn_id, digest=record.digest, stored_at=record.stored_at, turn=record.turn)
