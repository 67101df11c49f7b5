"""``provenance trace``: cost gate, consent, then the metered tiers against a real model.

``--estimator judged|expected|logprob|both`` picks the scalar: the forced-choice judge (any chat model),
its expected digit from the top log-probabilities of its answer (a judge that offers them), the
log-probability of the claim (a scoring-capable model: ``--local-model``, or a self-hosted server's
``/v1/completions`` with echo), or both (judged and logprob) with their agreement. The choice and the
plan are ``estimator.trace``'s: this command prices, asks, and calls ``run_trace``.
``--local-model FILE.gguf`` runs every call (judge, span checks, scoring) in this process: nothing
leaves the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

import anyio

from estimator.trace import ESTIMATORS
from provenance_api.core.errors import CostRefused, InvalidInput


def register(sub: Any) -> None:
    trace = sub.add_parser("trace", help="trace one sentence to its source (spends model calls after consent)")
    trace.add_argument("file", help="a stored-turn JSON file")
    trace.add_argument("sentence", help="the sentence (or segment id) to trace; must occur in the response")
    trace.add_argument("--model", help="litellm model string for the judge (default: the turn's own model)")
    trace.add_argument("--api-base", help="base URL of an OpenAI-compatible server (a local model, a proxy)")
    trace.add_argument("--api-key", help="API key for --api-base (default: the provider's usual variable)")
    trace.add_argument("--estimator", choices=ESTIMATORS, default="judged",
                       help="the scalar: a judged digit, the judge's expected digit (top log-probabilities), "
                            "log p(claim) from a scoring-capable model, or both judged and logprob with their "
                            "agreement (default: judged)")
    trace.add_argument("--local-model", metavar="FILE.gguf",
                       help="run judge, span checks and scoring on this local model in-process (offline)")
    trace.add_argument("--scorer-api-base",
                       help="an OpenAI-compatible server whose /v1/completions echoes log-probabilities "
                            "(default: --api-base)")
    trace.add_argument("--scorer-model", help="the model name the scoring server knows (default: from --model)")
    trace.add_argument("--n-ctx", type=int, default=4096, help="context size of --local-model (default 4096)")
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


@dataclass
class Backends:
    """The chat model and (when needed) the scorer one trace runs against."""

    llm: Any
    scorer: Any
    model: str
    local: Any | None = None


def _fix_for(error: str, args: argparse.Namespace) -> str:
    """The setting to change, read from the provider's error."""
    lowered = error.lower()
    if any(word in lowered for word in ("credential", "api_key", "api key", "401", "authentication", "unauthor")):
        return ("give the judge's provider a key: the provider's usual variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, "
                "…) or --api-key with --api-base")
    if any(word in lowered for word in ("connect", "unreachable", "refused", "timed out", "timeout", "resolve")):
        where = f"--api-base {args.api_base}" if args.api_base else "the provider's endpoint (OPENAI_API_BASE, …)"
        return f"check that {where} answers, or pass --api-base for a reachable OpenAI-compatible server"
    return "check --model, --api-base and the provider's key; the error above is the provider's own"


def _failed(args: argparse.Namespace, failure: str) -> int:
    """Report a trace whose every call failed: the cause and the setting to fix, exit status 1."""
    fix = _fix_for(failure, args)
    if args.json:
        sys.stdout.write(json.dumps({"status": "failed", "error": failure, "fix": fix}, indent=2,
                                    ensure_ascii=False) + "\n")
    sys.stderr.write(f"provenance: trace failed: {failure}\n  fix: {fix}\n")
    return 1


def make_backends(args: argparse.Namespace, model: str, needs_scorer: bool) -> Backends:
    if args.local_model:
        from provenance_api.providers.llm_llamacpp import LlamaCppLLM
        from provenance_api.providers.scorer_llamacpp import LlamaCppScorer, LocalModel, LocalModelUnavailable

        try:
            local = LocalModel(args.local_model, n_ctx=args.n_ctx)
        except LocalModelUnavailable as exc:
            raise InvalidInput(str(exc), field="--local-model",
                               fix="pass a GGUF file; scripts/local-model.sh path prints the built one") from exc
        return Backends(LlamaCppLLM(local), LlamaCppScorer(local), local.name, local)
    from provenance_api.providers.llm_litellm import LiteLLMClient

    llm = LiteLLMClient(model, api_base=args.api_base, api_key=args.api_key, timeout=args.timeout)
    scorer = None
    if needs_scorer:
        from provenance_api.providers.scorer_completions import CompletionsScorer

        base = args.scorer_api_base or args.api_base
        name = args.scorer_model or model.split("/", 1)[-1]
        scorer = CompletionsScorer(name, base, args.api_key, timeout=max(args.timeout, 600.0))
    return Backends(llm, scorer, model)


