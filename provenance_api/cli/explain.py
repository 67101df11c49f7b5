"""``provenance explain [TERM]``: what each number and word of a trace means (the glossary).

Without a term it lists every term in one line each; with one (``gamma``, ``Γ``, ``grounds``,
``calls.cached``, ``confidence`` …) it prints the matching terms with their detail. Every value a result,
a job or the gate reports has a term — a job's status (``queued`` … ``interrupted``), a verdict, a role, a
span-check label, a diagnosis, a warning's kind, a sentence's status, a probe's verdict, a declared credit's
outcome — and so does every parameter of ``Params`` (``max_calls``, ``params.max_calls``).
``--json`` prints what ``GET /v1/glossary`` serves.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

from provenance_api.cli.style import Style
from provenance_api.core.errors import NotFound
from provenance_api.core.glossary import GLOSSARY, GlossaryOut, Term, find, glossary_out

__all__ = ["register"]


def register(sub: Any) -> None:
    explain = sub.add_parser(
        "explain",
        help="what each number, word, status and parameter means (Γ, Δ, roles, calls, …)",
        description="Explain the numbers, words and statuses a trace, a job or the gate reports, and the "
        "method's parameters. Without TERM, list them all.",
    )
    explain.add_argument(
        "term",
        nargs="?",
        metavar="TERM",
        help="a term or its symbol: gamma, Γ, grounds, cached, reused, a status (queued, traceable, …) or a "
        "parameter (max_calls, …)",
    )
    explain.add_argument("--json", action="store_true", help="print the glossary as GET /v1/glossary serves it")
    explain.set_defaults(func=cmd_explain)


def _detail(term: Term, style: Style) -> str:
    body = textwrap.fill(term.detail, width=100, initial_indent="  ", subsequent_indent="  ")
    shown = [f"  on a source of the instructions layer: {term.instruction_label}"] if term.instruction_label else []
    if term.value is not None and term.value != term.label:
        shown.append(f"  in a result's JSON: {term.value}")
    head = "".join(line + "\n" for line in shown)
    return f"{style.bold(term.label)}  ({term.key})\n{head}  {term.short}\n\n{body}\n"


def cmd_explain(args: argparse.Namespace) -> int:
    style = Style.for_stream(sys.stdout, args.no_color)
    if args.term is None:
        if args.json:
            sys.stdout.write(glossary_out().model_dump_json(indent=2) + "\n")
            return 0
        width = max(len(t.key) for t in GLOSSARY.values())
        for term in GLOSSARY.values():
            sys.stdout.write(f"{style.bold(term.key.ljust(width))}  {term.short}\n")
        sys.stdout.write(style.dim("provenance explain TERM prints a term's detail\n"))
        return 0
    found = find(args.term)
    if not found:
        raise NotFound(
            f"no term {args.term!r} in the glossary", field="TERM", fix="run provenance explain to list every term"
        )
    if args.json:
        sys.stdout.write(GlossaryOut(terms=found).model_dump_json(indent=2) + "\n")
        return 0
    sys.stdout.write("\n".join(_detail(t, style) for t in found))
    return 0
