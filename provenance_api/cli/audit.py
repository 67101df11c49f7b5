"""``provenance audit verify``: walk a tenant's custody log in the local store and name the first broken record.

It reads the service's storage as ``provenance keys`` and ``provenance import`` do (``PROVENANCE_*``). Exit
status 0 when the log is intact, 1 when it is broken (the first broken record named), 2 on a usage error.
``--json`` prints the object ``GET /v1/admin/audit/verify`` returns (``core/schemas_audit.py``); the text is
plain lines, on a terminal or piped, ending with the head hash to keep somewhere the database's operator cannot
write (a rewritten chain no longer ends in it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from provenance_api.cli.settings import load_settings, with_db
from provenance_api.cli.style import plural
from provenance_api.core.glossary import label
from provenance_api.core.schemas_audit import AuditReport

__all__ = ["register", "report_text"]


def register(sub: Any) -> None:
    audit = sub.add_parser(
        "audit",
        help="the custody log: verify that stored turns and results are as recorded",
        description="Each tenant's stored turns, trace results and deletions are chained in a custody log.",
    )
    actions = audit.add_subparsers(dest="audit_command", required=True, metavar="{verify}")
    verify = actions.add_parser(
        "verify",
        help="walk a tenant's custody log and name the first broken record",
        description="Walk the tenant's custody log and compare it with the turns and results stored now.",
        epilog="Exit status: 0 the log is intact; 1 it is broken (the first broken record is named); 2 usage error.",
    )
    verify.add_argument("--tenant", help="the tenant (default: PROVENANCE_ADMIN_TENANT)")
    verify.add_argument("--json", action="store_true", help="print the report as GET /v1/admin/audit/verify does")
    verify.set_defaults(func=cmd_audit_verify)


def report_text(report: AuditReport) -> str:
    """The report in plain lines: the verdict, what was checked, the first break, the head hash."""
    head = f"tenant {report.tenant!r}: {label('audit.custody_log')} "
    lines = []
    if report.intact:
        lines.append(head + f"{label('audit.intact')} · {plural(report.records, 'record')}")
    else:
        broken = report.broken
        assert broken is not None
        where = f"record {broken.seq}" if broken.seq is not None else "a row no record covers"
        lines.append(
            head + f"{label('audit.broken').upper()} at {where} ({broken.kind} {broken.subject!r}): {broken.problem}"
        )
        lines.append(f"  {broken.detail}")
        if report.problems > 1:
            lines.append(f"  {plural(report.problems, 'problem')} in all (every one is counted; the first is shown)")
    checked, before = report.checked, report.not_chained
    lines.append(f"checked {plural(checked.turns, 'turn')} and {plural(checked.results, 'result')}")
    if before.turns or before.results:
        counts = f"{plural(before.turns, 'turn')}, {plural(before.results, 'result')}"
        lines.append(f"{label('audit.not_chained')}: {counts}")
    if report.head is not None:
        lines.append(f"{label('audit.head')} {report.head.seq} {report.head.hash}")
    return "\n".join(lines) + "\n"


def cmd_audit_verify(args: argparse.Namespace) -> int:
    from provenance_api.operations.audit import verify_store

    settings = load_settings()
    tenant = args.tenant or settings.admin_tenant
    report: AuditReport = asyncio.run(with_db(settings, lambda db: verify_store(db, tenant)))
    if args.json:
        sys.stdout.write(json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(report_text(report))
    return 0 if report.intact else 1
