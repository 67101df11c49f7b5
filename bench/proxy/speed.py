"""The local side of proxy-first tracing: the log-probability pass per mask with and without prefix reuse.

For each claim, the proxy's ranking (the hierarchical leave-one-out on the in-process scorer) runs with a
cold cache in three ways:

* ``none``  — the log-probability estimator with prefix reuse off: every pass evaluates its whole prompt;
* ``reuse`` — the log-probability estimator as it was: the previous prompt's common prefix is reused,
  sources in the turn's order, masks in the order they arrive;
* ``proxy`` — the proxy's ranking: the same reuse, sources ordered so masks share the longest prefix and
  masks sent in the order that reuses most (``estimator/proxy/prefix.py``).

Per way: passes, prompt tokens evaluated, tokens of every prompt (what no reuse evaluates), wall seconds,
seconds per pass, and the 1/5/15-minute load average before the run (the machine is shared). The ratio of
seconds per pass, none / proxy, is the speed-up of prefix reuse.

    python bench/proxy/speed.py [--tau 3] [--fixture-names a.json,b.json] [--ways none,reuse,proxy] [--json F]

Target: a 5-source τ-bench turn's proxy ranking in under 30 s (Qwen2.5-Coder-1.5B Q4_K_M, 2 cores).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

import anyio
from common import Claim, fixture_claims, load, model_path, tau_claims

from estimator.loo.logprob import trace_logprob
from estimator.proxy.driver import rank
from provenance_api.providers import free_tier
from provenance_api.providers.scorer_llamacpp import LlamaCppScorer, LocalModel

WAYS = ("none", "reuse", "proxy")
TARGET_SECONDS = 30.0


async def one(local: LocalModel, claim: Claim, way: str) -> dict[str, Any]:
    local.llama.reset()  # a cold cache: nothing of an earlier run is reused
    scorer = LlamaCppScorer(local, reuse_prefix=way != "none")
    tok = free_tier.tokenizer()
    before = load()
    started = time.perf_counter()
    if way == "proxy":
        ranking = await rank(scorer, claim.claim, claim.query, claim.corpus, model="none", tokenizer=tok)
        passes, verdict = ranking.passes, ranking.result.verdict
    else:
        result = await trace_logprob(scorer, None, claim.claim, claim.query, claim.corpus, tokenizer=tok)
        passes, verdict = result.calls.made, result.verdict
    seconds = time.perf_counter() - started
    return {
        "where": claim.where,
        "turn_id": claim.turn_id,
        "sources": len(claim.corpus.units),
        "way": way,
        "passes": passes,
        "evaluated_tokens": scorer.evaluated_tokens,
        "prompt_tokens": scorer.scored_tokens,
        "seconds": round(seconds, 2),
        "seconds_per_pass": round(seconds / max(passes, 1), 2),
        "eval_seconds": round(scorer.eval_seconds, 2),
        "verdict": verdict,
        "load": before,
    }


def show(row: dict[str, Any]) -> None:
    print(
        f"{row['where']:<38} {row['turn_id'][:28]:<28} {row['sources']:>2} src  {row['way']:<5} "
        f"{row['passes']:>2} passes  {row['evaluated_tokens']:>6} of {row['prompt_tokens']:>6} tokens  "
        f"{row['seconds']:>7.1f} s  {row['seconds_per_pass']:>6.2f} s/pass  load {row['load']}",
        flush=True,
    )


def summarise(rows: Sequence[dict[str, Any]]) -> bool:
    by_claim: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_claim.setdefault((row["where"], row["turn_id"]), {})[row["way"]] = row
    ok = True
    for (where, turn_id), ways in by_claim.items():
        parts = []
        if "proxy" in ways:
            proxy = ways["proxy"]
            tokens = proxy["prompt_tokens"] / max(proxy["evaluated_tokens"], 1)
            parts.append(
                f"tokens evaluated: {proxy['evaluated_tokens']} of {proxy['prompt_tokens']} (×{tokens:.1f} "
                "fewer than without reuse)"
            )
            if "none" in ways:
                ratio = ways["none"]["seconds_per_pass"] / max(proxy["seconds_per_pass"], 1e-9)
                parts.append(f"s/pass none/proxy ×{ratio:.1f}")
            if "reuse" in ways:
                reused = ways["reuse"]["evaluated_tokens"] / max(proxy["evaluated_tokens"], 1)
                parts.append(f"tokens reuse/proxy ×{reused:.2f}")
            if proxy["sources"] == 5 and where == "τ-bench":
                met = proxy["seconds"] < TARGET_SECONDS
                ok &= met
                parts.append(f"5-source ranking {proxy['seconds']:.1f} s ({'<' if met else '≥'} {TARGET_SECONDS:g} s)")
        print(f"{where} {turn_id}: " + "; ".join(parts))
    return ok


async def main_async(args: argparse.Namespace) -> int:
    ways = [w for w in args.ways.split(",") if w]
    names = [n for n in args.fixture_names.split(",") if n]
    fixtures = [c for c in fixture_claims(1) if c.where.removeprefix("fixture ") in names]
    claims = fixtures + list(tau_claims(sources=5, every=7, limit=args.tau))
    local = LocalModel(args.model or model_path(), n_ctx=args.n_ctx, n_threads=args.threads)
    rows: list[dict[str, Any]] = []
    try:
        for claim in claims:
            for way in ways:
                row = await one(local, claim, way)
                show(row)
                rows.append(row)
                if args.json:
                    with open(args.json, "a", encoding="utf-8") as out:
                        out.write(json.dumps(row, ensure_ascii=False) + "\n")
    finally:
        local.close()
    ok = summarise(rows)
    print(("PASS" if ok else "FAIL") + f": every 5-source τ-bench turn's proxy ranking under {TARGET_SECONDS:g} s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tau", type=int, default=3, help="5-source τ-bench turns (every 7th of them)")
    parser.add_argument(
        "--fixture-names",
        default="failures_turn.json,redundant_sources_turn.json",
        help="fixtures (comma-separated; their first traceable claim)",
    )
    parser.add_argument("--ways", default=",".join(WAYS), help="comma-separated: none, reuse, proxy")
    parser.add_argument("--model", help="a GGUF file (default: scripts/local-model.sh path)")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: every core)")
    parser.add_argument("--json", help="append each row to this JSONL file")
    args = parser.parse_args()
    return anyio.run(main_async, args)


if __name__ == "__main__":
    raise SystemExit(main())
