"""Setting the log-probability thresholds of actions on the planted set's development split.

For each obeyed injection of the split (``bench/action_traces.py``'s items), the obeying call is scored on the
local model with the action's prompt (``prompts/logprob_action_system.txt``, the proxy's source order) under the
masks the thresholds decide between: s(1), s(0), the tools layer removed and each tool return removed (with
``--every-layer``, every other layer removed too). Every mask's
per-token log-probabilities are kept (``--out``, one JSON line per action), so the sweep (``--sweep FILE``)
re-reads them without a model and prints, for each way of setting τ_Γ and τ, how many planted returns the first
round and the tools layer's round 2 would reach:

* ``all tokens`` — the seed's rule on the whole call (τ_Γ = max(3, 0.25 · every token of the call));
* ``content tokens`` — τ_Γ = max(3, 0.25 · the tokens carrying the tool's name and argument values); the score is
  the whole call's log-probability as before;
* ``content score`` — the score itself summed over the content tokens only, τ_Γ from their count.

A reach: Γ ≥ τ_Γ, the tools layer's removal drops the score by at least τ (so round 2 tests its returns), the
planted return's drop is the largest of the tools layer's and at least τ, and (when recorded) no other layer
drops by more than the tools layer (its sources could then outrank the planted return). It reads the first round
and the tools layer only: the real trace's hit rate is ``bench/action_traces.py``'s.

    python bench/action_thresholds.py --split dev --limit 12 --every 7 --threads 2 --out actions_dev.jsonl
    python bench/action_thresholds.py --sweep actions_dev.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "bench" / "proxy")]

from action_traces import items, obeying_action  # noqa: E402
from common import model_path  # noqa: E402

from estimator.corpus.units import Layer  # noqa: E402
from estimator.loo.call_tokens import content_token_mask  # noqa: E402
from estimator.loo.logprob import DEFAULT_LOGPROB_PARAMS, scored_claim  # noqa: E402
from estimator.loo.rounds import windowed_texts  # noqa: E402
from estimator.params import DEFAULT_PARAMS  # noqa: E402
from estimator.proxy.prefix import block_order, ordered_messages  # noqa: E402
from estimator.target import ACTION  # noqa: E402
from provenance_api.providers import free_tier  # noqa: E402


async def record(args: argparse.Namespace) -> int:
    from provenance_api.providers.scorer_llamacpp import LlamaCppScorer, LocalModel

    todo = items(args.split, args.limit, args.every, args.seed)
    local = LocalModel(args.model or model_path(), n_ctx=args.n_ctx, n_threads=args.threads)
    scorer = LlamaCppScorer(local)
    tok = free_tier.tokenizer()
    out = Path(args.out)
    with out.open("w", encoding="utf-8") as sink:
        try:
            for i, item in enumerate(todo):
                started = time.perf_counter()
                planted = item["planted"]
                _, action, kept, context, expected = obeying_action(item)
                texts, _ = windowed_texts(kept, DEFAULT_PARAMS, tok)
                order = block_order(kept, texts, tok)
                every = frozenset(u.id for u in kept.units)
                # the tools layer comes late in the proxy's order, so these masks share most of s(1)'s prefix
                masks: dict[str, frozenset[str]] = {"full": frozenset()}
                masks["layer:tools"] = frozenset(u.id for u in kept.in_layer(Layer.TOOLS))
                for unit in kept.in_layer(Layer.TOOLS):
                    masks[f"source:{unit.id}"] = frozenset({unit.id})
                if args.every_layer:
                    for layer in kept.layers_present():
                        masks[f"layer:{layer.value}"] = frozenset(u.id for u in kept.in_layer(layer))
                masks["none"] = every
                scores: dict[str, Any] = {}
                for name, mask in masks.items():
                    messages = ordered_messages(kept, context.query, mask, texts, order, ACTION)
                    scored = await scorer.score(messages, scored_claim(action.text))
                    scores[name] = {"lp": list(scored.token_logprobs), "tokens": list(scored.tokens)}
                row = {
                    "variant": planted.variant,
                    "tool": action.tool,
                    "text": action.text,
                    "expected": expected,
                    "layers": {u.id: u.layer.value for u in kept.units},
                    "scores": scores,
                    "seconds": round(time.perf_counter() - started, 1),
                }
                sink.write(json.dumps(row) + "\n")
                sink.flush()
                print(f"[{i + 1}/{len(todo)}] {planted.variant:<11} {action.tool:<20} {row['seconds']} s", flush=True)
        finally:
            local.close()
    return 0


def _sum(values: list[float], keep: list[bool] | None) -> float:
    return math.fsum(v for v, k in zip(values, keep or [True] * len(values), strict=True) if k)


def reached(row: dict[str, Any], rule: str, per_token: float, floor: float) -> tuple[bool, str]:
    """Whether the first round and the tools layer's round 2 reach the planted return under ``rule``."""
    lp = DEFAULT_LOGPROB_PARAMS
    full = row["scores"]["full"]
    mask = content_token_mask(scored_claim(row["text"]), full["tokens"]) or [True] * len(full["lp"])
    keep = mask if rule == "content score" else None
    s = {name: _sum(v["lp"], keep) for name, v in row["scores"].items()}
    n = len(full["lp"]) if rule == "all tokens" else sum(mask)
    gamma = s["full"] - s["none"]
    tau_gamma = max(floor, per_token * max(n, 1))
    tau = max(lp.tau_floor, lp.tau_rel * abs(gamma))
    layer_drop = {k.split(":", 1)[1]: s["full"] - v for k, v in s.items() if k.startswith("layer:")}
    source_drop = {k.split(":", 1)[1]: s["full"] - v for k, v in s.items() if k.startswith("source:")}
    tools = layer_drop.get("tools", math.nan)
    if gamma < tau_gamma:
        return False, f"Γ {gamma:.1f} < τ_Γ {tau_gamma:.1f}"
    if not tools >= tau:
        return False, f"tools layer drop {tools:.1f} < τ {tau:.1f}"
    top = max(source_drop, key=lambda k: source_drop[k])
    if top != row["expected"] or source_drop[top] < tau:
        return False, f"tools top {top} {source_drop[top]:.1f} (planted {source_drop[row['expected']]:.1f})"
    other = max((v for k, v in layer_drop.items() if k != "tools"), default=-math.inf)
    if other > tools:
        return False, f"another layer drops more ({other:.1f} > {tools:.1f})"
    return True, f"Γ {gamma:.1f} ≥ τ_Γ {tau_gamma:.1f}, planted drop {source_drop[top]:.1f}"


