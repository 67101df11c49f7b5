"""``provenance incident TURN_ID TARGET``: the incident export of one action or sentence of a stored turn, read from
the local store as ``provenance audit verify`` reads it (``PROVENANCE_DATA_DIR`` / ``PROVENANCE_DATABASE_URL``).

The same document as ``GET /v1/turns/{turn_id}/incident``: Markdown by default (plain text, on a terminal or
piped), ``--format json`` the endpoint's JSON. Exit status 0 printed; 1 the turn or the target is not in the store
(the reason on stderr, and for a missing turn the newest stored ones); 2 a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from provenance_api.cli.settings import load_settings, with_db
from provenance_api.core.errors import InvalidInput
from provenance_api.storage.errors import RecordMissing

__all__ = ["register"]


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "incident",
        help="export one action or sentence of a stored turn: its chain, sources, envelopes, custody, digests",
        description="The chain action → sentence(s) → sources of one target of a stored turn, with each source's "
        "evidence envelope, age, custody and digest, its latest finished trace and the custody log's verdict. "
        "Read from the local store; no model calls.",
        epilog="Exit status: 0 printed; 1 the turn or the target is not in the store; 2 usage error.",
    )
    parser.add_argument("turn_id", metavar="TURN_ID", help="the stored turn's turn_id")
    parser.add_argument("target", metavar="TARGET", help="an action (a0, a1, …) or a sentence (r0, r1, …)")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown", help="markdown (default) or json")
    parser.add_argument("--tenant", help="the tenant (default: PROVENANCE_ADMIN_TENANT)")
    parser.set_defaults(func=cmd_incident)


def cmd_incident(args: argparse.Namespace) -> int:
    from provenance_api.operations.incident import build_incident, incident_file, stored_turn_hint

    settings = load_settings()
    tenant = args.tenant or settings.admin_tenant
    try:
        found = asyncio.run(
            with_db(settings, lambda db: build_incident(db, settings, tenant, args.turn_id, args.target))
        )
    except RecordMissing as exc:
        sys.stderr.write(f"provenance incident: {exc} (tenant {tenant!r})\n")
        hint = asyncio.run(with_db(settings, lambda db: stored_turn_hint(db, tenant)))
        sys.stderr.write(f"  {hint}\n")
        return 1
    except InvalidInput as exc:
        if exc.field != "target":
            raise
        sys.stderr.write(f"provenance incident: {exc.detail}\n")
        if exc.fix:
            sys.stderr.write(f"  fix: {exc.fix}\n")
        return 1
    if args.format == "json":
        sys.stdout.write(json.dumps(found.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(incident_file(found, "markdown").body)
    return 0
