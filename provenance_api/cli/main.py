"""The ``provenance`` command line. Subcommands work on stored-turn files without a server
(gate, quote, trace) or on the service's storage (serve, keys, import)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from provenance_api.core.errors import ProvenanceError
from provenance_api.storage.errors import StorageError


def _dump(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def cmd_gate(args: argparse.Namespace) -> int:
    from provenance_api.cli import render_text
    from provenance_api.core.errors import InvalidInput
    from provenance_api.importers.turn_files import load_turn_file
    from provenance_api.providers import free_tier

    if args.all == bool(args.file):
        raise InvalidInput(
            "give either a stored-turn FILE or --all (every stored turn of a tenant)" if not args.all
            else "give a FILE or --all, not both",
            field="FILE",
            fix="provenance gate FILE  or  provenance gate --all [--tenant T]",
        )
    if args.tenant and not args.all:
        raise InvalidInput("--tenant goes with --all", field="--tenant", fix="add --all")
    if args.all:
        from provenance_api.cli.service import cmd_gate_all

        return cmd_gate_all(args.tenant, args.json)
    turn = load_turn_file(args.file)
    view = free_tier.gate_view(turn)
    if args.json:
        _dump(view.report.to_dict())
    else:
        sys.stdout.write(render_text.gate_text(turn, view))
    return 0


def cmd_quote(args: argparse.Namespace) -> int:
    from provenance_api.cli import render_text
    from provenance_api.importers.turn_files import load_turn_file
    from provenance_api.providers import free_tier

    turn = load_turn_file(args.file)
    model = free_tier.resolve_model(turn, args.model)
    view = free_tier.gate_view(turn)
    selection = free_tier.require_selection(turn, view, args.sentence)
    quote = free_tier.cost_quote(turn, view.corpus, selection.text, model=model)
    if args.json:
        _dump(quote.to_dict())
    else:
        sys.stdout.write(render_text.quote_text(quote))
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("provenance-service")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="provenance", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    gate = sub.add_parser("gate", help="free tier: which sentences of a stored turn can be traced (no model calls)")
    gate.add_argument("file", nargs="?", help="a stored-turn JSON file")
    gate.add_argument("--all", action="store_true", help="every stored turn of the tenant (the service's storage)")
    gate.add_argument("--tenant", help="with --all: the tenant (default: PROVENANCE_ADMIN_TENANT)")
    gate.add_argument("--json", action="store_true", help="print the stable JSON contract")
    gate.set_defaults(func=cmd_gate)

    quote = sub.add_parser("quote", help="cost gate: price tracing one sentence before spending")
    quote.add_argument("file", help="a stored-turn JSON file")
    quote.add_argument("sentence", help="the sentence (or segment id) to trace; must occur in the response")
    quote.add_argument("--model", help="litellm model string (default: the turn's own model)")
    quote.add_argument("--json", action="store_true", help="print the stable JSON contract")
    quote.set_defaults(func=cmd_quote)

    from provenance_api.cli.service import register as register_service
    from provenance_api.cli.trace import register as register_trace

    register_trace(sub)
    register_service(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        try:
            code: int = args.func(args)
        except StorageError as exc:
            from provenance_api.http.problems import storage_problem  # the one mapping, as the API shows it

            raise storage_problem(exc) from None
        return code
    except ProvenanceError as exc:
        if getattr(args, "json", False):  # a caller that asked for JSON gets the error as JSON too
            _dump({"error": exc.to_problem()})
            return 2
        sys.stderr.write(f"provenance: {exc.title}: {exc.detail}\n")
        if exc.fix:
            sys.stderr.write(f"  fix: {exc.fix}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("provenance: interrupted\n")
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
