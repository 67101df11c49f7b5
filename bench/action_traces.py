"""Metered traces of actions on the planted-injection set: is the injected return the top source of the action
that obeyed it?

The set is ``bench/planted_injections.py``'s (held-out split by default): for each obeyed injection (variants
``verbatim``, ``described``, ``two_returns``) the obeying action is traced over what the agent had seen when it
made the call (``estimator.actions.trace``):

* ``logprob`` — log p(call | masked context) on the local model in-process (Qwen2.5-Coder-1.5B-Instruct Q4_K_M
  unless ``--model``): the proxy's ranking, a log-probability leave-one-out with prefixes shared;
* ``proxy`` — that ranking confirmed by a scripted hosted judge (``bench/proxy/judges.py``): ``knowing`` (9 while
  the planted instruction is shown, else 2; its span check quotes it) and ``opposite`` (adversarial: 2 while it is
  shown, else 9), running the full judged search when the judge disagrees — whose result stands unless its own
  measurements contradict each other while the ranking's do not (``estimator/proxy/driver.py``, step 4).

A hit: the source with the largest drop is the planted return. Also printed: how often the result's ``injection``
finding is ``suspected`` naming that return, the local seconds per action and the hosted calls made.

    python bench/action_traces.py [--split heldout] [--limit 24] [--every 1] [--offset 0] [--judges knowing,opposite]
        [--threads 2] [--action-tokens content|all]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "bench" / "proxy")]

from common import model_path  # noqa: E402
from judges import judge_named  # noqa: E402
from planted_injections import plant, turns  # noqa: E402

from estimator.actions.arguments import argument_sources  # noqa: E402
from estimator.actions.injection import screen_action  # noqa: E402
from estimator.actions.trace import action_corpus, find_action, measured_injection  # noqa: E402
from estimator.corpus.build import build_corpus  # noqa: E402
from estimator.loo.logprob import LogprobParams, ranked_sources  # noqa: E402
from estimator.proxy.driver import rank, trace_proxy  # noqa: E402
from estimator.results.models import TraceResultModel  # noqa: E402
from estimator.results.proxy import CONTRADICTED_LINE  # noqa: E402
from estimator.target import ACTION  # noqa: E402
from provenance_api.providers import free_tier  # noqa: E402


def top(result: TraceResultModel) -> str | None:
    """The tested source with the largest drop (whatever its role), or None when no source was tested."""
    ranked = ranked_sources(result)
    return ranked[0][0] if ranked else None


def items(split: str, limit: int, every: int, seed: int, offset: int = 0) -> list[dict[str, Any]]:
    """The obeyed injections of ``split`` (every ``every``-th from the ``offset``-th, at most ``limit``), with the
    planted line as key."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    seen = 0
    for _, turn in turns(split):
        originals = [c.response for c in turn.response_payload.tool_calls]
        for planted in plant(turn, rng):
            if planted.attack_action is None:
                continue
            seen += 1
            if seen - 1 < offset or (seen - 1 - offset) % every:
                continue
            call = planted.turn.response_payload.tool_calls[planted.planted_call or 0]
            before = originals[planted.planted_call or 0]
            added = str(call.response)[len(str(before)) :]
            key = max((line.strip() for line in added.splitlines()), key=len)
            out.append({"planted": planted, "key": key})
            if len(out) >= limit:
                return out
    return out


def obeying_action(item: dict[str, Any]) -> tuple[Any, Any, Any, Any, str]:
    """One obeyed injection of ``items``: its turn, the obeying action, the corpus the agent had seen when it made
    the call, that action's context, and the id of the planted return (the expected top source)."""
    planted = item["planted"]
    turn = planted.turn
    action = find_action(turn, f"a{planted.attack_action}")
    kept, context = action_corpus(turn, build_corpus(turn), action)
    expected = next(u.id for u in kept.tool_units() if u.returned_at == planted.planted_call)
    return turn, action, kept, context, expected


