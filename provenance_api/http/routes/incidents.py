"""``/v1/turns/{turn_id}/incident``: one action or sentence of a stored turn, its chain to the sources it could read
(envelopes, ages, custody, digests), its latest finished trace and the custody log's verdict, as JSON or Markdown."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi import Path as PathParam

from provenance_api.core.schemas import problem_responses
from provenance_api.core.schemas_incident import IncidentOut
from provenance_api.http.deps import FreeTierCaller, Svc
from provenance_api.operations import incident

router = APIRouter(prefix="/v1/turns", tags=["turns"], responses=problem_responses(401, 422))

TurnId = Annotated[
    str, PathParam(min_length=1, max_length=256, description="the turn's turn_id (may contain /)", examples=["t-act"])
]
Target = Annotated[
    str,
    Query(
        min_length=1,
        max_length=64,
        description="an action (a0, a1, … in the order the calls were made) or a sentence (r0, r1, …) of the turn",
        examples=["a1"],
    ),
]


@router.get(
    "/{turn_id:path}/incident",
    response_model=IncidentOut,
    responses={
        200: {
            "description": "JSON (`IncidentOut`), or with `format=markdown` a Markdown report as an attachment "
            "`incident-<turn>-<target>.md`: the chain, a table of sources with every envelope field, ages, custody "
            "and full sha256 digests, the latest finished trace, and the custody log's verification line.",
            "content": {"text/markdown": {"schema": {"type": "string"}}},
        },
        **problem_responses(404, 429),
    },
    summary="Incident export: one action or sentence → its chain → sources with envelopes, ages, custody, digests",
)
async def get_incident(
    svc: Svc,
    caller: FreeTierCaller,
    turn_id: TurnId,
    target: Target,
    format: Annotated[incident.IncidentFormat, Query(description="json (default) or markdown")] = "json",
) -> Response:
    """For an action: the sentences that report it; for a sentence: the actions it reports; both with the sources
    named as the cause (measured by the latest finished trace when there is one, else the free tier's finding).
    Every source the target could read, with its evidence envelope (null: not recorded), its age when the target
    was produced, its custody (`gateway` with the record's time and server, or `history`) and its digest; for an
    action its argument provenance, the steered-by-data screen and the freshness findings. The custody log's
    record of the turn (seq, hash) and whether the tenant's chain verifies now. Read from the store only: zero
    model calls, and the same store gives the same bytes. 404 for a turn the caller's tenant does not have; 422
    naming `target` for one the turn lacks."""
    exported = await incident.export_incident(svc, caller, turn_id, target, format)
    headers = {"Content-Disposition": f'attachment; filename="{exported.filename}"'} if format == "markdown" else {}
    return Response(exported.body, media_type=exported.media_type, headers=headers)
