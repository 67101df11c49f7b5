"""``provenance traces``: the log of past traces ``provenance trace`` ran, read from the service's storage.

``provenance traces`` lists them newest first (id, date, verdict, model, calls, cost, claim) under a header
row naming the columns: on a terminal as aligned columns, claims cut to fit; redirected, as tab-separated
lines with nothing cut, the header first (``tail -n +2`` skips it). ``--all`` adds the traces the service
ran. ``provenance traces show ID`` prints one as ``provenance trace`` printed it. ``--json`` gives the trace
list's items (``GET /v1/traces``) and the trace itself (``GET /v1/traces/{id}``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
from typing import Any

from provenance_api.cli.settings import load_settings, with_db
from provenance_api.cli.style import Style, plural
from provenance_api.core.schemas import TraceSummary

__all__ = ["HEADER", "register"]

HEADER = ("ID", "DATE (UTC)", "VERDICT", "MODEL", "CALLS", "COST", "CLAIM")
"""The columns of the list, named in its header row; CALLS in the call account's words (made, cached, failed)."""


def register(sub: Any) -> None:
    traces = sub.add_parser(
        "traces",
        help="the log of past traces run by provenance trace (newest first)",
        description="List the traces provenance trace ran and logged, newest first. They are "
        "kept in the service's storage, so the viewer shows them too.",
    )
    traces.add_argument("-n", "--limit", type=int, default=20, help="how many to list (default 20)")
    traces.add_argument("--all", action="store_true", help="also the traces the service (API or viewer) ran")
    traces.add_argument("--json", action="store_true", help="print the list as JSON (the trace list's items)")
    traces.set_defaults(func=cmd_traces)
    actions = traces.add_subparsers(dest="traces_command", metavar="{show}")
    show = actions.add_parser("show", help="print one logged trace", description="Print one logged trace.")
    show.add_argument("trace_id", metavar="ID", help="the trace id (tr_…), as listed")
    show.add_argument("--json", action="store_true", help="print the trace as GET /v1/traces/{id} returns it")
    show.set_defaults(func=cmd_traces_show)


def _run(work: Any) -> Any:
    settings = load_settings()
    return asyncio.run(with_db(settings, lambda db: work(db, settings.admin_tenant)))


def cmd_traces(args: argparse.Namespace) -> int:
    from provenance_api.core.errors import InvalidInput
    from provenance_api.operations.trace_log import logged_traces, summary

    if args.limit < 1:
        raise InvalidInput(f"--limit {args.limit} lists nothing", field="--limit", fix="give a count of 1 or more")

    async def work(db: Any, tenant: str) -> list[TraceSummary]:
        return [summary(job) for job in await logged_traces(db, tenant, limit=args.limit, everything=args.all)]

    items: list[TraceSummary] = _run(work)
    if args.json:
        sys.stdout.write(
            json.dumps({"items": [i.model_dump(mode="json") for i in items]}, indent=2, ensure_ascii=False) + "\n"
        )
        return 0
    if sys.stdout.isatty():
        sys.stdout.write(_table(items, Style.for_stream(sys.stdout, args.no_color)))
    else:
        sys.stdout.write("\t".join(HEADER) + "\n")
        for i in items:
            sys.stdout.write("\t".join(_cells(i)) + "\n")
    if not items and sys.stderr.isatty():
        sys.stderr.write("No traces logged yet: provenance trace FILE SENTENCE logs each trace it runs.\n")
    return 0


def _cells(item: TraceSummary) -> list[str]:
    c = item.calls
    cost = "-" if item.cost_usd is None else f"${item.cost_usd:.4f}"
    verdict = item.verdict if item.status == "succeeded" and item.verdict else item.status
    return [
        item.trace_id,
        f"{item.created_at:%Y-%m-%d %H:%M}",
        verdict or "",
        item.model,
        f"{c.made} made · {c.cached} cached · {c.failed} failed",
        cost,
        " ".join(item.claim.split()),
    ]


def _table(items: list[TraceSummary], style: Style) -> str:
    head = list(HEADER)
    rows = [_cells(i) for i in items]
    widths = [max([len(head[k])] + [len(r[k]) for r in rows]) for k in range(len(head) - 1)]
    room = max(20, shutil.get_terminal_size().columns - sum(widths) - 2 * (len(widths)))
    titles = [style.bold(h.ljust(w)) for h, w in zip(head, widths, strict=False)]
    out = ["  ".join([*titles, style.bold("CLAIM")])]
    for r in rows:
        claim = r[-1] if len(r[-1]) <= room else r[-1][: room - 1] + "…"
        paint = style.good if r[2] == "attributed" else style.bad if r[2] in ("failed", "interrupted") else str
        cells = [
            r[0].ljust(widths[0]),
            style.dim(r[1].ljust(widths[1])),
            paint(r[2].ljust(widths[2])),
            *(v.ljust(w) for v, w in zip(r[3:6], widths[3:6], strict=True)),
            claim,
        ]
        out.append("  ".join(cells))
    out.append(style.dim(plural(len(items), "trace") + " · provenance traces show ID"))
    return "\n".join(out) + "\n"


def cmd_traces_show(args: argparse.Namespace) -> int:
    from estimator.params import Params
    from estimator.results.models import trace_job_result
    from provenance_api.cli import render_text
    from provenance_api.core.errors import NotFound
    from provenance_api.operations.trace_log import ShownTrace, logged_trace
    from provenance_api.operations.tracing import job_calls, trace_out
    from provenance_api.providers import free_tier
    from provenance_api.storage.errors import RecordMissing

    async def work(db: Any, tenant: str) -> ShownTrace:
        return await logged_trace(db, tenant, args.trace_id)

    try:
        shown: ShownTrace = _run(work)
    except RecordMissing:
        raise NotFound(
            f"no trace {args.trace_id!r} is logged here",
            field="ID",
            fix="provenance traces lists the logged traces (--all adds the service's)",
        ) from None
    job = shown.job
    if args.json:
        sys.stdout.write(trace_out(job).model_dump_json(indent=2) + "\n")
        return 0
    style = Style.for_stream(sys.stdout, args.no_color)
    sys.stdout.write(
        f"{style.bold('Trace')} {job.id} · {job.created_at:%Y-%m-%d %H:%M} UTC · run by {job.source} · {job.status}\n"
    )
    sys.stdout.write(f"Turn   {job.turn_id}\nModel  {job.model}\n")
    if job.status == "succeeded" and job.result:
        result = trace_job_result(job.result)
        corpus = free_tier.corpus_for(shown.turn, Params.stored(job.params))
        sys.stdout.write(render_text.trace_text(corpus, result, style))
        return 0
    sys.stdout.write(_claim(job.claim))
    sys.stdout.write(f"{style.bad(job.status)}: {job.reason or 'no reason recorded'}\n")
    sys.stdout.write(f"Calls: {render_text.calls_text(job_calls(job), None)}\n")
    return 0


def _claim(claim: str) -> str:
    return f'Claim: "{" ".join(claim.split())}"\n'