def cmd_trace(args: argparse.Namespace) -> int:
    from estimator.ledger import CallLedger
    from estimator.params import DEFAULT_PARAMS
    from estimator.result import ProgressEvent
    from estimator.scoring_cost import quote_scoring, scoring_capability
    from estimator.trace import needs_scorer, planned_calls, run_trace
    from provenance_api.cli import render_text
    from provenance_api.importers.turn_files import load_turn_file
    from provenance_api.providers import free_tier
    from provenance_api.providers.capabilities import top_logprobs_capability

    turn = load_turn_file(args.file)
    view = free_tier.gate_view(turn)
    selection = free_tier.require_selection(turn, view, args.sentence)
    model = "local" if args.local_model else free_tier.resolve_model(turn, args.model)
    quote = free_tier.cost_quote(turn, view.corpus, selection.text, model=model)
    scorer_needed = needs_scorer(args.estimator)
    capability = scoring_capability(model, local_model=bool(args.local_model),
                                    scorer_api_base=args.scorer_api_base, api_base=args.api_base)
    scoring = quote_scoring(view.corpus, selection.text, capability, query=turn.effective_query(),
                            tokenizer=free_tier.tokenizer())
    expected = top_logprobs_capability(model, local_model=bool(args.local_model), api_base=args.api_base)
    sys.stderr.write(render_text.quote_text(quote))
    sys.stderr.write(f"Can score         {'yes' if capability.can_score else 'no'} ({capability.reason})\n")
    if capability.can_score:
        sys.stderr.write(f"Scoring calls     {scoring.scoring_calls} prompt-only (~{scoring.prompt_tokens:,} "
                         "input tokens, no output)\n")
    sys.stderr.write(f"Expected digit    {'yes' if expected.offered else 'no'} ({expected.reason})\n")
    if quote.refused:
        raise CostRefused(quote.refused, field="sentence", fix="narrow the turn's corpus or raise the ceiling")
    if scorer_needed and not capability.can_score:
        raise InvalidInput(f"--estimator {args.estimator} needs a scoring-capable model: {capability.reason}",
                           field="--estimator",
                           fix="use --local-model FILE.gguf or --scorer-api-base URL, or --estimator judged")
    if args.estimator == "expected" and not expected.offered:
        raise InvalidInput(f"--estimator expected needs a judge that returns top log-probabilities: "
                           f"{expected.reason}", field="--estimator",
                           fix="use --estimator judged, or a judge that offers them (OpenAI or Azure chat "
                               "completions, vLLM, a llama.cpp server, --local-model)")
    planned = planned_calls(args.estimator, view.corpus)
    if not args.yes and not _confirm(f"Spend up to {planned} model calls? [y/N] "):
        raise InvalidInput("not confirmed: nothing was spent", field="--yes",
                           fix="answer y at the prompt, or pass --yes to accept the quoted cost")

    def progress(event: ProgressEvent) -> None:
        sys.stderr.write(f"\r[{event.round}] {event.calls_done}/{event.calls_planned} calls  {event.message[:60]:<60}")
        sys.stderr.flush()

    backends = make_backends(args, model, scorer_needed)
    ledger = CallLedger(planned=planned, concurrency=DEFAULT_PARAMS.concurrency)
    try:
        outcome = anyio.run(lambda: run_trace(args.estimator, selection.text, turn.effective_query(), view.corpus,
                                              llm=backends.llm, scorer=backends.scorer,
                                              tokenizer=free_tier.tokenizer(), on_progress=progress,
                                              ledger=ledger))
    finally:
        if backends.local is not None:
            backends.local.close()
    sys.stderr.write("\n")
    failure = ledger.failure()
    if failure is not None:  # the service marks the same run failed: a failure is never shown as a result
        return _failed(args, failure)
    result = outcome.result.to_model()  # the JSON contract: printed as is (--json) or rendered
    if outcome.logprob is not None and outcome.agreement is not None:
        agree = outcome.agreement
        logprob = outcome.logprob.to_model()
        if args.json:
            doc = {"judged": result.model_dump(mode="json"), "logprob": logprob.model_dump(mode="json"),
                   "agreement": agree.to_model().model_dump(mode="json"), "warnings": list(result.warnings)}
            sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        else:
            sys.stdout.write("== judged ==\n" + render_text.trace_text(view.corpus, result))
            sys.stdout.write("\n== logprob (nats) ==\n" + render_text.trace_text(view.corpus, logprob))
            rho = "n/a" if agree.spearman is None else f"{agree.spearman:+.2f}"
            sys.stdout.write(f"\nAgreement: verdict {'same' if agree.same_verdict else 'differs'} · top layer "
                             f"{'same' if agree.same_top_layer else 'differs'} · top source "
                             f"{'same' if agree.same_top_source else 'differs'} · Spearman ρ of source drops "
                             f"{rho} over {len(agree.compared_sources)} source(s)\n")
        return 0
    if args.json:
        sys.stdout.write(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_text.trace_text(view.corpus, result))
    return 0
