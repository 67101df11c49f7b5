"""Proxy-first tracing measured against the full judged trace: hosted calls and input tokens per traced claim,
top-source agreement, verdict agreement, fallbacks.

The local scorer is the real model in-process (Qwen2.5-Coder-1.5B-Instruct Q4_K_M unless ``--model``); the
hosted judge is a plain function (``judges.py``: the model's judgement is what a test may fake). Each claim
is ranked by the proxy once; that ranking is then confirmed by each judge (``trace_proxy(ranking=…)``), and
the same judge runs the full judged trace (``attribution.trace_claim``) for comparison.

Sets:

* ``tau`` — τ-bench dev claims (one per turn, every ``--tau-every``-th turn, ``--tau`` of them) and
  ``fixtures`` — the first traceable claim of each fixture: the ``claim_ids`` judge; hosted calls and input
  tokens per claim, proxy vs judged.
* ``easy`` — the 32 planted turns of ``bench/validity/turns.py`` (``--easy`` of them, round-robin over the
  kinds) and ``hard`` — ``--hard`` turns of each subset of ``bench/validity/hard_turns.py`` (its first ones
  of the held-out split): the ``knowing``, ``opposite`` and ``random`` judges; the same top source as the
  full judged trace, against the truth, and what the fallback did.

    python bench/proxy/run.py [--sets tau,fixtures,easy,hard] [--tau 8] [--easy 32] [--hard 2] [--out FILE]

Rows are appended to ``results.jsonl`` beside this file (``--out``); a row already there is not run again,
so an interrupted run resumes. ``--report`` prints the tables from the file without running anything.
Targets: ≤ 4 hosted calls made per claim on average when the proxy is confirmed; the same top source as the
full judged trace in ≥ 90 % of planted-cause turns (knowing judge).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from common import ROOT, Claim, fixture_claims, load, model_path, tau_claims
from judges import JUDGES, by_claim_ids, judge_named
from report import report

from estimator.audit.agreement import top_source
from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.cost import quote_cost
from estimator.loo.judged import trace_claim
from estimator.params import DEFAULT_PARAMS
from estimator.proxy.cost import proxy_capability, quote_proxy
from estimator.proxy.driver import Ranking, rank, trace_proxy
from estimator.results.models import TraceResultModel
from estimator.seams.llm import ScriptedLLM
from provenance_api.providers import free_tier

sys.path.insert(0, str(ROOT / "bench" / "validity"))
from hard_turns import HARD
from turns import SUITE

OUT = Path(__file__).resolve().parent / "results.jsonl"
JUDGE_MODEL = "scripted-judge"


@dataclass(frozen=True)
class Item:
    """One claim to trace, with its planted truth when it has one."""

    set: str
    kind: str
    claim: Claim
    causes: tuple[str, ...] = ()  # substrings of the carrying source(s); empty: no planted cause
    together: bool = False  # the causes carry the claim together (each half of it)
    expected_verdict: str | None = None


def _planted(
    set_name: str,
    turn_id: str,
    kind: str,
    stored: dict[str, Any],
    claim: str,
    query: str,
    causes: Sequence[str],
    expected: str,
) -> Item:
    corpus = build_corpus(StoredTurn.model_validate(stored), DEFAULT_PARAMS)
    return Item(
        set_name,
        kind,
        Claim(set_name, turn_id, claim, query, corpus),
        tuple(causes),
        together=kind == "two_cause",
        expected_verdict=expected,
    )


def easy_items(limit: int) -> list[Item]:
    by_kind: dict[str, list[Any]] = {}
    for p in SUITE:
        by_kind.setdefault(p.kind, []).append(p)
    order = [v[i] for i in range(max(len(v) for v in by_kind.values())) for v in by_kind.values() if i < len(v)]
    return [
        _planted("easy", p.turn_id, p.kind, p.stored_turn(), p.claim, p.query, p.cause, p.expected_verdict)
        for p in order[:limit]
    ]


def hard_items(per_subset: int) -> list[Item]:
    out: list[Item] = []
    taken: dict[str, int] = {}
    for t in HARD:
        if t.split != "heldout" or taken.get(t.kind, 0) >= per_subset:
            continue
        taken[t.kind] = taken.get(t.kind, 0) + 1
        out.append(_planted("hard", t.turn_id, t.kind, t.stored_turn(), t.claim, t.query, t.causes, t.expected_verdict))
    return out


def cause_ids(item: Item) -> list[str]:
    return [u.id for u in item.claim.corpus.units if any(c in u.text for c in item.causes)]


def summary(result: TraceResultModel) -> dict[str, Any]:
    return {
        "verdict": result.verdict,
        "top": top_source(result),
        "made": result.calls.made,
        "planned": result.calls.planned,
        "input_tokens": result.usage.input_tokens,
        "saved": result.calls.saved,
        "refused": result.calls.refused,
    }


def gate(item: Item) -> dict[str, Any]:
    """What the cost gate quoted for this claim before anything ran (the proxy's two sides)."""
    tok = free_tier.tokenizer()
    c = item.claim
    judged = quote_cost(c.corpus, c.claim, model=JUDGE_MODEL, tokenizer=tok, query=c.query)
    q = quote_proxy(
        c.corpus,
        c.claim,
        proxy_capability(local_model=True, scorer_api_base=None),
        judged,
        query=c.query,
        tokenizer=tok,
    )
    return {
        "confirm_calls": q.confirm_calls,
        "confirm_input_tokens": q.confirm_input_tokens,
        "worst_case_calls": q.worst_case_calls,
        "worst_case_input_tokens": q.worst_case_input_tokens,
        "local_passes": q.local_passes,
        "local_prompt_tokens": q.local_prompt_tokens,
    }


def make_judge(item: Item, name: str) -> ScriptedLLM:
    judge: ScriptedLLM
    if name == "claim_ids":
        judge = by_claim_ids(item.claim.claim)
    else:
        judge = judge_named(name, item.causes, item.claim.turn_id, together=item.together)
    return judge


async def ranked(item: Item, scorer: Any, cache: Path | None) -> Ranking:
    """The proxy's ranking of the item's claim; with ``cache``, kept there (a rerun with other judges, or
    another confirmation rule, spends no local time)."""
    c = item.claim
    key = hashlib.sha256(f"{item.set}|{c.turn_id}|{c.claim}|{scorer.model}".encode()).hexdigest()[:24]
    path = None if cache is None else cache / f"{key}.pickle"
    if path is not None and path.exists():
        kept: Ranking = pickle.loads(path.read_bytes())
        return kept
    ranking = await rank(scorer, c.claim, c.query, c.corpus, model=JUDGE_MODEL, tokenizer=free_tier.tokenizer())
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(ranking))
    return ranking


