"""The ``provenance`` command line. Subcommands work on stored-turn files without a server
(gate, quote, trace) or on the service's storage (serve, keys, import, traces).

Exit status: 0 done, 1 a failure (a trace whose calls failed, a provider that cannot be reached or refuses
the key, an import that rejected something), 2 a usage error. With ``--json`` an error is a problem object
on stdout. Colour only on a terminal (``--no-color`` or ``NO_COLOR`` to turn it off).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from provenance_api.core.errors import ProvenanceError, ProviderError
from provenance_api.storage.errors import StorageError

if TYPE_CHECKING:
    from estimator.custody.freshness import FreshnessPolicy


def _dump(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


DESCRIPTION = """\
Trace a sentence of an LLM agent's answer to the part of its context that caused it.

Free, no model calls:   provenance gate FILE          which sentences can be traced
                        provenance quote FILE r3      the cost gate of one sentence
                        provenance explain [TERM]     what each number means
Spends model calls:     provenance trace FILE r3      asks before spending
Service and storage:    provenance serve | worker | keys | import | traces | audit
MCP evidence:           provenance gateway | evidence list
"""
EPILOG = """\
Exit status: 0 done; 1 failed (provider unreachable, key refused, every call
failed, an import rejected something); 2 usage error. With --json an error is
a problem object on stdout. Colour only on a terminal: --no-color or NO_COLOR=1
turns it off. Run provenance COMMAND --help for a command's options.
"""


def cmd_gate(args: argparse.Namespace) -> int:
    from provenance_api.cli import render_text
    from provenance_api.cli.gateway import with_local_custody
    from provenance_api.cli.style import Style
    from provenance_api.cli.turn_input import load_turn
    from provenance_api.core.errors import InvalidInput
    from provenance_api.providers import free_tier

    if args.all == bool(args.file):
        raise InvalidInput(
            "give either a stored-turn FILE or --all (every stored turn of a tenant)"
            if not args.all
            else "give a FILE or --all, not both",
            field="FILE",
            fix="provenance gate FILE  or  provenance gate --all [--tenant T]",
        )
    if args.tenant and not args.all:
        raise InvalidInput("--tenant goes with --all", field="--tenant", fix="add --all")
    if args.all:
        from provenance_api.cli.service import cmd_gate_all

        return cmd_gate_all(args.tenant, args.json)
    turn = load_turn(args.file, args.turn)
    view = free_tier.gate_view(turn)
    actions = free_tier.actions_out(turn.turn_id, turn, view, freshness_policy(args.freshness_rules))
    actions = with_local_custody(actions, view.corpus)  # the MCP gateway's records in the data directory
    if args.json:
        gate = view.report.to_dict()
        gate["summary"] |= {
            "actions": len(actions.actions),
            "steered_by_tool_data": actions.steered,
            "line": f"{gate['summary']['line']} · {actions.summary}",
        }
        listed = actions.model_dump(mode="json")
        _dump(
            {
                **gate,
                "sources": listed["sources"],
                "actions": listed["actions"],
                "answered_at": listed["answered_at"],
                "freshness_rules": listed["freshness_rules"],
            }
        )
    else:
        sys.stdout.write(render_text.gate_text(turn, view, Style.for_stream(sys.stdout, args.no_color), actions))
    return 0


def freshness_policy(path: str | None) -> FreshnessPolicy:
    """The freshness rules of ``--freshness-rules``, else of ``PROVENANCE_FRESHNESS_RULES`` (none when neither)."""
    from pathlib import Path

    from provenance_api.core.settings import Settings, read_freshness_rules

    return read_freshness_rules(Path(path)) if path else Settings().freshness_policy


def cmd_quote(args: argparse.Namespace) -> int:
    from provenance_api.cli import render_text
    from provenance_api.cli.style import Style
    from provenance_api.cli.trace import method_params
    from provenance_api.cli.turn_input import load_turn
    from provenance_api.providers import free_tier

    params = method_params(args)  # --repeats: every sample priced
    turn = load_turn(args.file, args.turn)
    model = free_tier.resolve_model(turn, args.model)
    view = free_tier.gate_view(turn)
    target = free_tier.action_target(turn, view.corpus, args.sentence)  # an action: priced on its own context
    selection, corpus = (
        target if target is not None else (free_tier.require_selection(turn, view, args.sentence), view.corpus)
    )
    quote = free_tier.cost_quote(turn, corpus, selection.text, model=model, params=params)
    if args.json:
        _dump(quote.to_dict())
    else:
        sys.stdout.write(render_text.quote_text(quote, Style.for_stream(sys.stdout, args.no_color), selection))
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("provenance-service")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


def _turn_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--turn",
        type=int,
        metavar="N",
        help="with a conversation log: which turn (0 the first, -1 the last; default the last)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="provenance", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--no-color", action="store_true", help="no colour, even on a terminal (also NO_COLOR=1)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    gate = sub.add_parser("gate", help="free tier: which sentences of a stored turn can be traced (no model calls)")
    gate.add_argument("file", nargs="?", help="a stored-turn JSON file, or a conversation log (its last turn)")
    gate.add_argument("--all", action="store_true", help="every stored turn of the tenant (the service's storage)")
    gate.add_argument("--tenant", help="with --all: the tenant (default: PROVENANCE_ADMIN_TENANT)")
    gate.add_argument("--json", action="store_true", help="print the stable JSON contract")
    gate.add_argument(
        "--freshness-rules",
        metavar="RULES",
        help="a TOML or JSON file of freshness rules for actions (default: PROVENANCE_FRESHNESS_RULES; none: "
        "sources' ages are shown and nothing is judged)",
    )
    _turn_option(gate)
    gate.set_defaults(func=cmd_gate)

    quote = sub.add_parser("quote", help="cost gate: price tracing one sentence before spending")
    quote.add_argument("file", help="a stored-turn JSON file, or a conversation log (its last turn)")
    quote.add_argument(
        "sentence",
        help="the sentence (or segment id, r3) to trace, which must occur in the response; or an action id (a1)",
    )
    quote.add_argument("--model", help="litellm model string (default: the turn's own model)")
    quote.add_argument("--json", action="store_true", help="print the stable JSON contract")
    _turn_option(quote)
    from provenance_api.cli.trace import add_repeats

    add_repeats(quote)
    quote.set_defaults(func=cmd_quote)

    from provenance_api.cli.audit import register as register_audit
    from provenance_api.cli.explain import register as register_explain
    from provenance_api.cli.gateway import register as register_gateway
    from provenance_api.cli.incident import register as register_incident
    from provenance_api.cli.service import register as register_service
    from provenance_api.cli.trace import register as register_trace
    from provenance_api.cli.traces import register as register_traces

    register_trace(sub)
    register_traces(sub)
    register_explain(sub)
    register_service(sub)
    register_gateway(sub)
    register_audit(sub)
    register_incident(sub)
    _everywhere(
        sub,
        "--no-color",
        action="store_true",
        default=argparse.SUPPRESS,
        help="no colour, even on a terminal (also NO_COLOR=1)",
    )
    return parser


def _everywhere(sub: Any, *flag: str, **options: Any) -> None:
    """Accept ``flag`` after any subcommand too (``provenance trace … --no-color``), nested ones included;
    ``SUPPRESS`` keeps the top-level value unless the flag is given there."""
    for parser in set(sub.choices.values()):
        parser.add_argument(*flag, **options)
        for action in parser._subparsers._group_actions if parser._subparsers else ():
            _everywhere(action, *flag, **options)


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
        code = 1 if isinstance(exc, ProviderError) else 2  # the provider failed; else the input or setup did
        if getattr(args, "json", False):  # a caller that asked for JSON gets the error as JSON too
            _dump({"error": exc.to_problem()})
            return code
        sys.stderr.write(f"provenance: {exc.title}: {exc.detail}\n")
        if exc.fix:
            sys.stderr.write(f"  fix: {exc.fix}\n")
        return code
    except KeyboardInterrupt:
        sys.stderr.write("provenance: interrupted\n")
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
