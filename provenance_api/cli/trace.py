"""provenance trace: check the key and the endpoint, show the cost gate, ask, then trace against a real model.

``--estimator judged|expected|logprob|both`` picks the scalar: the forced-choice judge (any chat model),
its expected digit from the top log-probabilities of its answer (a judge that offers them), the
log-probability of the claim (a scoring-capable model: ``--local-model``, or a self-hosted server's
``/v1/completions`` with echo), or both (judged and logprob) with their agreement. The choice and the
plan are ``estimator.trace``'s; whether the trace may run (the gated sentence, the judge, the quote, what the
estimator needs) is ``operations.trace_plan.decide``'s, as for the service: this command shows the decision,
asks, and calls ``run_trace``.
``--local-model FILE.gguf`` runs every call (judge, span checks, scoring) in this process: nothing
leaves the machine.

Before the consent prompt the key and the endpoint are checked (``cli.preflight``): a missing key or an
endpoint that does not answer exits 1 with the setting to fix, and nothing is asked or spent; so does a scoring
server (or a judge, for ``expected``) that one probe call finds unable to do what the estimator needs. A trace
that measured nothing (``estimator.trace_failure``: every call failed, or every call of one of its scalars) exits
1 too, with the cause and the setting to fix. Repeated judgements are answered from the judgement cache in the data
directory (``--no-cache`` to bypass), and every trace is logged there (``--no-log`` or ``PROVENANCE_NO_LOG=1``
not to): ``provenance traces`` lists them, and the service's viewer shows them.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from estimator.trace import ESTIMATORS
from provenance_api.cli.style import Progress, Style
from provenance_api.core.errors import InvalidInput

if TYPE_CHECKING:
    from estimator.params import Params
    from estimator.results.proxy import ProxyQuoteModel
    from estimator.trace_failure import TraceFailure


def add_repeats(parser: Any) -> None:
    """``--repeats K``, on trace and on quote (which prices it)."""
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        metavar="K",
        help="measure each mask K times (1-9, default 1): the score is the median, its spread is shown; "
        "every sample is a model call the quote prices",
    )


def method_params(args: argparse.Namespace) -> Params:
    """The method's params for a trace or quote from the command line: the defaults with ``--repeats``."""
    from pydantic import ValidationError

    from estimator.params import DEFAULT_PARAMS, MAX_REPEATS

    try:
        return DEFAULT_PARAMS.override({"repeats": getattr(args, "repeats", 1)})
    except ValidationError:
        raise InvalidInput(
            f"--repeats {args.repeats}: a measurement takes 1 to {MAX_REPEATS} samples",
            field="--repeats",
            fix=f"give a whole number from 1 to {MAX_REPEATS} (1: a single sample, the default)",
        ) from None


def register(sub: Any) -> None:
    trace = sub.add_parser(
        "trace",
        help="trace one sentence to its source (spends model calls after consent)",
        description="Trace one sentence of a stored turn to the part of its context that caused "
        "it. Checks the key and the endpoint, shows the cost gate, asks, then runs.",
    )
    trace.add_argument("file", help="a stored-turn JSON file, or a conversation log (its last turn; --turn N)")
    trace.add_argument(
        "sentence",
        help="the sentence (or segment id, e.g. r3) to trace; must occur in the response — or an action id "
        "(a0, a1, …: a tool call the agent made, see provenance gate) to trace why the agent made it",
    )
    trace.add_argument("--model", help="litellm model string for the judge (default: the turn's own model)")
    trace.add_argument("--api-base", help="base URL of an OpenAI-compatible server (a local model, a proxy)")
    trace.add_argument("--api-key", help="API key for --api-base (default: the provider's usual variable)")
    trace.add_argument(
        "--estimator",
        choices=ESTIMATORS,
        default="judged",
        help="the scalar: a judged digit, the judge's expected digit (top log-probabilities), "
        "log p(claim) from a scoring-capable model, both judged and logprob with their "
        "agreement, or proxy: a local scoring model (--local-model or --scorer-api-base) "
        "ranks the sources and the judge confirms in a few calls (default: judged)",
    )
    trace.add_argument(
        "--local-model",
        metavar="FILE.gguf",
        help="run judge, span checks and scoring on this local model in-process (offline)",
    )
    trace.add_argument(
        "--scorer-api-base",
        help="an OpenAI-compatible server whose /v1/completions echoes log-probabilities (default: --api-base)",
    )
    trace.add_argument("--scorer-model", help="the model name the scoring server knows (default: from --model)")
    trace.add_argument("--n-ctx", type=int, default=8192, help="context size of --local-model (default 8192)")
    trace.add_argument("--yes", action="store_true", help="do not ask before spending")
    trace.add_argument("--json", action="store_true", help="print the result as the stable JSON contract")
    trace.add_argument("--timeout", type=float, default=120.0, help="per-call timeout in seconds")
    trace.add_argument(
        "--no-cache", action="store_true", help="send every call, even one the judgement cache could answer for $0"
    )
    trace.add_argument(
        "--no-log", action="store_true", help="do not log this trace (also PROVENANCE_NO_LOG=1); see: provenance traces"
    )
    trace.add_argument(
        "--turn",
        type=int,
        metavar="N",
        help="with a conversation log: which turn (0 the first, -1 the last; default the last)",
    )
    add_repeats(trace)
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


