"""Model calls per traced claim against the seed's formula, on the fixtures and on τ-bench turns.

The formula is the cost gate's plan, (|L| + 2) + (d' + 2) + 2·d'' with d' = d'' = min(d, MAX_SOURCES):
the worst case (every source a round-2 candidate, every span check retried). A trace runs with a
scripted judge (one source carries the claim: its layer contributes, round 2 runs) and the calls it
makes and saves (answered from the per-trace memo) are counted.

    python bench/calls_per_claim.py [--data PATH] [--max-claims 150]

Target: made ≤ planned for every claim (the verdict line), with the mean made / planned printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import anyio
from tau_turns import tau_turns  # a sibling module: this script's directory is on sys.path

from estimator.attribution import trace_claim
from estimator.corpus import build_corpus
from estimator.fence import FENCE
from estimator.gating import gate_turn
from estimator.llm import LLMRequest, ScriptedLLM
from estimator.segment import segment_response
from estimator.turn import StoredTurn
from estimator.units import Corpus

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ("eo_worldview_turn.json", "failures_turn.json", "fallback_path_turn.json", "ndvi_parametric_turn.json")
DEFAULT_DATA = ROOT / "tests" / "data" / "tau-bench" / "airline-gpt-4o-dev.json"


def keyed_script(key: str) -> ScriptedLLM:
    """Judge: 9 while a source holding ``key`` is shown, else 2. Span check: supported (quoting the key)
    where the source holds it, else silent."""

    def script(request: LLMRequest) -> str:
        user = request.messages[-1].content
        data = "\n".join(user.split(FENCE)[1::2])
        if request.purpose == "judge":
            return "9" if key in data else "2"
        if key in data:
            return json.dumps({"verdict": "supported", "evidence_quote": key, "confidence": 0.9, "reason": "-"})
        return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.8, "reason": "-"})

    return ScriptedLLM(script)


def key_for(corpus: Corpus) -> str:
    """A phrase only the most recent tool return (else the last source) holds, early in its text."""
    units = list(corpus.tool_units()) or list(corpus.units)
    for unit in reversed(units):
        for line in unit.text[:1500].split("\n"):
            phrase = line.strip()[:32]
            if len(phrase) >= 12 and sum(phrase in u.text for u in corpus.units) == 1:
                return phrase
    return "a phrase no source holds 5c1e"


@dataclass(frozen=True)
class Row:
    planned: int
    made: int
    saved: int
    verdict: str


async def trace_turn(turn: StoredTurn, max_claims: int) -> list[Row]:
    corpus = build_corpus(turn)
    if not corpus.units:
        return []
    report = gate_turn(corpus, segment_response(turn.response))
    rows: list[Row] = []
    for gate in report.segments:
        if not gate.traceable or len(rows) >= max_claims:
            continue
        result = await trace_claim(keyed_script(key_for(corpus)), gate.segment.text, turn.effective_query(), corpus)
        rows.append(Row(result.calls.planned, result.calls.made, result.calls.saved, result.verdict))
    return rows


def summarise(name: str, rows: list[Row]) -> bool:
    if not rows:
        print(f"{name}: no traceable claims")
        return True
    ratio = statistics.mean(r.made / r.planned for r in rows)
    verdicts: dict[str, int] = {}
    for r in rows:
        verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
    print(f"{name}: {len(rows)} claims · planned {statistics.mean(r.planned for r in rows):.1f} · "
          f"made {statistics.mean(r.made for r in rows):.1f} · saved {statistics.mean(r.saved for r in rows):.1f} "
          f"(per claim, mean) · made/planned {ratio:.2f} · max made−planned "
          f"{max(r.made - r.planned for r in rows)} · verdicts {verdicts}")
    return all(r.made <= r.planned for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a τ-bench results file")
    parser.add_argument("--max-claims", type=int, default=150, help="τ-bench claims to trace")
    args = parser.parse_args()
    ok = True
    fixture_rows: list[Row] = []
    for name in FIXTURES:
        turn = StoredTurn.model_validate_json((ROOT / "fixtures" / name).read_text(encoding="utf-8"))
        rows = anyio.run(trace_turn, turn, 10)
        ok &= summarise(f"fixture {name}", rows)
        fixture_rows += rows
    ok &= summarise("fixtures, all", fixture_rows)
    if args.data.exists():
        tau_rows: list[Row] = []
        for turn in tau_turns(args.data):
            if len(tau_rows) >= args.max_claims:
                break
            tau_rows += anyio.run(trace_turn, turn, args.max_claims - len(tau_rows))
        ok &= summarise("τ-bench airline", tau_rows)
    else:
        print(f"τ-bench data not found at {args.data}: skipped")
    print(("PASS" if ok else "FAIL") + ": calls made ≤ the formula's plan for every traced claim")


if __name__ == "__main__":
    main()
