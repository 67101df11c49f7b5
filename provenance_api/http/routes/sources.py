"""``/v1/imports/sources``: the history stores the operator configured for the caller's tenant, and importing
what is new in one of them.

Sources are configured by the operator only (``PROVENANCE_HISTORY_SOURCES``, name → ``{url, format,
tenants}``); a caller names one and never passes a URL, so no request can make the service open a file or
connect to a host of its choosing. A source belongs to the tenants its ``tenants`` list names (``["*"]``: every
tenant; no list: the admin tenant only); to any other tenant it does not exist (404, as another tenant's turn,
and it is not listed). Each tenant has its own cursor on each source. Where a store lives is never shown: a
store that cannot be read is a 502 naming the source and the setting, and the reader's own words (paths, hosts,
database names) go to the service's log for the operator.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter
from fastapi import Path as PathParam
from pydantic import BaseModel, Field

from provenance_api.core.schemas import Problem, problem_responses
from provenance_api.http.deps import Caller, FreeTierCaller, Svc
from provenance_api.operations.connectors.configured import import_configured, list_configured

_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    502: {
        "model": Problem,
        "description": "The configured history source cannot be read.",
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
}
router = APIRouter(tags=["imports"], responses={**problem_responses(401, 404, 422), **_UNAVAILABLE})


class SourceState(BaseModel):
    name: str
    format: str
    first_import: bool = Field(description="No earlier import of this source into this tenant.")
    since: str | None = Field(description="The position the previous import reached (None on the first).")
    position: str | None = Field(description="The position this import read up to (the next one starts after).")
    conversations_changed: int = Field(description="Threads or sessions with anything new since `since`.")
    conversations_total: int = Field(description="Threads or sessions the source holds.")


class SourceImportOut(BaseModel):
    """The summary every import returns, and how far this source has been read."""

    batch_id: str
    imported: int
    unchanged: int
    conflicting: int
    rejected: int
    errors: list[dict[str, str]] = Field(description="What was rejected or conflicts, each with where and why.")
    warnings: list[dict[str, str]] = Field(
        description="Read, but not in full or not as written (an image named, not inlined); the turns are stored."
    )
    notes: list[dict[str, str]] = Field(description="Read, but no turn: e.g. a thread ending on a tool call.")
    source: SourceState


class ConfiguredSource(BaseModel):
    """A history source the caller's tenant may import (never where it lives)."""

    name: str
    format: str = Field(description="How the store is written: openai-agents-session, langgraph-sqlite, ….")
    position: str | None = Field(description="How far this tenant's last import read it (None: never imported).")
    last_import_at: datetime | None = Field(description="When this tenant's last import of it finished.")
    tenants: list[str] | None = Field(
        None, description="The tenants that may import it (shown to the admin key only; '*': every tenant)."
    )
    importable: bool = Field(True, description="Whether the caller's tenant may import it (false: admin view).")


class SourceList(BaseModel):
    sources: list[ConfiguredSource]


@router.get("/v1/imports/sources", response_model=SourceList, summary="The history sources of the caller's tenant")
async def list_sources(svc: Svc, caller: FreeTierCaller) -> SourceList:
    """Each configured history source the caller's tenant may import, by name and format, with how far this
    tenant has read it. Sources of other tenants are not listed. The admin key lists every source with its
    `tenants` (and `importable`: whether the admin tenant itself may import it)."""
    listed = await list_configured(svc.db, svc.settings, caller.tenant, admin=caller.admin)
    return SourceList(sources=[ConfiguredSource.model_validate(item, from_attributes=True) for item in listed])


@router.post(
    "/v1/imports/sources/{name}",
    response_model=SourceImportOut,
    summary="Import what is new in a configured history source",
)
async def import_from_source(
    svc: Svc,
    caller: Caller,
    name: Annotated[
        str,
        PathParam(
            min_length=1,
            max_length=120,
            pattern=r"^[A-Za-z0-9._-]+$",
            description="the source's name in the service's configuration",
        ),
    ],
) -> SourceImportOut:
    """Reads the store in place: on the first call every thread or session, afterwards only those with
    anything new since the last call for this tenant. Same summary as `POST /v1/imports`, plus `source`:
    how far it has been read. A store that cannot be read is a 502 and moves nothing; a source that is not the
    caller tenant's is a 404, as one that does not exist."""
    result = await import_configured(
        svc.db, svc.settings, caller.tenant, caller.user, name, max_turn_bytes=svc.settings.max_body_bytes
    )
    body = result.to_dict()
    body["source"].pop("url", None)  # where the store lives is the operator's business
    return SourceImportOut.model_validate(body)
