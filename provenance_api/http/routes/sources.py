"""``POST /v1/imports/sources/{name}``: import what is new in a history store the operator configured.

Sources are configured by the operator only (``PROVENANCE_HISTORY_SOURCES``, name → ``{url, format}``); a
caller names one and never passes a URL, so no request can make the service open a file or connect to a
host of its choosing. Each tenant has its own cursor on each source.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from fastapi import Path as PathParam
from pydantic import BaseModel, Field

from provenance_api.core.errors import InvalidInput, NotFound
from provenance_api.core.schemas import Problem, problem_responses
from provenance_api.core.settings import Settings
from provenance_api.http.deps import Caller, Svc
from provenance_api.operations.connectors import Source, SourceUnavailable, import_source, parse_source

_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    502: {
        "model": Problem,
        "description": "The configured history source cannot be read.",
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
}
router = APIRouter(tags=["imports"], responses={**problem_responses(401, 404, 422), **_UNAVAILABLE})
SETTING = "PROVENANCE_HISTORY_SOURCES"


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
    errors: list[dict[str, str]]
    notes: list[dict[str, str]]
    source: SourceState


def configured_source(settings: Settings, name: str) -> Source:
    """The source the operator configured under ``name``; its configuration is checked here."""
    entry: Any = settings.history_sources.get(name)
    if entry is None:
        raise NotFound(
            f"no history source {name!r} is configured",
            field="name",
            fix=f"use a configured source name; the operator adds sources to {SETTING}",
        )
    where = f"{SETTING}.{name}"
    if not isinstance(entry, dict) or not entry.get("url"):
        raise SourceUnavailable(
            f"{where} has no url",
            field=f"{where}.url",
            fix=f'the operator sets {SETTING} to {{"{name}": {{"url": …, "format": …}}}}',
        )
    try:
        return parse_source(
            str(entry["url"]), entry.get("format"), name, url_field=f"{where}.url", format_field=f"{where}.format"
        )
    except InvalidInput as exc:  # the operator's configuration is wrong, not the caller's request
        raise SourceUnavailable(
            exc.detail, field=exc.field, fix=f"the operator corrects {SETTING}: {exc.fix}"
        ) from None


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
    how far it has been read. A store that cannot be read is a 502 and moves nothing."""
    source = configured_source(svc.settings, name)
    try:
        result = await import_source(
            svc.db, caller.tenant, caller.user, source, max_turn_bytes=svc.settings.max_body_bytes
        )
    except (InvalidInput, SourceUnavailable) as exc:  # the operator's to fix; where the store lives is not shown
        detail = exc.detail
        for place in (str(source.path), source.shown_url, source.url):
            detail = detail.replace(place, f"source {name!r}") if place and place != "None" else detail
        raise SourceUnavailable(detail, field=f"{SETTING}.{name}", fix=exc.fix) from None
    body = result.to_dict()
    body["source"].pop("url", None)  # where the store lives is the operator's business
    return SourceImportOut.model_validate(body)
