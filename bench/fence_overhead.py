"""Prompt tokens the claim and query data regions add to the calls of a trace, and whether every mask of a
trace still shares one prompt prefix (what automatic prompt caching needs).

Each turn's first sentence is the claim; the full-context judge request and every source's span check are
rendered as the trace sends them, and again in the same run with the claim and query written bare (the
baseline: the layout before they were fenced). Tokens are counted with the project's offline tokenizer.

    python bench/fence_overhead.py [--data PATH] [--max-turns 300]

Target: the judge requests of one trace share everything up to the first source (one marker per trace),
for every turn (the verdict line); the token overhead is printed as a ratio.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Iterable
from pathlib import Path

from tau_turns import tau_turns  # a sibling module: this script's directory is on sys.path

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.fence import Fence
from estimator.free_tier.segment import segment_response
from estimator.judge import build_judge_request, cut_to_budget
from estimator.params import DEFAULT_PARAMS
from estimator.seams.llm import LLMRequest
from estimator.spans.support import build_support_request
from estimator.tokens import ApproxTokenizer

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "tests" / "data" / "tau-bench" / "airline-gpt-4o-dev.json"
FIXTURES = ("eo_worldview_turn.json", "failures_turn.json", "fallback_path_turn.json", "ndvi_parametric_turn.json")
TOK = ApproxTokenizer()


def _text(request: LLMRequest) -> str:
    return "\n".join(m.content for m in request.messages)


def _bare(text: str, marker: str, *inputs: str) -> str:
    for value in inputs:
        text = text.replace(f"{marker}\n{value}\n{marker}", value)
    return text


def measure(turn: StoredTurn) -> tuple[list[tuple[int, int]], bool] | None:
    """[(fenced tokens, bare tokens) per call], and whether all masks share the prefix; None: nothing to trace."""
    corpus = build_corpus(turn)
    segments = segment_response(turn.response)
    if not corpus.units or not segments:
        return None
    claim, query = segments[0].text, turn.effective_query()
    texts = [(u.id, u.label, cut_to_budget(u.shown, DEFAULT_PARAMS.source_token_cap, TOK)[0]) for u in corpus.units]
    judge_marker = Fence.for_inputs(claim, query).marker
    sizes: list[tuple[int, int]] = []
    heads: set[str] = set()
    for drop in [None, *(u.id for u in corpus.units)]:
        request = build_judge_request(claim, query, [t for t in texts if t[0] != drop])
        text = _text(request)
        heads.add(text.split("SOURCES:")[0])
        if drop is None:
            sizes.append((TOK.count(text), TOK.count(_bare(text, judge_marker, claim, query.strip()))))
    support_marker = Fence.for_inputs(claim).marker
    for unit in corpus.units:
        text = _text(build_support_request(claim, unit))
        sizes.append((TOK.count(text), TOK.count(_bare(text, support_marker, claim))))
    return sizes, len(heads) == 1


def summarise(name: str, turns: Iterable[StoredTurn]) -> bool:
    ratios: list[float] = []
    added: list[int] = []
    shared = total = 0
    for turn in turns:
        measured = measure(turn)
        if measured is None:
            continue
        sizes, one_prefix = measured
        total += 1
        shared += one_prefix
        ratios += [fenced / bare for fenced, bare in sizes]
        added += [fenced - bare for fenced, bare in sizes]
    if not total:
        print(f"{name}: no traceable turn")
        return True
    print(
        f"{name}: {total} turns, {len(ratios)} calls: prompt tokens with the claim/query regions vs bare "
        f"{statistics.mean(ratios):.3f}x on average (max {max(ratios):.3f}x; +{statistics.mean(added):.0f} "
        f"tokens per call); one shared judge prefix per trace in {shared}/{total} turns"
    )
    return shared == total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a τ-bench results file")
    parser.add_argument("--max-turns", type=int, default=300, help="τ-bench turns to measure")
    args = parser.parse_args()
    fixtures = [StoredTurn.model_validate_json((ROOT / "fixtures" / n).read_text(encoding="utf-8")) for n in FIXTURES]
    ok = summarise("fixtures", fixtures)
    if args.data.exists():
        ok &= summarise("τ-bench airline", tau_turns(args.data)[: args.max_turns])
    else:
        print(f"τ-bench data not found at {args.data}: skipped")
    print(("PASS" if ok else "FAIL") + ": every mask of a trace shares one judge prompt prefix")


if __name__ == "__main__":
    main()