async def run_item(item: Item, scorer: Any, judges: Sequence[str], cache: Path | None) -> list[dict[str, Any]]:
    tok = free_tier.tokenizer()
    c = item.claim
    before = load()
    ranking = await ranked(item, scorer, cache)
    quoted = gate(item)
    rows = []
    for name in judges:
        full = await trace_claim(make_judge(item, name), c.claim, c.query, c.corpus, tokenizer=tok)
        hosted = make_judge(item, name)
        proxy = await trace_proxy(scorer, hosted, c.claim, c.query, c.corpus, tokenizer=tok, ranking=ranking)
        assert proxy.calls.made == len(hosted.calls), "the result's made must be the hosted calls sent"
        report_ = proxy.proxy
        assert report_ is not None
        rows.append(
            {
                "set": item.set,
                "kind": item.kind,
                "turn_id": c.turn_id,
                "where": c.where,
                "judge": name,
                "claim": c.claim,
                "sources": len(c.corpus.units),
                "causes": cause_ids(item),
                "expected_verdict": item.expected_verdict,
                "judged": summary(full),
                "proxy": {
                    **summary(proxy),
                    "confirmed": proxy.confirmed,
                    "scored": ranking.passes,
                    "proxy_top": top_source(ranking.result),
                    "proxy_verdict": ranking.result.verdict,
                    "disagreements": report_.disagreements,
                },
                "local_seconds": round(ranking.seconds, 2),
                "evaluated_tokens": ranking.evaluated_tokens,
                "gate": quoted,
                "load": before,
            }
        )
    return rows


