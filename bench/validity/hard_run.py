"""The hard set's runner (``python bench/validity/run.py --set hard``): one row per turn in ``hard.jsonl``.

Per turn, on the local model in-process:

1. the log-probability trace through the one entry point (``estimator.trace.run_trace``) with the defaults:
   its verdict, top source, roles, warnings, calls and seconds (the product's behaviour);
2. the measurement table the calibration replays (``calibrate.py``): s(1), s(0), s(1 ⊖ L) for every layer,
   s(1 ⊖ u) for every source of a layer whose drop reaches the smallest τ of the sweep, and s with only u
   kept of its layer for the sources of such layers (measured for layers of up to ``WITHIN_MAX`` sources;
   for larger layers, and for the across-layer masks "only L", recorded where the trace itself asked for
   them). Every mask the trace already scored is answered from its calls (same messages, same claim), so
   the table costs only the masks the defaults did not ask for;
3. on the first ``--judged-sample`` turns (round-robin over the subsets: a stratified sample) the expected
   and judged digits too, with the span checks off as in the easy study.

``--add-judged N`` widens that sample after the fact: it runs the expected and judged digits on the first N
turns (same order) whose rows lack them, compares them with the row's recorded log-probability trace (the
same agreement figures as ``estimator.audit.agreement``, computed from the recorded drops), and rewrites
``hard.jsonl``. The recorded log-probability rows are not re-run, so they keep the thresholds they were
run with.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from calibrate import SWEEP_MIN_TAU, score_row
from hard_turns import HARD, SUBSETS, HardTurn

from estimator.audit.agreement import agreement, spearman, top_layer, top_source
from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.judge import Mask
from estimator.loo.logprob import build_messages
from estimator.loo.rounds import layer_mask, windowed_texts
from estimator.params import DEFAULT_PARAMS
from estimator.results.models import LayerScoreModel, SourceScoreModel, TraceResultModel
from estimator.seams.llm import LLM, Message
from estimator.seams.scorer import ScoredTarget, Scorer
from estimator.tokens import ApproxTokenizer
from estimator.trace import run_trace

WITHIN_MAX = 4
CUT_WORDS = ("HISTORY_MAX_MESSAGES", "HISTORY_TOKENS_PER_MESSAGE", "SOURCE_TOKEN_CAP", "scoring window")


@dataclass
class CachingScorer:
    """The scorer with its calls counted and its answers kept, keyed by (messages, claim)."""

    scorer: Scorer
    calls: int = 0
    seconds: float = 0.0
    answers: dict[tuple[tuple[Message, ...], str], ScoredTarget] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return self.scorer.model

    async def score(self, messages: Sequence[Message], target: str) -> ScoredTarget:
        key = (tuple(messages), target)
        if key not in self.answers:
            t0 = time.perf_counter()
            self.answers[key] = await self.scorer.score(messages, target)
            self.seconds += time.perf_counter() - t0
            self.calls += 1
        return self.answers[key]


def interleaved(turns: Sequence[HardTurn]) -> list[HardTurn]:
    by_kind: dict[str, list[HardTurn]] = {k: [] for k in SUBSETS}
    for t in turns:
        by_kind.setdefault(t.kind, []).append(t)
    out: list[HardTurn] = []
    for i in range(max((len(v) for v in by_kind.values()), default=0)):
        out.extend(v[i] for v in by_kind.values() if i < len(v))
    return out


def cause_units(t: HardTurn, corpus: Corpus) -> list[str]:
    return [u.id for u in corpus.units if any(c in u.text for c in t.causes)]


def cut_units(corpus: Corpus) -> list[str]:
    """Sources the estimator sees only in part (cut to a token budget)."""
    return [u.id for u in corpus.units if any("truncated" in x for x in u.evidence.transformations)]


def disclosed(result: TraceResultModel) -> bool:
    """The result says that part of the context was cut or left out."""
    return any(w in x for x in result.warnings for w in CUT_WORDS)


def truth(t: HardTurn, corpus: Corpus) -> dict[str, Any]:
    return {
        "turn_id": t.turn_id,
        "kind": t.kind,
        "split": t.split,
        "mechanism": t.mechanism,
        "claim": t.claim,
        "expected_verdict": t.expected_verdict,
        "causes": cause_units(t, corpus),
        "none_ok": t.none_ok,
        "cut_units": cut_units(corpus),
        "context_cut": bool(cut_units(corpus)) or any("HISTORY_MAX_MESSAGES" in w for w in corpus.warnings),
    }


def product(result: TraceResultModel, *, seconds: float, calls: int) -> dict[str, Any]:
    roles = {s.source_id: s.role for s in result.sources if s.role is not None}
    scored: tuple[LayerScoreModel | SourceScoreModel, ...] = (*result.layers, *result.sources)
    return {
        "verdict": result.verdict,
        "top_source": top_source(result),
        "top_layer": top_layer(result),
        "contributing": sorted(k for k, v in roles.items() if v in ("grounds", "redundant")),
        "roles": roles,
        "gamma": result.gamma,
        "s_all": result.s_all,
        "s_none": result.s_none,
        "layer_drops": {x.layer.value: x.delta for x in result.layers},
        "source_drops": {s.source_id: s.delta for s in result.sources if s.delta is not None},
        "disclosed": disclosed(result),
        "seconds": round(seconds, 2),
        "calls": calls,
        "no_information": sum(1 for x in scored if x.no_information),
    }


def table_masks(corpus: Corpus, layer_drops: dict[str, float]) -> dict[str, Mask]:
    """The masks of the measurement table (see the module docstring), by name."""
    everything = frozenset(u.id for u in corpus.units)
    masks: dict[str, Mask] = {"1": frozenset(), "0": everything}
    for layer in corpus.layers_present():
        masks[f"-{layer.value}"] = layer_mask(corpus, layer)
        masks[f"only {layer.value}"] = everything - layer_mask(corpus, layer)
    for layer in corpus.layers_present():
        drop = layer_drops.get(layer.value, math.nan)
        if math.isnan(drop) or abs(drop) < SWEEP_MIN_TAU:
            continue  # no τ of the sweep makes this layer contributing: round 2 never tests its sources
        units = corpus.in_layer(layer)
        for u in units:
            masks[f"-{u.id}"] = frozenset({u.id})
        if len(units) >= 2:
            for u in units:
                masks[f"in {u.id}"] = layer_mask(corpus, layer) - {u.id}
    return masks


async def run_one(t: HardTurn, llm: LLM, scorer: Scorer, with_judge: bool) -> dict[str, Any]:
    from run import SharedJudge

    turn = StoredTurn.model_validate(t.stored_turn())
    corpus = build_corpus(turn, DEFAULT_PARAMS)
    row = truth(t, corpus)
    row["units"] = {u.id: {"layer": u.layer.value, "ordinal": u.ordinal} for u in corpus.units}
    cached = CachingScorer(scorer)
    judge = SharedJudge(llm, False)
    t0 = time.perf_counter()
    outcome = await run_trace("logprob", t.claim, t.query, corpus, llm=judge, scorer=cached)
    seconds = time.perf_counter() - t0
    result = outcome.result
    row["logprob"] = product(result, seconds=seconds, calls=cached.calls)
    row["claim_tokens"] = getattr(result, "claim_tokens", 0)
    texts, _ = windowed_texts(corpus, DEFAULT_PARAMS, ApproxTokenizer())
    masks = table_masks(corpus, row["logprob"]["layer_drops"])
    t1, before = time.perf_counter(), cached.calls
    values: dict[str, float | None] = {}
    for name, mask in masks.items():
        key = (build_messages(corpus, t.query, mask, texts), t.claim)
        optional = name.startswith("only ") or (
            name.startswith("in ") and len(corpus.in_layer(corpus.by_id(name[3:]).layer)) > WITHIN_MAX
        )
        if optional and key not in cached.answers:
            values[name] = None  # recorded only where the defaults asked for it (see the module docstring)
            continue
        scored = await cached.score(*key)
        values[name] = scored.logprob_total
    row["masks"] = values
    row["table"] = {"calls": cached.calls - before, "seconds": round(time.perf_counter() - t1, 2)}
    if with_judge:
        results: dict[str, TraceResultModel] = {"logprob": result}
        for name in ("expected", "judged"):  # expected first: it pays for the judge calls judged reuses
            shared = judge
            before_calls = shared.model_calls
            requests = shared.requests
            t2 = time.perf_counter()
            got = await run_trace(name, t.claim, t.query, corpus, llm=shared)  # type: ignore[arg-type]
            results[name] = got.result
            row[name] = product(got.result, seconds=time.perf_counter() - t2, calls=shared.requests - requests)
            row[name]["model_calls"] = shared.model_calls - before_calls
        row["agreement"] = {
            f"{a}_vs_{b}": agreement(results[a], results[b]).to_dict()
            for a, b in (("judged", "logprob"), ("expected", "logprob"), ("judged", "expected"))
        }
    row["scored"] = {name: score_row(row, row[name]) for name in ("logprob", "expected", "judged") if name in row}
    return row


def recorded_agreement(judged: dict[str, Any], logprob: dict[str, Any]) -> dict[str, Any]:
    """``estimator.audit.agreement.agreement`` over two recorded rows (``product``'s dicts) instead of two results."""
    a, b = judged["source_drops"], logprob["source_drops"]
    common = [sid for sid in a if sid in b and not math.isnan(a[sid]) and not math.isnan(b[sid])]
    summary = ("verdict", "top_layer", "top_source")
    return {
        "same_verdict": judged["verdict"] == logprob["verdict"],
        "same_top_layer": judged["top_layer"] == logprob["top_layer"],
        "same_top_source": judged["top_source"] == logprob["top_source"],
        "spearman": spearman([a[s] for s in common], [b[s] for s in common]),
        "compared_sources": common,
        "judged": {k: judged[k] for k in summary},
        "logprob": {k: logprob[k] for k in summary},
    }


async def judge_row(t: HardTurn, row: dict[str, Any], llm: LLM) -> dict[str, Any]:
    """The expected and judged digits of one recorded row (see ``--add-judged``)."""
    from run import SharedJudge

    corpus = build_corpus(StoredTurn.model_validate(t.stored_turn()), DEFAULT_PARAMS)
    judge = SharedJudge(llm, False)
    results: dict[str, TraceResultModel] = {}
    for name in ("expected", "judged"):  # expected first: it pays for the judge calls judged reuses
        before_calls, requests, t0 = judge.model_calls, judge.requests, time.perf_counter()
        got = await run_trace(name, t.claim, t.query, corpus, llm=judge)
        results[name] = got.result
        row[name] = product(got.result, seconds=time.perf_counter() - t0, calls=judge.requests - requests)
        row[name]["model_calls"] = judge.model_calls - before_calls
    row["agreement"] = {
        "judged_vs_logprob": recorded_agreement(row["judged"], row["logprob"]),
        "expected_vs_logprob": recorded_agreement(row["expected"], row["logprob"]),
        "judged_vs_expected": agreement(results["judged"], results["expected"]).to_dict(),
    }
    row["scored"] = {name: score_row(row, row[name]) for name in ("logprob", "expected", "judged") if name in row}
    return row


def add_judged(args: Any, llm: LLM, path: Path) -> None:
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    by_id = {r["turn_id"]: r for r in rows}
    wanted = [t for t in interleaved(HARD) if t.turn_id in by_id and "judged" not in by_id[t.turn_id]]
    for t in wanted[: args.add_judged]:
        t0 = time.perf_counter()
        row = anyio.run(judge_row, t, by_id[t.turn_id], llm)
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        tmp.replace(path)  # rewritten after every turn, so a stopped run keeps what it measured
        print(
            f"{t.turn_id:16s} judged {row['judged']['verdict']:18s} top {row['judged']['top_source']!s:5s} "
            f"expected {row['expected']['verdict']:18s} top {row['expected']['top_source']!s:5s} "
            f"({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )


def run(args: Any, model_path: str) -> int:
    from hard_report import write_report

    from provenance_api.providers.llm_llamacpp import LlamaCppLLM
    from provenance_api.providers.scorer_llamacpp import LlamaCppScorer, LocalModel

    local = LocalModel(model_path, n_ctx=max(args.n_ctx, 4096))
    llm, scorer = LlamaCppLLM(local), LlamaCppScorer(local)
    turns = [t for t in HARD if not args.kinds or t.kind in args.kinds.split(",")]
    if args.per_kind:
        turns = [t for t in turns if [q for q in turns if q.kind == t.kind].index(t) < args.per_kind]
    order = interleaved(turns)[: args.limit]
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    path = out / "hard.jsonl"
    if getattr(args, "add_judged", 0):
        started = time.perf_counter()
        add_judged(args, llm, path)
        recorded = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        write_report(
            path, out, model=Path(model_path).name, wall_seconds=sum(r.get("wall_seconds", 0.0) for r in recorded)
        )
        print(f"judged sample widened in {(time.perf_counter() - started) / 60:.1f} min", flush=True)
        return 0
    done: dict[str, dict[str, Any]] = {}
    if args.resume and path.exists():
        done = {r["turn_id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if r}
    started = time.perf_counter()
    with open(path, "a" if args.resume else "w", encoding="utf-8") as fh:
        for i, t in enumerate(order):
            if t.turn_id in done:
                continue
            t0 = time.perf_counter()
            row = anyio.run(run_one, t, llm, scorer, i < args.judged_sample)
            row["wall_seconds"] = round(time.perf_counter() - t0, 2)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            lp = row["logprob"]
            print(
                f"{t.turn_id:16s} {t.split:7s} {lp['verdict']:18s} top {lp['top_source']!s:5s} "
                f"Γ {lp['gamma']:7.2f} ok {row['scored']['logprob']['verdict_ok']!s:5s} "
                f"{row['scored']['logprob']['top_ok']!s:5s} ({row['wall_seconds']:.0f} s; table "
                f"{row['table']['calls']} calls)",
                flush=True,
            )
    wall = time.perf_counter() - started
    write_report(path, out, model=Path(model_path).name, wall_seconds=wall)
    return 0