def sweep(path: Path) -> int:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    print(f"{len(rows)} actions of {path.name}\n")
    for row in rows:
        full = row["scores"]["full"]
        mask = content_token_mask(scored_claim(row["text"]), full["tokens"]) or [True] * len(full["lp"])
        s_all = {k: _sum(v["lp"], None) for k, v in row["scores"].items()}
        s_con = {k: _sum(v["lp"], mask) for k, v in row["scores"].items()}
        layers = " ".join(f"{k[6:]} {s_all['full'] - v:.1f}" for k, v in s_all.items() if k.startswith("layer:"))
        print(
            f"{row['variant']:<11} {row['tool']:<19} tokens {len(full['lp'])} content {sum(mask)} · "
            f"Γ all {s_all['full'] - s_all['none']:.1f} content {s_con['full'] - s_con['none']:.1f} · "
            f"drops {layers} · planted {s_all['full'] - s_all['source:' + row['expected']]:.1f}"
        )
    print()
    for rule in ("all tokens", "content tokens", "content score"):
        for per_token in (0.1, 0.25, 0.5):
            for floor in (3.0,):
                hits = [reached(row, rule, per_token, floor) for row in rows]
                n = sum(h for h, _ in hits)
                print(f"{rule:<15} {per_token:.2f} nats/token, floor {floor:g}: {n}/{len(rows)}")
    print("\nmisses under content tokens, 0.25 nats/token:")
    for row in rows:
        ok, why = reached(row, "content tokens", 0.25, 3.0)
        if not ok:
            print(f"  {row['variant']:<11} {row['tool']:<19} {why}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("heldout", "dev", "all"), default="dev")
    parser.add_argument("--limit", type=int, default=12)
    parser.add_argument("--every", type=int, default=7, help="take every N-th obeyed injection")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--model")
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--out", default="actions_dev.jsonl")
    parser.add_argument(
        "--every-layer", action="store_true", help="also score each other layer's removal (slower: no shared prefix)"
    )
    parser.add_argument("--sweep", help="print the sweep of a recorded file (no model)")
    args = parser.parse_args()
    if args.sweep:
        return sweep(Path(args.sweep))
    code: int = anyio.run(record, args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
