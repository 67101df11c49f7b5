"""``provenance gateway`` (the evidence gateway for MCP) and ``provenance evidence list`` (what it recorded).

``provenance gateway --stdio [--name NAME] -- CMD [ARG…]`` is what an agent launches in place of an MCP server:
it starts ``CMD``, relays the agent's messages and the server's unchanged, and records every ``tools/call``
result. ``provenance gateway --http URL [--listen HOST:PORT]`` does the same for a streamable-HTTP server,
listening locally (the agent is pointed at the address it prints). ``provenance evidence list`` lists the
recorded calls (``server, tool, observed_at, digest``): aligned on a terminal, tab-separated with a header row when
piped, the ``EvidenceRecord`` objects with ``--json``; results relayed but not recorded are reported after them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
from typing import Any

from estimator.corpus.units import Corpus
from provenance_api.cli.settings import load_settings, with_db
from provenance_api.cli.style import plural
from provenance_api.core.errors import InvalidInput
from provenance_api.core.evidence import EvidenceRecord
from provenance_api.core.schemas_actions import ActionsOut

__all__ = ["EVIDENCE_HEADER", "register", "with_local_custody"]

EVIDENCE_HEADER = ("ID", "OBSERVED AT (UTC)", "SERVER", "TOOL", "ERROR", "DIGEST")


def register(sub: Any) -> None:
    gateway = sub.add_parser(
        "gateway",
        help="evidence gateway: relay an agent's MCP server unchanged and record every tool result",
        description="Run between an agent and one MCP server: every message is forwarded unchanged, and each "
        "tools/call result is recorded (server, tool, arguments digest, observed_at, digest) in the store.",
        epilog="examples:\n  provenance gateway --stdio --name time -- uvx mcp-server-time\n"
        "  provenance gateway --http http://127.0.0.1:8000/mcp --listen 127.0.0.1:8001",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mode = gateway.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="start the server command after -- and relay its stdio")
    mode.add_argument("--http", metavar="URL", help="relay to the streamable-HTTP MCP server at URL")
    gateway.add_argument("--name", help="the server's name in the records (default: the command's or URL's name)")
    gateway.add_argument(
        "--listen", metavar="HOST:PORT", default="127.0.0.1:0", help="with --http: where to listen (default: any port)"
    )
    gateway.add_argument("command", nargs=argparse.REMAINDER, help="with --stdio: -- CMD [ARG…]")
    gateway.set_defaults(func=cmd_gateway)

    evidence = sub.add_parser("evidence", help="the tool results the MCP gateway recorded")
    actions = evidence.add_subparsers(dest="evidence_command", metavar="{list}", required=True)
    listing = actions.add_parser(
        "list", help="list the recorded tool calls, oldest first", description="List the recorded tool calls."
    )
    listing.add_argument("-n", "--limit", type=int, default=1000, help="the newest N records (default 1000)")
    listing.add_argument("--json", action="store_true", help="print the records as JSON")
    listing.set_defaults(func=cmd_evidence_list)


def cmd_gateway(args: argparse.Namespace) -> int:
    from provenance_api.gateway.run import GatewayConfig, default_server_name, serve_http, serve_stdio

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    settings = load_settings()
    if args.stdio:
        if not command:
            raise InvalidInput(
                "--stdio needs the server's command", field="CMD", fix="provenance gateway --stdio -- CMD [ARG…]"
            )
        config = GatewayConfig.from_settings(settings, args.name or default_server_name(command))
        return asyncio.run(serve_stdio(config, command))
    if command:
        raise InvalidInput("--http takes no command", field="CMD", fix="drop the command after --, or use --stdio")
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise InvalidInput(f"--listen {args.listen!r} is not HOST:PORT", field="--listen", fix="e.g. 127.0.0.1:8001")
    config = GatewayConfig.from_settings(settings, args.name or default_server_name(url=args.http))
    try:
        return asyncio.run(serve_http(config, args.http, host, int(port)))
    except KeyboardInterrupt:
        return 0


def cmd_evidence_list(args: argparse.Namespace) -> int:
    from provenance_api.gateway.recorder import GAPS_FILE, read_gaps_file
    from provenance_api.gateway.run import TENANT_ENV
    from provenance_api.storage.evidence_records import list_evidence

    if args.limit < 1:
        raise InvalidInput(f"--limit {args.limit} lists nothing", field="--limit", fix="give a count of 1 or more")
    settings = load_settings()
    tenant = os.environ.get(TENANT_ENV, "").strip() or settings.admin_tenant
    stored = asyncio.run(with_db(settings, lambda db: list_evidence(db, tenant, limit=args.limit)))
    results = [r for r in stored if r.kind == "result"]
    gaps = [r for r in stored if r.kind == "gap"] + read_gaps_file(settings.data_dir / GAPS_FILE, tenant)
    if args.json:
        out = {
            "records": [r.model_dump(mode="json") for r in results],
            "gaps": [g.model_dump(mode="json") for g in gaps],
            "not_recorded": sum(g.missed for g in gaps),
        }
        sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        return 0
    terminal = sys.stdout.isatty()
    rows = [_row(r, full=not terminal) for r in results]
    if terminal:
        _aligned(rows)
        if not results:
            sys.stdout.write("no tool results recorded\n")
    else:
        sys.stdout.write("\t".join(EVIDENCE_HEADER) + "\n")
        sys.stdout.writelines("\t".join(row) + "\n" for row in rows)
    report = sys.stdout if terminal else sys.stderr  # a piped table stays a table
    for gap in gaps:
        when = gap.observed_at.strftime("%Y-%m-%d %H:%M:%S")
        report.write(f"{plural(gap.missed, 'result')} not recorded: {gap.cause} ({gap.server}, {when})\n")
    return 0


def _row(record: EvidenceRecord, *, full: bool) -> tuple[str, ...]:
    return (
        str(record.id or ""),
        record.observed_at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
        record.server,
        record.tool,
        "error" if record.is_error else "",
        record.digest if full else record.digest[:16],
    )


def _aligned(rows: list[tuple[str, ...]]) -> None:
    table = [EVIDENCE_HEADER, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(EVIDENCE_HEADER))]
    width = shutil.get_terminal_size().columns
    for row in table:
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        sys.stdout.write(line[:width] + "\n")


def with_local_custody(actions: ActionsOut, corpus: Corpus) -> ActionsOut:
    """``provenance gate FILE``: each tool return bound to the gateway's records in the data directory's store
    (``PROVENANCE_DATABASE_URL``, or the SQLite file when there is one). No store: every return is ``history``. A
    store that cannot be read is said on stderr, and the returns are ``history`` too (what the history reports)."""
    from provenance_api.core.evidence import bind_custody, return_digests

    settings = load_settings()
    records: dict[str, EvidenceRecord] = {}
    if settings.database_url or (settings.data_dir / "provenance.db").is_file():
        from provenance_api.gateway.run import TENANT_ENV
        from provenance_api.storage.evidence_records import custody_for
        from provenance_api.storage.session import Database

        tenant = os.environ.get(TENANT_ENV, "").strip() or settings.admin_tenant

        async def lookup() -> dict[str, EvidenceRecord]:
            db = Database(settings.effective_database_url)
            try:
                return await custody_for(db, tenant, return_digests(corpus).values())
            finally:
                await db.dispose()

        try:
            records = asyncio.run(lookup())
        except Exception as exc:  # the gate reads a file; the store only adds custody
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            if "evidence_records" not in first:  # a store older than the gateway holds no record: nothing to say
                sys.stderr.write(
                    f"provenance: the gateway's records were not read ({first}); custody is the history's\n"
                )
    return actions.model_copy(update={"sources": bind_custody(actions.sources, corpus, records)})
