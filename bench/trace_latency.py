"""Wall time of one traced claim, in units of one model call's latency, against its lower bound.

Fixture (a) (8 sources, 3 layers) with a scripted judge that makes exactly one layer contribute, so
round 2 runs. Every call takes the same fixed latency. The lower bound is the larger of
  * the critical path: round 1, then round 2 (each ceil(calls / cap) latencies), with the span checks
    running alongside (a retried span check is two latencies in a row), and
  * the throughput floor: ceil(all calls / cap).
Target: within one call-latency of the lower bound at concurrency 6 and at (effectively) unlimited
concurrency. One untimed warm-up trace runs first (imports, compiled patterns, prompt files), then each
setting is timed ``--repeat`` times and the best run is compared (the median is printed beside it).

Run:  python bench/trace_latency.py [--latency 0.05] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.fence import split_fenced
from estimator.loo.judged import trace_claim
from estimator.params import DEFAULT_PARAMS, Params
from estimator.results.models import TraceResultModel
from estimator.seams.llm import LLMRequest, ScriptedLLM

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "eo_worldview_turn.json"
CLAIM = "Layer: MODIS Annual Land Cover Type (IGBP classification)."
SEARCH_HEADER = "search_worldview_layers("


def script(request: LLMRequest) -> str:
    """Judge: 9 while the catalogue search return is shown, else 1 — only the tools layer contributes.
    Span checks: the search return states the claim (a verifying quote); everything else is silent."""
    user = request.messages[-1].content
    if request.purpose == "judge":
        shown = split_fenced(user)[0]
        return "9" if any(block.startswith("\n" + SEARCH_HEADER) for block in shown) else "1"
    if split_fenced(user)[0][-1].startswith("\n" + SEARCH_HEADER):  # the source's region comes last
        return json.dumps(
            {
                "verdict": "supported",
                "confidence": 0.86,
                "reason": "states it",
                "evidence_quote": '"layer_id": "MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual"',
            }
        )
    return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.7, "reason": "-"})


@dataclass(frozen=True)
class Run:
    cap: int
    wall: float
    median: float
    lower_bound: int
    round1: int
    round2: int
    spans: int
    result: TraceResultModel


def lower_bound(round1: int, round2: int, spans: int, retried: int, cap: int) -> int:
    critical = math.ceil(round1 / cap) + (math.ceil(round2 / cap) if round2 else 0)
    span_chain = 2 if retried else (1 if spans else 0)
    return max(critical, span_chain, math.ceil((round1 + round2 + spans) / cap))


async def trace_one(llm: ScriptedLLM, query: str, corpus: Corpus, params: Params) -> TraceResultModel:
    return await trace_claim(llm, CLAIM, query, corpus, params=params)


def measure(corpus: Corpus, query: str, cap: int, latency: float, repeat: int) -> Run:
    params = DEFAULT_PARAMS.override({"concurrency": cap})
    walls: list[float] = []
    for _ in range(repeat):
        llm = ScriptedLLM(script, latency=latency)
        started = time.perf_counter()
        result = anyio.run(trace_one, llm, query, corpus, params)
        walls.append((time.perf_counter() - started) / latency)
    round1 = len(
        {
            frozenset(),
            frozenset(u.id for u in corpus.units),
            *(frozenset(u.id for u in corpus.in_layer(layer)) for layer in corpus.layers_present()),
        }
    )
    judged = sum(1 for c in llm.calls if c.purpose == "judge")
    spans = sum(1 for c in llm.calls if c.purpose == "support")
    retried = spans - sum(1 for s in result.sources if s.support is not None)
    bound = lower_bound(round1, judged - round1, spans, retried, cap)
    return Run(cap, min(walls), statistics.median(walls), bound, round1, judged - round1, spans, result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model call")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per setting (best is compared)")
    args = parser.parse_args()
    turn = StoredTurn.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    corpus = build_corpus(turn)
    measure(corpus, turn.effective_query(), 64, args.latency, 1)  # warm-up, untimed
    runs = [measure(corpus, turn.effective_query(), cap, args.latency, args.repeat) for cap in (6, 64)]
    first = runs[0].result
    print(
        f"fixture (a): {len(corpus)} sources, {len(corpus.layers_present())} layers; verdict "
        f"{first.verdict}, contributing {[x.value for x in first.contributing_layers]}; calls made "
        f"{first.calls.made} (planned {first.calls.planned}, saved {first.calls.saved}); "
        f"latency {args.latency * 1000:.0f} ms"
    )
    for run in runs:
        print(
            f"concurrency {run.cap:>2}: wall {run.wall:5.2f} call-latencies (median {run.median:5.2f}), "
            f"lower bound {run.lower_bound} (round 1 {run.round1} calls, round 2 {run.round2}, "
            f"span checks {run.spans} alongside)"
        )
    ok = all(run.wall <= run.lower_bound + 1 for run in runs)
    print(
        ("PASS" if ok else "FAIL") + ": within one call-latency of the lower bound in both settings"
        if ok
        else "FAIL: more than one call-latency above the lower bound in at least one setting"
    )


if __name__ == "__main__":
    main()
