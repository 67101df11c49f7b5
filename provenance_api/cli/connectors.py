"""``provenance import URL --format …``: one history source, read in place, into the admin tenant (or --tenant).

The API's limit per turn applies (``PROVENANCE_MAX_BODY_BYTES``), as for a configured source; progress and the
summary are written as for files (``service.write_import_summary``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from provenance_api.cli.settings import load_settings, with_db
from provenance_api.core.errors import InvalidInput
from provenance_api.operations.connectors.run import SourceImport, import_source
from provenance_api.operations.connectors.source import parse_source
from provenance_api.operations.imports import ImportCounts


def cmd_import_source(args: argparse.Namespace) -> int:
    """Exit code 1 when a conversation or turn was rejected or conflicting, else 0 (warnings and notes too)."""
    if len(args.paths) != 1:
        raise InvalidInput(
            "a history source URL is imported alone",
            field="PATH",
            fix="run provenance import once per source URL (files and directories separately)",
        )
    source = parse_source(args.paths[0], args.format, url_field="PATH", format_field="--format")
    settings = load_settings()
    tenant = args.tenant or settings.admin_tenant

    from provenance_api.cli.service import write_import_summary
    from provenance_api.cli.style import Progress

    shown = Progress.for_stream(sys.stderr, args.no_color)

    def progress(counts: ImportCounts, total: int) -> None:
        shown.count("importing", counts.line(), counts.conversations / total if total else None)

    async def work(db: Any) -> SourceImport:
        return await import_source(
            db,
            tenant,
            settings.admin_user,
            source,
            max_turn_bytes=settings.max_body_bytes,
            progress=progress,
            redactor=settings.redactor,
        )

    try:
        result: SourceImport = asyncio.run(with_db(settings, work))
    finally:
        shown.done()
    write_import_summary(args.json, f"tenant {tenant!r}: {result.line()}", result.counts, result.to_dict())
    return 1 if result.counts.failed else 0
