"""Validation study: both estimators on the planted-cause suite, on a local model in-process.

    python bench/validity/run.py [--model FILE.gguf] [--limit N] [--kinds tool,rule,...] [--with-spans]

Without ``--model`` the model comes from ``scripts/local-model.sh path`` (built once, cached). Reports
each estimator's top-source accuracy (single-cause turns: the planted source; redundant turns: either
carrier, or none; knowledge turns: none) and Γ-verdict accuracy against the planted truth, their
agreement, and seconds and model calls per turn. Span checks do not enter either measure, so they are
answered "silent" without a model call unless ``--with-spans`` (they would dominate the run time).
Writes ``results.jsonl`` and ``RESULTS.md`` beside this file (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from turns import SUITE, Planted  # noqa: E402

from estimator.agreement import agreement, top_layer, top_source  # noqa: E402
from estimator.attribution import trace_claim  # noqa: E402
from estimator.corpus import build_corpus  # noqa: E402
from estimator.llm import LLM, LLMRequest, LLMResponse  # noqa: E402
from estimator.logprob import trace_logprob  # noqa: E402
from estimator.params import DEFAULT_PARAMS  # noqa: E402
from estimator.result import TraceResult  # noqa: E402
from estimator.turn import StoredTurn  # noqa: E402
from estimator.units import Corpus  # noqa: E402

SILENT = '{"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "span checks off in the study"}'


class JudgeOnly:
    """Forwards judge calls to the model; answers span checks 'silent' without a call (see the module doc)."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.judge_calls = 0

    @property
    def model(self) -> str:
        return self.llm.model

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if request.purpose == "support":
            return LLMResponse(text=SILENT, model=self.llm.model)
        self.judge_calls += 1
        return await self.llm.complete(request)


def causes(p: Planted, corpus: Corpus) -> set[str]:
    return {u.id for u in corpus.units if any(c in u.text for c in p.cause)}


def correct_top(p: Planted, corpus: Corpus, result: TraceResult) -> bool:
    top = top_source(result)
    if p.kind == "knowledge":
        return top is None
    if p.kind == "redundant":
        return top is None or top in causes(p, corpus)
    return top in causes(p, corpus)


def default_model() -> str:
    out = subprocess.run([str(ROOT / "scripts" / "local-model.sh"), "path"], check=True, capture_output=True,
                         text=True)
    return out.stdout.strip().splitlines()[-1]


async def run_one(p: Planted, llm: Any, scorer: Any, with_spans: bool) -> dict[str, Any]:
    turn = StoredTurn.model_validate(p.stored_turn())
    corpus = build_corpus(turn, DEFAULT_PARAMS)
    judge = llm if with_spans else JudgeOnly(llm)
    t0 = time.perf_counter()
    judged = await trace_claim(judge, p.claim, p.query, corpus)
    t1 = time.perf_counter()
    logprob = await trace_logprob(scorer, llm if with_spans else None, p.claim, p.query, corpus,
                                  supports=None if with_spans else {})
    t2 = time.perf_counter()
    agree = agreement(judged, logprob)
    row: dict[str, Any] = {"turn_id": p.turn_id, "kind": p.kind, "expected_verdict": p.expected_verdict,
                           "expected_layer": p.expected_layer, "causes": sorted(causes(p, corpus)),
                           "agreement": agree.to_dict()}
    for name, result, seconds in (("judged", judged, t1 - t0), ("logprob", logprob, t2 - t1)):
        drops = {s.source_id: s.delta for s in result.sources if s.delta is not None}
        row[name] = {
            "verdict": result.verdict, "verdict_ok": result.verdict == p.expected_verdict,
            "top_layer": top_layer(result), "top_source": top_source(result),
            "top_ok": correct_top(p, corpus, result), "gamma": result.gamma, "s_all": result.s_all,
            "s_none": result.s_none, "layer_drops": {x.layer.value: x.delta for x in result.layers},
            "source_drops": drops, "seconds": round(seconds, 2),
            "calls": judge.judge_calls if name == "judged" and isinstance(judge, JudgeOnly) else result.calls.made,
        }
    return row


def _pct(rows: Sequence[dict[str, Any]], est: str, key: str) -> str:
    if not rows:
        return "–"
    ok = sum(1 for r in rows if r[est][key])
    return f"{ok}/{len(rows)} ({100 * ok / len(rows):.0f} %)"