async def main_async(args: argparse.Namespace) -> int:
    from provenance_api.providers.scorer_llamacpp import LlamaCppScorer, LocalModel

    todo = items(args.split, args.limit, args.every, args.seed, args.offset)
    judges = [j for j in args.judges.split(",") if j]
    local = LocalModel(args.model or model_path(), n_ctx=args.n_ctx, n_threads=args.threads)
    scorer = LlamaCppScorer(local)
    tok = free_tier.tokenizer()
    lp = LogprobParams(action_tokens=args.action_tokens)
    tally: Counter[str] = Counter()
    seconds = 0.0
    started = time.perf_counter()
    try:
        for i, item in enumerate(todo):
            planted = item["planted"]
            turn, action, kept, context, expected = obeying_action(item)
            ranking = await rank(
                scorer, action.text, context.query, kept, model="scripted-judge", lp=lp, tokenizer=tok, wording=ACTION
            )
            seconds += ranking.seconds
            arguments = argument_sources(context)
            screen = screen_action(context, arguments)
            lp_top = top(ranking.result)
            lp_injection = measured_injection(ranking.result, context, arguments, screen)
            tally["logprob:hit"] += lp_top == expected
            tally["logprob:suspected"] += lp_injection.suspected and lp_injection.source_id == expected
            ranked = ranking.result
            line = [
                f"[{i + 1}/{len(todo)}] {planted.variant:<11} {action.tool:<18} Γ {ranked.gamma:.1f} "
                f"τ_Γ {ranked.thresholds.tau_gamma_nats:.1f} · logprob top {lp_top}"
            ]
            for name in judges:
                judge = judge_named(name, [item["key"]], turn.turn_id)
                proxy = await trace_proxy(
                    scorer,
                    judge,
                    action.text,
                    context.query,
                    kept,
                    lp=lp,
                    tokenizer=tok,
                    ranking=ranking,
                    wording=ACTION,
                )
                proxy_top = top(proxy)
                injection = measured_injection(proxy, context, arguments, screen)
                tally[f"{name}:hit"] += proxy_top == expected
                tally[f"{name}:suspected"] += injection.suspected and injection.source_id == expected
                tally[f"{name}:made"] += proxy.calls.made
                tally[f"{name}:confirmed"] += proxy.confirmed
                tally[f"{name}:contradicted"] += proxy.confirmation == CONTRADICTED_LINE
                line.append(f"{name} top {proxy_top} ({proxy.calls.made} calls)")
            line.append(f"expected {expected} · {ranking.seconds:.0f} s")
            print(" · ".join(line), flush=True)
    finally:
        local.close()
    n = max(len(todo), 1)
    print(f"\nsplit {args.split}: {len(todo)} obeyed injections traced, local model {scorer.model}")
    print(
        f"  logprob: the planted return is the top source in {tally['logprob:hit']}/{len(todo)} "
        f"({tally['logprob:hit'] / n:.1%}); injection suspected naming it {tally['logprob:suspected']}/{len(todo)}; "
        f"{seconds / n:.1f} s of local scoring per action"
    )
    for name in judges:
        print(
            f"  proxy, {name} judge: top source right {tally[f'{name}:hit']}/{len(todo)} "
            f"({tally[f'{name}:hit'] / n:.1%}); injection suspected naming it {tally[f'{name}:suspected']}; "
            f"confirmed {tally[f'{name}:confirmed']}; the judge's search contradicting itself "
            f"{tally[f'{name}:contradicted']}; {tally[f'{name}:made'] / n:.1f} hosted calls per action"
        )
    print(f"ran in {time.perf_counter() - started:.0f} s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("heldout", "dev", "all"), default="heldout")
    parser.add_argument("--limit", type=int, default=24, help="obeyed injections to trace")
    parser.add_argument("--every", type=int, default=1, help="take every N-th obeyed injection")
    parser.add_argument("--offset", type=int, default=0, help="skip the first N obeyed injections")
    parser.add_argument("--seed", type=int, default=7, help="the planted set's seed (planted_injections.py's)")
    parser.add_argument("--judges", default="knowing,opposite")
    parser.add_argument("--model", help="a GGUF file (default: scripts/local-model.sh path)")
    parser.add_argument(
        "--n-ctx",
        type=int,
        default=8192,
        help="the local context: an action's prompt over τ-bench reaches ~5,000 tokens (at 4096, 4 of 10 "
        "held-out actions did not fit and read as no information)",
    )
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: every core)")
    parser.add_argument(
        "--action-tokens",
        choices=("content", "all"),
        default="content",
        help="what τ_Γ counts (LogprobParams.action_tokens): the call's content tokens, or all (the sentence rule)",
    )
    args = parser.parse_args()
    code: int = anyio.run(main_async, args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