def _failed(args: argparse.Namespace, failure: TraceFailure, style: Style) -> int:
    """Report a trace that measured nothing (``estimator.trace_failure``, the service's rule too): the cause and
    the setting to fix — the scoring server's when its calls failed, the judge's by the type of its last provider
    error (``trace_plan.failure_fix``) — exit status 1, never a result."""
    from provenance_api.cli.preflight import SCORER_FIX
    from provenance_api.operations.trace_plan import failure_fix

    fixes = [SCORER_FIX] if failure.scorer else []
    if failure.unvalued:
        fixes.append(
            "choose a --model whose server returns what the estimator reads (top log-probabilities under "
            "--estimator expected), or use --estimator judged"
        )
    elif failure.judge or not failure.scorer:
        fixes.append(failure_fix(failure.error, api_base=args.api_base).fix)
    fix = "; ".join(fixes)
    if args.json:
        doc = {"status": "failed", "error": failure.reason, "fix": fix}
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    sys.stderr.write(f"provenance: {style.bad('trace failed')}: {failure.reason}\n  fix: {fix}\n")
    return 1


def _proxy_backends(args: argparse.Namespace, model: str) -> Backends:
    """--estimator proxy: the judge is --model (hosted); the local model or the scoring endpoint ranks."""
    from provenance_api.providers.llm_litellm import LiteLLMClient

    llm = LiteLLMClient(model, api_base=args.api_base, api_key=args.api_key, timeout=args.timeout)
    if not args.local_model:
        from provenance_api.cli.preflight import completions_scorer

        return Backends(llm, completions_scorer(args, model), model)
    from provenance_api.providers.scorer_llamacpp import LlamaCppScorer, LocalModel, LocalModelUnavailable

    try:
        local = LocalModel(args.local_model, n_ctx=args.n_ctx)
    except LocalModelUnavailable as exc:
        raise InvalidInput(
            str(exc), field="--local-model", fix="pass a GGUF file; scripts/local-model.sh path prints the built one"
        ) from exc
    return Backends(llm, LlamaCppScorer(local), model, local)


def _proxy_quote_text(q: ProxyQuoteModel) -> str:
    """--estimator proxy: both sides of the cost gate (written to stderr)."""
    cost = "" if q.confirm_cost_usd is None else f", ${q.confirm_cost_usd:.4f}"
    worst = "" if q.worst_case_cost_usd is None else f", ${q.worst_case_cost_usd:.4f}"
    return (
        f"Proxy ranking     {q.local_passes} local scoring passes, free "
        f"(~{q.local_prompt_tokens:,} prompt tokens evaluated, ~{q.local_seconds:.0f} s here at "
        f"{q.local_tokens_per_second:g} tokens/s)\n"
        f"Hosted confirm    {q.confirm_calls} calls at most (~{q.confirm_input_tokens:,} input "
        f"tokens{cost})\n"
        f"Fallback worst    {q.worst_case_calls} calls (~{q.worst_case_input_tokens:,} input tokens"
        f"{worst}) if the judge disagrees and the full judged search runs\n"
    )


