"""Validation study: the judged digit, the expected digit and the log-probability on the planted-cause suite,
on a local model in-process.

    python bench/validity/run.py [--model FILE.gguf] [--limit N] [--per-kind N] [--kinds tool,rule,...]
                                 [--with-spans]
    python bench/validity/run.py --rerun-logprob     # the log-probability traces again, judged rows as recorded
    python bench/validity/run.py --set hard [--judged-sample N] [--limit N] [--resume] [--add-judged N]   # HARD.md

``--set easy`` (the default) is the 32-turn suite of ``turns.py`` described here; ``--set hard`` runs the
generated hard set of ``hard_turns.py`` through ``hard_run.py`` and writes ``hard.jsonl``, ``HARD.md`` and
its plots (see README.md).

Without ``--model`` the model comes from ``scripts/local-model.sh path`` (built once, cached). Every
estimator runs through the one trace entry point (``estimator.trace.run_trace``) on the same turns.
Reports each estimator's top-source accuracy (single-cause turns: the planted source; redundant turns:
either carrier, or none; knowledge turns: none) and Γ-verdict accuracy against the planted truth, their
pairwise agreement, zero drops (ties with s(1)), and seconds and model calls per turn.

The judged and expected traces share their judge calls: each distinct judge prompt of a turn is sent to
the model once, asking for the top log-probabilities of its answer; the judged digit is that answer's text
(the argmax at temperature 0) and the expected digit is read from its alternatives — the same call gives
both. The expected trace runs first and pays for the calls; the judged trace is answered from them (a
prompt only the judged trace asks for is sent then). Span checks do not enter any measure, so they are
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from report import ESTIMATORS, PAIRS, table  # noqa: E402
from turns import SUITE, Planted  # noqa: E402

from estimator.audit.agreement import agreement, top_layer, top_source  # noqa: E402
from estimator.corpus.build import build_corpus  # noqa: E402
from estimator.corpus.turn import StoredTurn  # noqa: E402
from estimator.corpus.units import Corpus  # noqa: E402
from estimator.loo.measure import TOP_LOGPROBS  # noqa: E402
from estimator.params import DEFAULT_PARAMS  # noqa: E402
from estimator.results.models import LayerScoreModel, SourceScoreModel, TraceResultModel  # noqa: E402
from estimator.seams.llm import LLM, LLMRequest, LLMResponse, Message  # noqa: E402
from estimator.seams.scorer import ScoredTarget, Scorer  # noqa: E402
from estimator.trace import run_trace  # noqa: E402

SILENT = '{"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "span checks off in the study"}'


@dataclass
class SharedJudge:
    """The judge calls of one turn, shared by the judged and expected traces (see the module doc).

    ``requests`` counts what the traces asked for; ``model_calls`` what went to the model. Span checks
    are answered "silent" without a call unless ``with_spans``."""

    llm: LLM
    with_spans: bool = False
    answers: dict[tuple[tuple[Message, ...], int | None], LLMResponse] = field(default_factory=dict)
    requests: int = 0
    model_calls: int = 0

    @property
    def model(self) -> str:
        return self.llm.model

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if request.purpose == "support":
            if not self.with_spans:
                return LLMResponse(text=SILENT, model=self.llm.model)
            return await self._call(request)
        self.requests += 1
        key = (request.messages, request.max_tokens)
        found = self.answers.get(key)
        if found is not None and request.deterministic:
            return found
        response = await self._call(replace(request, top_logprobs=TOP_LOGPROBS))
        if request.deterministic:
            self.answers[key] = response
        return response

    async def _call(self, request: LLMRequest) -> LLMResponse:
        self.model_calls += 1
        return await self.llm.complete(request)


@dataclass
class TimedScorer:
    """The scorer, with its calls counted."""

    scorer: Scorer
    model_calls: int = 0

    @property
    def model(self) -> str:
        return self.scorer.model

    async def score(self, messages: Sequence[Message], target: str) -> ScoredTarget:
        self.model_calls += 1
        return await self.scorer.score(messages, target)


def causes(p: Planted, corpus: Corpus) -> set[str]:
    return {u.id for u in corpus.units if any(c in u.text for c in p.cause)}


def correct_top(p: Planted, corpus: Corpus, result: TraceResultModel) -> bool:
    top = top_source(result)
    if p.kind == "knowledge":
        return top is None
    if p.kind == "redundant":
        return top is None or top in causes(p, corpus)
    return top in causes(p, corpus)


def interleaved(suite: Sequence[Planted]) -> list[Planted]:
    """Round-robin over the kinds (tool-01, rule-01, history-01, …, tool-02, …): a run stopped early, or
    ``--limit N``, is a stratified subset."""
    by_kind: dict[str, list[Planted]] = {}
    for p in suite:
        by_kind.setdefault(p.kind, []).append(p)
    out: list[Planted] = []
    for i in range(max((len(v) for v in by_kind.values()), default=0)):
        out.extend(v[i] for v in by_kind.values() if i < len(v))
    return out


def default_model() -> str:
    out = subprocess.run([str(ROOT / "scripts" / "local-model.sh"), "path"], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def summary(
    p: Planted, corpus: Corpus, result: TraceResultModel, *, seconds: float, requests: int, model_calls: int
) -> dict[str, Any]:
    drops = {s.source_id: s.delta for s in result.sources if s.delta is not None}
    scored: tuple[LayerScoreModel | SourceScoreModel, ...] = (*result.layers, *result.sources)
    return {
        "verdict": result.verdict,
        "verdict_ok": result.verdict == p.expected_verdict,
        "top_layer": top_layer(result),
        "top_source": top_source(result),
        "top_ok": correct_top(p, corpus, result),
        "gamma": result.gamma,
        "s_all": result.s_all,
        "s_none": result.s_none,
        "layer_drops": {x.layer.value: x.delta for x in result.layers},
        "source_drops": drops,
        "roles": {s.source_id: s.role for s in result.sources if s.role is not None},
        "seconds": round(seconds, 2),
        "calls": requests,
        "model_calls": model_calls,
        "no_information": sum(1 for x in scored if x.no_information),
    }


async def run_one(p: Planted, llm: LLM, scorer: Scorer, with_spans: bool) -> dict[str, Any]:
    turn = StoredTurn.model_validate(p.stored_turn())
    corpus = build_corpus(turn, DEFAULT_PARAMS)
    judge = SharedJudge(llm, with_spans)
    timed = TimedScorer(scorer)
    results: dict[str, TraceResultModel] = {}
    row: dict[str, Any] = {
        "turn_id": p.turn_id,
        "kind": p.kind,
        "expected_verdict": p.expected_verdict,
        "expected_layer": p.expected_layer,
        "causes": sorted(causes(p, corpus)),
    }
    for name in ESTIMATORS:  # expected first: it pays for the judge calls the judged trace reuses
        before = (judge.requests, judge.model_calls, timed.model_calls)
        t0 = time.perf_counter()
        outcome = await run_trace(
            name, p.claim, p.query, corpus, llm=judge, scorer=timed if name == "logprob" else None
        )
        seconds = time.perf_counter() - t0  # wall time: the trace's calls overlap, the model serialises them
        results[name] = outcome.result
        if name == "logprob":
            requests = calls = timed.model_calls - before[2]
        else:
            requests, calls = judge.requests - before[0], judge.model_calls - before[1]
        row[name] = summary(p, corpus, outcome.result, seconds=seconds, requests=requests, model_calls=calls)
    row["agreement"] = {f"{a}_vs_{b}": agreement(results[a], results[b]).to_dict() for a, b in PAIRS}
    return row


async def rerun_logprob(p: Planted, row: dict[str, Any], llm: LLM, scorer: Scorer) -> None:
    """Only the log-probability trace of a recorded row, again (e.g. after its thresholds changed); the judged
    and expected rows stay as recorded and the agreement with them is recomputed from the recorded drops."""
    from hard_run import recorded_agreement

    corpus = build_corpus(StoredTurn.model_validate(p.stored_turn()), DEFAULT_PARAMS)
    timed = TimedScorer(scorer)
    t0 = time.perf_counter()
    outcome = await run_trace(
        "logprob",
        p.claim,
        p.query,
        corpus,
        llm=SharedJudge(llm, False),
        scorer=timed,
    )
    row["logprob"] = summary(
        p,
        corpus,
        outcome.result,
        seconds=time.perf_counter() - t0,
        requests=timed.model_calls,
        model_calls=timed.model_calls,
    )
    for a, b in PAIRS:
        if "logprob" in (a, b):
            row["agreement"][f"{a}_vs_{b}"] = recorded_agreement(row[a], row[b])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="GGUF file (default: scripts/local-model.sh path)")
    ap.add_argument("--limit", type=int, help="first N turns only")
    ap.add_argument("--per-kind", type=int, help="first N turns of each kind only (a stratified subset)")
    ap.add_argument("--kinds", help="comma-separated subset of tool,rule,history,redundant,knowledge")
    ap.add_argument("--with-spans", action="store_true", help="run the span checks on the model too")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--set", choices=("easy", "hard"), default="easy", help="the planted-cause set (default easy)")
    ap.add_argument(
        "--judged-sample",
        type=int,
        default=8,
        help="hard set: run the judged and expected digits on the first N turns too (default 8)",
    )
    ap.add_argument("--resume", action="store_true", help="hard set: keep the turns already in hard.jsonl")
    ap.add_argument(
        "--add-judged",
        type=int,
        default=0,
        metavar="N",
        help="hard set: run the judged and expected digits on the first N recorded turns that lack "
        "them (the log-probability rows are kept as recorded)",
    )
    ap.add_argument(
        "--rerun-logprob",
        action="store_true",
        help="easy set: run only the log-probability traces of results.jsonl again (judged and "
        "expected rows kept as recorded)",
    )
    args = ap.parse_args(argv)
    if args.set == "hard":
        from hard_run import run as run_hard

        code: int = run_hard(args, args.model or default_model())
        return code

    from provenance_api.providers.llm_llamacpp import LlamaCppLLM
    from provenance_api.providers.scorer_llamacpp import LlamaCppScorer, LocalModel

    path = args.model or default_model()
    local = LocalModel(path, n_ctx=args.n_ctx)
    llm, scorer = LlamaCppLLM(local), LlamaCppScorer(local)
    if args.rerun_logprob:
        recorded = [json.loads(x) for x in (args.out / "results.jsonl").read_text(encoding="utf-8").splitlines() if x]
        by_id = {p.turn_id: p for p in SUITE}
        for row in recorded:
            anyio.run(rerun_logprob, by_id[row["turn_id"]], row, llm, scorer)
            print(
                f"{row['turn_id']:14s} logprob {row['logprob']['verdict']:18s} top "
                f"{row['logprob']['top_source']!s:5s} Γ {row['logprob']['gamma']:6.2f}",
                flush=True,
            )
        (args.out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recorded), encoding="utf-8")
        text = table(recorded, Path(path).name, wall_seconds=None)
        (args.out / "RESULTS.md").write_text(
            "# Validation study: judged digit vs expected digit vs log-probability\n\n"
            "Command: `python bench/validity/run.py`, then `python bench/validity/run.py --rerun-logprob` (the "
            "log-probability traces again with the thresholds the hard set calibrated; the judged and expected "
            "rows as first recorded)\n\n" + text,
            encoding="utf-8",
        )
        print(text)
        return 0
    chosen = [p for p in SUITE if not args.kinds or p.kind in args.kinds.split(",")]
    if args.per_kind:
        chosen = [p for p in chosen if [q for q in chosen if q.kind == p.kind].index(p) < args.per_kind]
    suite = interleaved(chosen)
    suite = suite[: args.limit]
    rows: list[dict[str, Any]] = []
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(args.out / "results.jsonl", "w", encoding="utf-8") as fh:
        for p in suite:
            row = anyio.run(run_one, p, llm, scorer, args.with_spans)
            rows.append(row)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(
                f"{p.turn_id:14s} "
                + " | ".join(
                    f"{name} {row[name]['verdict']:18s} top {row[name]['top_source']!s:5s} Γ {row[name]['gamma']:6.2f}"
                    for name in ESTIMATORS
                )
                + f"  ({sum(row[n]['seconds'] for n in ESTIMATORS):.0f} s)",
                flush=True,
            )
    wall = time.perf_counter() - started
    text = table(rows, Path(path).name, wall_seconds=wall)
    command = "python bench/validity/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    (args.out / "RESULTS.md").write_text(
        "# Validation study: judged digit vs expected digit vs log-probability\n\n"
        f"Command: `{command.strip()}`\n\n" + text,
        encoding="utf-8",
    )
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
