"""The history sources the operator configured (``PROVENANCE_HISTORY_SOURCES``), as each tenant sees them.

A source belongs to the tenants its ``tenants`` list names (``["*"]``: every tenant; no list: the admin tenant
only, ``may_import``); to any other tenant it does not exist: importing it is the same 404 as for a name nobody
configured, and it is not listed. The admin key lists every source with its tenants, and imports, like any key,
only its own tenant's. Where a store lives is never shown to a caller: a misconfigured or unreadable store is a
502 naming the source and the setting, and the reader's own words (paths, hosts, database names) are logged for
the operator.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from provenance_api.core.errors import InvalidInput, NotFound
from provenance_api.core.settings import Settings
from provenance_api.operations.connectors.run import SourceImport, import_source
from provenance_api.operations.connectors.source import (
    Source,
    SourceUnavailable,
    may_import,
    parse_source,
    source_tenants,
)
from provenance_api.storage import crud_sources
from provenance_api.storage.session import Database

__all__ = ["SETTING", "ListedSource", "configured_source", "import_configured", "list_configured"]

log = logging.getLogger("provenance_api.operations.connectors.configured")

SETTING = "PROVENANCE_HISTORY_SOURCES"


def _not_configured(name: str) -> NotFound:
    """The same 404 for a name nobody configured and for a source another tenant owns."""
    return NotFound(
        f"no history source {name!r} is configured for this tenant",
        field="name",
        fix="use a name GET /v1/imports/sources lists; the operator adds sources, and names their tenants, "
        f"in {SETTING}",
    )


def configured_source(settings: Settings, name: str, tenant: str) -> Source:
    """The source the operator configured under ``name`` for ``tenant`` (404 when there is none, or it is not
    the tenant's, checked before anything else); its configuration is checked here (502 when it is wrong)."""
    entry: Any = settings.history_sources.get(name)
    if not isinstance(entry, dict) or not may_import(entry, tenant, settings.admin_tenant):
        raise _not_configured(name)
    where = f"{SETTING}.{name}"
    if not entry.get("url"):
        raise SourceUnavailable(
            f"{where} has no url",
            field=f"{where}.url",
            fix=f'the operator sets {SETTING} to {{"{name}": {{"url": …, "format": …, "tenants": […]}}}}',
        )
    try:
        return parse_source(
            str(entry["url"]), entry.get("format"), name, url_field=f"{where}.url", format_field=f"{where}.format"
        )
    except InvalidInput as exc:  # the operator's configuration is wrong, not the caller's request
        log.warning("history source %r is misconfigured: %s", name, exc.detail)
        raise SourceUnavailable(
            f"{exc.field}: the operator's configuration of history source {name!r} is not valid",
            field=exc.field,
            fix=f"the operator corrects {SETTING}: {exc.fix}",
        ) from None


async def import_configured(
    db: Database, settings: Settings, tenant: str, user: str, name: str, *, max_turn_bytes: int | None = None
) -> SourceImport:
    """Import what is new in the configured source ``name`` for ``tenant`` (``import_source``); a store that
    cannot be read is a 502 that names the source and the setting, and logs the cause."""
    source = configured_source(settings, name, tenant)
    try:
        return await import_source(db, tenant, user, source, max_turn_bytes=max_turn_bytes, redactor=settings.redactor)
    except (InvalidInput, SourceUnavailable) as exc:  # the operator's to fix; where the store lives is not shown
        log.warning("history source %r cannot be read: %s", name, exc.detail)
        raise SourceUnavailable(
            f"history source {name!r} ({source.format}) cannot be read; the service's log says why",
            field=f"{SETTING}.{name}",
            fix=f"the operator checks that the store {SETTING}.{name} names exists and can be read "
            "(the service's log names the cause)",
        ) from None


@dataclass(frozen=True)
class ListedSource:
    """A configured source as a caller sees it: never where it lives. ``tenants`` only for the admin key."""

    name: str
    format: str
    position: str | None
    last_import_at: datetime | None
    tenants: list[str] | None
    importable: bool


async def list_configured(db: Database, settings: Settings, tenant: str, *, admin: bool) -> list[ListedSource]:
    """The sources ``tenant`` may import, by name, with how far its last import read each; with ``admin`` (the
    admin key) every source, with its tenants and whether the admin tenant may import it."""
    out: list[ListedSource] = []
    for name, entry in sorted(settings.history_sources.items()):
        mine = may_import(entry, tenant, settings.admin_tenant)
        if not (mine or admin):
            continue
        try:
            source: Source | None = parse_source(str(entry.get("url") or ""), entry.get("format"), name)
        except InvalidInput:  # misconfigured: listed, and importing it says what to fix
            source = None
        cursor = await crud_sources.get_cursor(db, tenant, source.key) if source is not None and mine else None
        out.append(
            ListedSource(
                name=name,
                format=source.format if source is not None else str(entry.get("format") or ""),
                position=cursor.position if cursor is not None else None,
                last_import_at=cursor.updated_at if cursor is not None else None,
                tenants=sorted(source_tenants(entry, settings.admin_tenant)) if admin else None,
                importable=mine,
            )
        )
    return out