def make_backends(args: argparse.Namespace, model: str, needs_scorer: bool) -> Backends:
    if args.estimator == "proxy":
        return _proxy_backends(args, model)
    if args.local_model:
        from provenance_api.providers.llm_llamacpp import LlamaCppLLM
        from provenance_api.providers.scorer_llamacpp import LlamaCppScorer, LocalModel, LocalModelUnavailable

        try:
            local = LocalModel(args.local_model, n_ctx=args.n_ctx)
        except LocalModelUnavailable as exc:
            raise InvalidInput(
                str(exc),
                field="--local-model",
                fix="pass a GGUF file; scripts/local-model.sh path prints the built one",
            ) from exc
        return Backends(LlamaCppLLM(local), LlamaCppScorer(local), local.name, local)
    from provenance_api.cli.preflight import completions_scorer
    from provenance_api.providers.llm_litellm import LiteLLMClient

    llm = LiteLLMClient(model, api_base=args.api_base, api_key=args.api_key, timeout=args.timeout)
    return Backends(llm, completions_scorer(args, model) if needs_scorer else None, model)


def _preflight(args: argparse.Namespace, model: str, scorer_needed: bool) -> str | None:
    """The key and the endpoint, before the gate is shown (no model call; a ProviderError names the fix).
    Returns the key the clients are given (a placeholder for a server of the user's own that needs none)."""
    if args.local_model and args.estimator != "proxy":  # under proxy the judge is hosted: it is checked
        return None
    from provenance_api.cli import preflight

    timeout = min(args.timeout, preflight.PREFLIGHT_TIMEOUT)
    judge = preflight.endpoint_for(model, args.api_base, args.api_key)
    preflight.check(judge, timeout=timeout)
    if scorer_needed and args.scorer_api_base:
        preflight.check(preflight.endpoint_for("openai/scorer", args.scorer_api_base, args.api_key), timeout=timeout)
    return args.api_key or (preflight.client_key(judge) if args.api_base else None)


