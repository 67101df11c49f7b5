"""``provenance trace``: cost gate, consent, then the metered tiers against a real model."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio

from .errors import CostRefused, InvalidInput


def register(sub: Any) -> None:
    trace = sub.add_parser("trace", help="trace one sentence to its source (spends model calls after consent)")
    trace.add_argument("file", help="a stored-turn JSON file")
    trace.add_argument("sentence", help="the sentence (or segment id) to trace; must occur in the response")
    trace.add_argument("--model", help="litellm model string for the judge (default: the turn's own model)")
    trace.add_argument("--api-base", help="base URL of an OpenAI-compatible server (a local model, a proxy)")
    trace.add_argument("--api-key", help="API key for --api-base (default: the provider's usual variable)")
    trace.add_argument("--yes", action="store_true", help="do not ask before spending")
    trace.add_argument("--json", action="store_true", help="print the result as the stable JSON contract")
    trace.add_argument("--timeout", type=float, default=120.0, help="per-call timeout in seconds")
    trace.set_defaults(func=cmd_trace)


def _confirm(prompt: str) -> bool:
    if not sys.stdin.isatty():
        return False
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in {"y", "yes"}


def cmd_trace(args: argparse.Namespace) -> int:
    from estimator.attribution import trace_claim
    from estimator.result import ProgressEvent

    from . import free_tier, render_text
    from .llm_litellm import LiteLLMClient
    from .turn_files import load_turn_file

    turn = load_turn_file(args.file)
    model = free_tier.resolve_model(turn, args.model)
    view = free_tier.gate_view(turn)
    selection = free_tier.require_selection(turn, view, args.sentence)
    quote = free_tier.cost_quote(turn, view.corpus, selection.text, model=model)
    sys.stderr.write(render_text.quote_text(quote))
    if quote.refused:
        raise CostRefused(quote.refused, field="sentence", fix="narrow the turn's corpus or raise the ceiling")
    if not args.yes and not _confirm(f"Spend up to {quote.planned_calls} model calls? [y/N] "):
        raise InvalidInput("not confirmed: nothing was spent", field="--yes",
                           fix="answer y at the prompt, or pass --yes to accept the quoted cost")

    def progress(event: ProgressEvent) -> None:
        sys.stderr.write(f"\r[{event.round}] {event.calls_done}/{event.calls_planned} calls  {event.message[:60]:<60}")
        sys.stderr.flush()

    client = LiteLLMClient(model, api_base=args.api_base, api_key=args.api_key, timeout=args.timeout)

    async def run() -> Any:
        return await trace_claim(client, selection.text, turn.effective_query(), view.corpus,
                                 tokenizer=free_tier.tokenizer(), on_progress=progress)

    result = anyio.run(run)
    sys.stderr.write("\n")
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_text.trace_text(view.corpus, result))
    return 0