def table(rows: list[dict[str, Any]], model: str) -> str:
    kinds = ["tool", "rule", "history", "redundant", "knowledge"]
    lines = [f"Model: `{model}` (in-process, CPU). Turns: {len(rows)}.", "",
             "| subset | n | top source: judged | top source: logprob | Γ-verdict: judged | Γ-verdict: logprob |",
             "|---|---|---|---|---|---|"]
    for subset in [*kinds, "single-cause (tool+rule+history)", "all"]:
        if subset == "all":
            sel = rows
        elif subset.startswith("single"):
            sel = [r for r in rows if r["kind"] in ("tool", "rule", "history")]
        else:
            sel = [r for r in rows if r["kind"] == subset]
        if not sel:
            continue
        lines.append(f"| {subset} | {len(sel)} | {_pct(sel, 'judged', 'top_ok')} | {_pct(sel, 'logprob', 'top_ok')} "
                     f"| {_pct(sel, 'judged', 'verdict_ok')} | {_pct(sel, 'logprob', 'verdict_ok')} |")
    n = len(rows)
    same_v = sum(r["agreement"]["same_verdict"] for r in rows)
    same_l = sum(r["agreement"]["same_top_layer"] for r in rows)
    same_s = sum(r["agreement"]["same_top_source"] for r in rows)
    rhos = [r["agreement"]["spearman"] for r in rows if r["agreement"]["spearman"] is not None]
    mean_rho = sum(rhos) / len(rhos) if rhos else float("nan")
    lines += ["", "| agreement (judged vs logprob) | value |", "|---|---|",
              f"| same verdict | {same_v}/{n} |", f"| same top layer | {same_l}/{n} |",
              f"| same top source | {same_s}/{n} |",
              f"| Spearman ρ of source drops (mean over {len(rhos)} turns with ≥ 2 shared, non-constant drops) "
              f"| {mean_rho:+.2f} |"]
    lines += ["", "| cost per turn (mean) | judged | logprob |", "|---|---|---|"]
    for key, unit in (("seconds", "s"), ("calls", "calls")):
        j = sum(r["judged"][key] for r in rows) / n
        lp = sum(r["logprob"][key] for r in rows) / n
        lines.append(f"| {key} | {j:.1f} {unit} | {lp:.1f} {unit} |")
    single = [r for r in rows if r["kind"] in ("tool", "rule", "history")]
    margins = []
    for r in single:
        drops = r["logprob"]["source_drops"]
        cause = [drops[c] for c in r["causes"] if c in drops and drops[c] is not None]
        other = [abs(v) for k, v in drops.items() if k not in r["causes"] and v is not None]
        if cause:
            margins.append((max(cause), max(other, default=0.0)))
    if margins:
        lines += ["", f"Logprob, single-cause turns with round 2: cause drop {min(m[0] for m in margins):.1f}–"
                  f"{max(m[0] for m in margins):.1f} nats; largest other |drop| {max(m[1] for m in margins):.1f} nats; "
                  f"cause dominates in {sum(m[0] > m[1] for m in margins)}/{len(margins)}."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="GGUF file (default: scripts/local-model.sh path)")
    ap.add_argument("--limit", type=int, help="first N turns only")
    ap.add_argument("--per-kind", type=int, help="first N turns of each kind only (a stratified subset)")
    ap.add_argument("--kinds", help="comma-separated subset of tool,rule,history,redundant,knowledge")
    ap.add_argument("--with-spans", action="store_true", help="run the span checks on the model too")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args(argv)

    from provenance_api.llm_llamacpp import LlamaCppLLM
    from provenance_api.scorer_llamacpp import LlamaCppScorer, LocalModel

    path = args.model or default_model()
    local = LocalModel(path, n_ctx=args.n_ctx)
    llm, scorer = LlamaCppLLM(local), LlamaCppScorer(local)
    suite = [p for p in SUITE if not args.kinds or p.kind in args.kinds.split(",")]
    if args.per_kind:
        suite = [p for p in suite if [q.kind for q in suite].index(p.kind) + args.per_kind > suite.index(p)]
    suite = suite[: args.limit]
    rows: list[dict[str, Any]] = []
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "results.jsonl", "w", encoding="utf-8") as fh:
        for p in suite:
            row = anyio.run(run_one, p, llm, scorer, args.with_spans)
            rows.append(row)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(f"{p.turn_id:14s} judged {row['judged']['verdict']:18s} top {row['judged']['top_source']!s:5s} "
                  f"({row['judged']['seconds']:.0f} s) | logprob {row['logprob']['verdict']:18s} top "
                  f"{row['logprob']['top_source']!s:5s} Γ {row['logprob']['gamma']:7.1f} "
                  f"({row['logprob']['seconds']:.0f} s)", flush=True)
    text = table(rows, Path(path).name)
    command = "python bench/validity/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    (args.out / "RESULTS.md").write_text("# Validation study: judged vs log-probability estimator\n\n"
                                         f"Command: `{command.strip()}`\n\n" + text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