def cmd_trace(args: argparse.Namespace) -> int:
    from estimator.actions.trace import trace_action
    from estimator.audit.declared import audit_trace
    from estimator.ledger import CallLedger
    from estimator.results.trace import ProgressEvent
    from estimator.trace import needs_scorer, run_trace
    from estimator.trace_failure import ScoringTally, failed_trace
    from provenance_api.cli import preflight as preflight_checks
    from provenance_api.cli import render_text
    from provenance_api.cli.settings import load_settings
    from provenance_api.cli.trace_log import TraceLog
    from provenance_api.cli.turn_input import load_turn
    from provenance_api.operations import trace_plan
    from provenance_api.operations.redaction import redact_turn
    from provenance_api.providers import free_tier

    err_style = Style.for_stream(sys.stderr, args.no_color)
    out_style = Style.for_stream(sys.stdout, args.no_color)
    params = method_params(args)  # --repeats
    # what the service would store and trace: the operator's redaction patterns applied before the turn is logged
    turn = redact_turn(load_turn(args.file, args.turn), load_settings().redactor)
    proxy = args.estimator == "proxy"  # a hosted judge confirms what the local model ranked
    surface = trace_plan.cli_surface(
        local_model=bool(args.local_model), api_base=args.api_base, scorer_api_base=args.scorer_api_base
    )
    decision = trace_plan.decide(turn, args.sentence, args.estimator, args.model, surface=surface, params=params)
    selection, quote, model = decision.selection, decision.quote, decision.model
    corpus = decision.corpus  # the turn's, or what the agent had seen when it made the action
    scorer_needed = needs_scorer(args.estimator)
    args.api_key = _preflight(args, model, scorer_needed)
    scoring = decision.scoring_quote
    assert scoring is not None  # a trace, not a probe
    # the capabilities the gate shows, each checked by a probe call where a yes is only assumed
    capability, expected, refused = preflight_checks.verified(args, model, decision)
    sys.stderr.write(render_text.quote_text(quote, err_style, selection))
    sys.stderr.write(f"Can score         {capability.word} ({capability.reason})\n")
    if capability.can_score:
        sys.stderr.write(
            f"Scoring calls     {scoring.scoring_calls} prompt-only (~{scoring.prompt_tokens:,} "
            "input tokens, no output)\n"
        )
    sys.stderr.write(f"Expected digit    {expected.word} ({expected.reason})\n")
    decision.require()
    if refused is not None:
        raise refused
    if decision.proxy is not None:
        sys.stderr.write(_proxy_quote_text(decision.proxy))
    planned = decision.planned
    if not args.yes and not _confirm(f"Spend up to {planned} model calls (cached answers cost $0)? [y/N] "):
        raise InvalidInput(
            "not confirmed: nothing was spent",
            field="--yes",
            fix="answer y at the prompt, or pass --yes to accept the quoted cost",
        )

    progress_line = Progress.for_stream(sys.stderr, args.no_color)
    ledger = CallLedger(planned=planned, concurrency=params.concurrency)

    def progress(event: ProgressEvent) -> None:
        counts = f"{ledger.made} made · {ledger.cached} cached · {ledger.failed} failed of {event.planned} planned"
        progress_line.update(event.round, counts, event.message)

    backends = make_backends(args, model, scorer_needed)
    log = TraceLog.open(args, turn, selection, quote, model, planned, err_style, params=params)
    llm = log.cached(backends.llm, args) if backends.local is None or proxy else backends.llm
    scorer = None if backends.scorer is None else ScoringTally(backends.scorer)  # what its calls gave
    query = turn.effective_query()

    from provenance_api.core.settings import Settings

    rules = Settings().freshness_policy  # PROVENANCE_FRESHNESS_RULES, checked on a traced action (read before spending)

    async def work() -> tuple[Any, TraceFailure | None]:
        """Log the start, trace, log the end — in one event loop (the database's)."""
        await log.start()
        try:
            if decision.action is not None:
                outcome = await trace_action(
                    args.estimator,
                    turn,
                    decision.corpus,
                    decision.action,
                    llm=llm,
                    scorer=scorer,
                    params=params,
                    tokenizer=free_tier.tokenizer(),
                    on_progress=progress,
                    ledger=ledger,
                )
                outcome = free_tier.with_freshness(outcome, turn, decision.corpus, decision.action, rules)
            else:
                outcome = await run_trace(
                    args.estimator,
                    selection.text,
                    query,
                    corpus,
                    llm=llm,
                    scorer=scorer,
                    params=params,
                    tokenizer=free_tier.tokenizer(),
                    on_progress=progress,
                    ledger=ledger,
                )
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await log.finish(ledger, None, f"stopped: {type(exc).__name__}", query, corpus.digest, interrupted=True)
            raise
        failure = failed_trace(ledger, scorer)  # the one rule (every estimator): a trace that measured nothing failed
        declared = None if decision.action is not None else audit_trace(selection.text, corpus, outcome.result)
        stored = None if failure is not None else outcome.to_model(declared=declared)
        progress_line.done()
        await log.finish(ledger, stored, None if failure is None else failure.reason, query, corpus.digest)
        return outcome, failure

    try:
        outcome, failure = anyio.run(work)
    finally:
        progress_line.done()
        if backends.local is not None:
            backends.local.close()
    if failure is not None:  # the service marks the same run failed: a failure is never shown as a result
        return _failed(args, failure, err_style)
    result = outcome.result  # the JSON contract (model_dump): printed as is (--json) or rendered
    if outcome.logprob is not None and outcome.agreement is not None:
        agree = outcome.agreement
        logprob = outcome.logprob
        if args.json:
            doc = {
                "judged": result.model_dump(mode="json"),
                "logprob": logprob.model_dump(mode="json"),
                "agreement": agree.model_dump(mode="json"),
                "warnings": list(result.warnings),
            }
            sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        else:
            sys.stdout.write("== judged ==\n" + render_text.trace_text(corpus, result, out_style, explain=False))
            sys.stdout.write(
                "\n== logprob (nats) ==\n" + render_text.trace_text(corpus, logprob, out_style, explain=False)
            )
            rho = "n/a" if agree.spearman is None else f"{agree.spearman:+.2f}"
            sys.stdout.write(
                f"\nAgreement: verdict {'same' if agree.same_verdict else 'differs'} · top layer "
                f"{'same' if agree.same_top_layer else 'differs'} · top source "
                f"{'same' if agree.same_top_source else 'differs'} · Spearman ρ of source drops "
                f"{rho} over {len(agree.compared_sources)} source(s)\n\n"
            )
            keys = render_text.terms_used(result) + render_text.terms_used(logprob) + ["estimator.logprob"]
            sys.stdout.write(render_text.footnotes(keys, out_style))
        return 0
    if args.json:
        sys.stdout.write(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
    else:
        from provenance_api.cli import render_proxy  # a proxy trace: its block between the tree and footnotes

        sys.stdout.write(render_proxy.result_text(corpus, result, out_style))
    return 0
