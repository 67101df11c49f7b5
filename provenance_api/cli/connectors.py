"""``provenance import URL --format …``: one history source, read in place, into the admin tenant (or --tenant)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from provenance_api.cli.settings import load_settings, with_db
from provenance_api.core.errors import InvalidInput
from provenance_api.operations.connectors.run import SourceImport, import_source
from provenance_api.operations.connectors.source import parse_source


def cmd_import_source(args: argparse.Namespace) -> int:
    """Exit code 1 when a conversation or turn was rejected or conflicting, else 0."""
    if len(args.paths) != 1:
        raise InvalidInput(
            "a history source URL is imported alone",
            field="PATH",
            fix="run provenance import once per source URL (files and directories separately)",
        )
    source = parse_source(args.paths[0], args.format, url_field="PATH", format_field="--format")
    settings = load_settings()
    tenant = args.tenant or settings.admin_tenant

    async def work(db: Any) -> SourceImport:
        return await import_source(db, tenant, settings.admin_user, source)

    result: SourceImport = asyncio.run(with_db(settings, work))
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(f"tenant {tenant!r}: {result.line()}\n")
        for error in result.counts.errors:
            sys.stdout.write(f"  {error['where']}: {error['reason']}\n")
        for note in result.counts.notes:
            sys.stdout.write(f"  note: {note['where']}: {note['reason']}\n")
    return 1 if result.counts.rejected or result.counts.conflicting else 0
