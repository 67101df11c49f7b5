"""Model calls per traced claim, before and after redundancy resolution, on the fixtures and τ-bench turns.

The plan is the cost gate's worst case, (|L| + 2) + (d' + 2) + d' + 2·d'' with d' = d'' = min(d,
MAX_SOURCES); the d' term is redundancy resolution (the seed's formula has no such term: "before").
Each traceable claim is traced twice with the same scripted judge, with redundancy resolution off
(before) and on (after), and the calls made, saved (memo) and refused are counted. Two judges:

* ``one-source``: one source (the latest tool return's distinctive phrase) carries the claim;
* ``claim-ids``: the claim holds while any present source holds one of the claim's identifiers
  (tokens with a digit or an underscore, else its longest word) — redundancy occurs wherever agent
  turns repeat an id across tool returns, as they do.

    python bench/calls_per_claim.py [--data PATH] [--max-claims 150]

Target: made ≤ planned and nothing refused for every claim (the verdict line); the ratio after/before
of calls made is the cost of redundancy resolution, and "resolved" counts the claims whose layer
grounds them with every source drop at zero (the misleading case) that now name their redundant sources.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
from tau_turns import tau_turns  # a sibling module: this script's directory is on sys.path

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.fence import split_fenced
from estimator.free_tier.gating import gate_turn
from estimator.free_tier.segment import segment_response
from estimator.loo.judged import trace_claim
from estimator.results.models import TraceResultModel
from estimator.seams.llm import LLMRequest, ScriptedLLM

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = (
    "eo_worldview_turn.json",
    "failures_turn.json",
    "fallback_path_turn.json",
    "ndvi_parametric_turn.json",
    "redundant_sources_turn.json",
)
DEFAULT_DATA = ROOT / "tests" / "data" / "tau-bench" / "airline-gpt-4o-dev.json"


def keyed_script(holds: Callable[[str], bool], key: str) -> ScriptedLLM:
    """Judge: 9 while ``holds`` of the data shown, else 2. Span check: supported (quoting ``key``) where the
    source holds it, else silent."""

    def script(request: LLMRequest) -> str:
        user = request.messages[-1].content
        data = "\n".join(split_fenced(user)[0][1:])  # the claim's region comes first
        if request.purpose == "judge":
            return "9" if holds(data) else "2"
        if key and key in data:
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


def claim_ids(claim: str) -> list[str]:
    tokens = [t.strip(".,;:()[]'\"") for t in claim.split()]
    ids = [t for t in tokens if len(t) >= 4 and (any(c.isdigit() for c in t) or "_" in t)]
    return ids or sorted(tokens, key=len)[-1:]


@dataclass(frozen=True)
class Row:
    planned: int
    made: int
    saved: int
    refused: int
    verdict: str
    redundant: int  # sources with role "redundant"
    misleading: bool  # a layer grounds, no tested source of it does (every drop reads zero)


def row(result: TraceResultModel) -> Row:
    grounding = {x.layer for x in result.layers if x.role == "grounds"}
    tested = [s for s in result.sources if s.delta is not None and s.layer in grounding]
    by_layer = {layer: [s for s in tested if s.layer == layer] for layer in grounding}
    misleading = any(len(v) >= 2 and not any(s.role == "grounds" for s in v) for v in by_layer.values())
    return Row(
        result.calls.planned,
        result.calls.made,
        result.calls.saved,
        result.calls.refused,
        result.verdict,
        sum(1 for s in result.sources if s.role == "redundant"),
        misleading,
    )


async def trace_turn(turn: StoredTurn, max_claims: int, judge: str) -> list[tuple[Row, Row]]:
    corpus = build_corpus(turn)
    if not corpus.units:
        return []
    report = gate_turn(corpus, segment_response(turn.response))
    rows: list[tuple[Row, Row]] = []
    for gate in report.segments:
        if not gate.traceable or len(rows) >= max_claims:
            continue
        claim = gate.segment.text
        if judge == "one-source":
            key = key_for(corpus)

            def holds_key(data: str, k: str = key) -> bool:
                return k in data

            llm = partial(keyed_script, holds_key, key)
        else:
            ids = claim_ids(claim)

            def holds_an_id(data: str, ids: list[str] = ids) -> bool:
                return any(i in data for i in ids)

            llm = partial(keyed_script, holds_an_id, ids[0] if ids else "")
        pair = []
        for resolve in (False, None):  # off, then as planned (on unless it would pass MAX_CALLS)
            result = await trace_claim(llm(), claim, turn.effective_query(), corpus, resolve_redundancy=resolve)
            pair.append(row(result))
        rows.append((pair[0], pair[1]))
    return rows


def summarise(name: str, pairs: list[tuple[Row, Row]]) -> bool:
    if not pairs:
        print(f"{name}: no traceable claims")
        return True
    before = [b for b, _ in pairs]
    after = [a for _, a in pairs]
    made_b = statistics.mean(r.made for r in before)
    made_a = statistics.mean(r.made for r in after)
    misleading = sum(1 for b in before if b.misleading)
    resolved = sum(1 for b, a in pairs if b.misleading and a.redundant)
    print(
        f"{name}: {len(pairs)} claims · planned {statistics.mean(r.planned for r in after):.1f} · made before "
        f"{made_b:.1f} · after {made_a:.1f} · after/before {made_a / made_b:.2f} · saved after "
        f"{statistics.mean(r.saved for r in after):.1f} · every drop zero in a grounding layer: {misleading} · "
        f"resolved: {resolved} · redundant sources named: {sum(r.redundant for r in after)} · refused "
        f"{sum(r.refused for r in after)} · max made−planned {max(r.made - r.planned for r in after)}"
    )
    return all(r.made <= r.planned and r.refused == 0 for r in (*before, *after))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a τ-bench results file")
    parser.add_argument("--max-claims", type=int, default=150, help="τ-bench claims to trace")
    args = parser.parse_args()
    ok = True
    for judge in ("one-source", "claim-ids"):
        print(f"== judge: {judge}")
        fixture_rows: list[tuple[Row, Row]] = []
        for name in FIXTURES:
            turn = StoredTurn.model_validate_json((ROOT / "fixtures" / name).read_text(encoding="utf-8"))
            rows = anyio.run(trace_turn, turn, 10, judge)
            ok &= summarise(f"fixture {name}", rows)
            fixture_rows += rows
        ok &= summarise("fixtures, all", fixture_rows)
        if args.data.exists():
            tau_rows: list[tuple[Row, Row]] = []
            for turn in tau_turns(args.data):
                if len(tau_rows) >= args.max_claims:
                    break
                tau_rows += anyio.run(trace_turn, turn, args.max_claims - len(tau_rows), judge)
            ok &= summarise("τ-bench airline", tau_rows)
        else:
            print(f"τ-bench data not found at {args.data}: skipped")
    print(("PASS" if ok else "FAIL") + ": calls made ≤ the plan and none refused, for every traced claim")


if __name__ == "__main__":
    main()