def items_for(args: argparse.Namespace) -> list[tuple[Item, tuple[str, ...]]]:
    sets = set(args.sets.split(","))
    out: list[tuple[Item, tuple[str, ...]]] = []
    for name in args.sets.split(","):  # in the order given
        if name == "fixtures" and name in sets:
            out += [(Item("fixtures", "fixture", c), ("claim_ids",)) for c in fixture_claims(1)]
        elif name == "tau":
            out += [(Item("tau", "tau", c), ("claim_ids",)) for c in tau_claims(every=args.tau_every, limit=args.tau)]
        elif name == "easy":
            out += [(i, JUDGES) for i in easy_items(args.easy)]
        elif name == "hard":
            out += [(i, JUDGES) for i in hard_items(args.hard)]
    return out


def done_keys(path: Path) -> set[tuple[str, str, str, str]]:
    if not path.exists():
        return set()
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {(r["set"], r["turn_id"], r["claim"], r["judge"]) for r in rows}


async def main_async(args: argparse.Namespace) -> int:
    from provenance_api.providers.scorer_llamacpp import LlamaCppScorer, LocalModel

    out = Path(args.out)
    todo = items_for(args)
    done = done_keys(out)
    local = LocalModel(args.model or model_path(small=args.small), n_ctx=args.n_ctx, n_threads=args.threads)
    scorer = LlamaCppScorer(local)
    started = time.perf_counter()
    try:
        for i, (item, judges) in enumerate(todo):
            wanted = [j for j in judges if (item.set, item.claim.turn_id, item.claim.claim, j) not in done]
            if not wanted:
                continue
            for row in await run_item(item, scorer, wanted, Path(args.rankings) if args.rankings else None):
                with out.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
                p = row["proxy"]
                print(
                    f"[{i + 1}/{len(todo)}] {row['set']:<8} {row['turn_id'][:26]:<26} {row['judge']:<9} "
                    f"judged {row['judged']['made']:>2} made · proxy {p['made']:>2} made "
                    f"({'confirmed' if p['confirmed'] else 'fallback'}) · top {p['top']} vs {row['judged']['top']}"
                    f" · local {row['local_seconds']:.0f} s · load {row['load']}",
                    flush=True,
                )
    finally:
        local.close()
    print(f"ran in {time.perf_counter() - started:.0f} s")
    code: int = report(out)
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="fixtures,tau,easy,hard")
    parser.add_argument("--tau", type=int, default=8, help="τ-bench claims")
    parser.add_argument("--tau-every", type=int, default=90, help="take every N-th τ-bench turn with a claim")
    parser.add_argument("--easy", type=int, default=32, help="easy planted turns (round-robin over kinds)")
    parser.add_argument("--hard", type=int, default=2, help="hard planted turns per subset (held-out split)")
    parser.add_argument("--model", help="a GGUF file (default: scripts/local-model.sh path)")
    parser.add_argument("--small", action="store_true", help="the 0.5B model (plumbing only)")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: every core)")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--report", action="store_true", help="print the tables of --out and exit")
    parser.add_argument("--rankings", help="a directory keeping each claim's proxy ranking (reused by a rerun)")
    args = parser.parse_args()
    if args.report:
        code: int = report(Path(args.out))
        return code
    return anyio.run(main_async, args)


if __name__ == "__main__":
    raise SystemExit(main())
