"""Free-tier benchmark: corpus construction + gating over tau-bench airline, and BestVerbatim speed.

Runs from the repository root or anywhere else:

    python bench/free_tier.py [--data PATH] [--difflib-seconds 60] [--seed 7]

Prints turns, sentences and sentences/s for corpus + gating; the speed ratio of ``best_verbatim``
(index build included) against the plain difflib definition on the same (sentence, corpus)
pairs, asserting identical quoted / not-quoted decisions; and the time to gate a 13-sentence
response over a synthetic 60,000-token corpus. Exit status 1 if any decision differs.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from tau_turns import tau_turns  # a sibling module: this script's directory is on sys.path

from estimator.corpus import build_corpus
from estimator.gating import Citation, VerbatimIndex, best_verbatim_difflib, gate_turn
from estimator.segment import Segment, segment_response
from estimator.tokens import ApproxTokenizer
from estimator.turn import StoredTurn
from estimator.units import Corpus

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT / "tests" / "data" / "tau-bench" / "airline-gpt-4o-dev.json"
SPEED_TARGET = 20.0
SYNTHETIC_TOKENS = 60_000
SYNTHETIC_TARGET_SECONDS = 1.0


Prepared = list[tuple[Corpus, tuple[Segment, ...]]]


def free_tier(turns: Sequence[StoredTurn]) -> tuple[Prepared, float, Counter[str]]:
    """Corpus construction + segmentation + gating for every turn; returns inputs, seconds, statuses."""
    prepared: Prepared = []
    statuses: Counter[str] = Counter()
    started = time.perf_counter()
    for turn in turns:
        corpus = build_corpus(turn)
        segments = segment_response(turn.response)
        report = gate_turn(corpus, segments)
        statuses.update(g.status.value for g in report.segments)
        prepared.append((corpus, segments))
    return prepared, time.perf_counter() - started, statuses


def compare(pairs: Prepared, budget: float, seed: int) -> tuple[int, int, int, int, int, float, float]:
    """Fast vs difflib on whole turns, in a seeded random order, until difflib has used ``budget`` s.
    Returns (turns, pairs, quoted, decision mismatches, citation differences, fast s, slow s)."""
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    n_turns = n_pairs = quoted = mismatches = citation_diffs = 0
    fast = slow = 0.0
    for i in order:
        if slow >= budget:
            break
        corpus, segments = pairs[i]
        t0 = time.perf_counter()
        index = VerbatimIndex(corpus)  # built once per corpus, as gate_turn does: its cost is counted
        got = [index.best(s.text) for s in segments]
        t1 = time.perf_counter()
        want = [best_verbatim_difflib(s.text, corpus) for s in segments]
        t2 = time.perf_counter()
        fast, slow = fast + (t1 - t0), slow + (t2 - t1)
        n_turns, n_pairs = n_turns + 1, n_pairs + len(segments)
        quoted += sum(w is not None for w in want)
        mismatches += sum((g is None) != (w is None) for g, w in zip(got, want, strict=True))
        citation_diffs += sum(g != w for g, w in zip(got, want, strict=True))
    return n_turns, n_pairs, quoted, mismatches, citation_diffs, fast, slow


_SYLLABLES = ("ka", "lo", "mi", "ter", "ra", "sen", "dor", "va", "qui", "pel", "ux", "zo", "an", "bri", "cel")


def _synthetic_sentence(rng: random.Random, vocab: Sequence[str]) -> str:
    words = [rng.choice(vocab) for _ in range(rng.randint(8, 22))]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def synthetic_turn(seed: int = 13, target_tokens: int = SYNTHETIC_TOKENS) -> StoredTurn:
    """A turn whose untruncated corpus is ~60,000 tokens, and a 13-sentence response: four sentences
    quoted verbatim, three embedding a 50-character source fragment (not a quote), six new ones."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(2500)]
    vocab += [f"LAYER_{i}_Daily" for i in range(40)] + [f"{rng.uniform(-90, 90):.2f}" for _ in range(60)]
    tokenizer = ApproxTokenizer()
    sources: list[str] = []
    total = 0
    while total < target_tokens:
        lines = [" ".join(_synthetic_sentence(rng, vocab) for _ in range(rng.randint(1, 3)))
                 for _ in range(60)]
        text = tokenizer.truncate("\n".join(lines), target_tokens - total)
        sources.append(text)
        total += tokenizer.count(text)
    picks = [rng.choice(rng.choice(sources).split("\n")).split(". ")[0].rstrip(".") + "." for _ in range(4)]
    fragments = []
    for _ in range(3):
        source = rng.choice(sources)
        at = rng.randrange(len(source) - 60)
        fragments.append("We note " + source[at:at + 50].replace("\n", " ").replace(".", ",") + " " +
                         " ".join(rng.choice(vocab) for _ in range(14)) + ".")
    fresh = [_synthetic_sentence(rng, vocab) for _ in range(6)]
    response = " ".join(picks[:2] + fragments + fresh + picks[2:])
    if len(segment_response(response)) != 13:
        raise AssertionError("the synthetic response must segment into exactly 13 sentences")
    calls = [{"name": f"fetch_report_{i}", "arguments": {"page": i}, "response": text}
             for i, text in enumerate(sources)]
    return StoredTurn.model_validate({"turn_id": "synthetic-60k", "response": response,
                                      "response_payload": {"tool_calls": calls}})


def synthetic(seed: int) -> tuple[int, int, float, float, int, int]:
    """(corpus tokens, sentences, seconds for corpus + gating, difflib seconds, mismatches, quoted)."""
    turn = synthetic_turn(seed)
    timings = []
    for _ in range(3):
        t0 = time.perf_counter()
        corpus = build_corpus(turn)
        segments = segment_response(turn.response)
        gate_turn(corpus, segments)
        timings.append(time.perf_counter() - t0)
    index = VerbatimIndex(corpus)
    got: list[Citation | None] = [index.best(s.text) for s in segments]
    t0 = time.perf_counter()
    want = [best_verbatim_difflib(s.text, corpus) for s in segments]
    slow = time.perf_counter() - t0
    mismatches = sum((g is None) != (w is None) for g, w in zip(got, want, strict=True))
    tokens = sum(u.evidence.tokens for u in corpus.units)
    quoted = sum(w is not None for w in want)
    return tokens, len(segments), sorted(timings)[1], slow, mismatches, quoted


def verdict(ok: bool, text: str) -> str:
    return ("PASS  " if ok else "MISS  ") + text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="tau-bench results JSON (default: tests/data/tau-bench/"
                             "airline-gpt-4o-dev.json relative to the repository root)")
    parser.add_argument("--difflib-seconds", type=float, default=60.0,
                        help="time budget for the difflib reference on tau-bench turns")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    turns = tau_turns(args.data)
    prepared, elapsed, statuses = free_tier(turns)
    sentences = sum(len(s) for _, s in prepared)
    print(f"turns: {len(turns)}   sentences: {sentences}   corpus+gating: {elapsed:.2f} s "
          f"= {sentences / elapsed:,.0f} sentences/s")
    print("statuses: " + ", ".join(f"{k} {v}" for k, v in statuses.most_common()))

    n_turns, n_pairs, quoted, mismatches, citation_diffs, fast, slow = compare(prepared, args.difflib_seconds,
                                                                               args.seed)
    ratio = slow / fast if fast else float("inf")
    scope = "all" if n_turns == len(prepared) else "a seeded sample of"
    print(f"best_verbatim vs difflib: {scope} {n_turns} turns, {n_pairs} (sentence, corpus) pairs, "
          f"{quoted} quoted; fast {fast:.3f} s (index build included), difflib {slow:.2f} s, "
          f"speed ratio {ratio:,.0f}x")
    print(f"decision mismatches: {mismatches}   citation differences: {citation_diffs}")

    tokens, n_sentences, seconds, slow_synthetic, synthetic_mismatches, quoted_synthetic = synthetic(
        args.seed)
    print(f"synthetic: {n_sentences} sentences over a {tokens:,}-token corpus ({quoted_synthetic} quoted): "
          f"corpus+gating {seconds:.3f} s (median of 3); difflib BestVerbatim alone {slow_synthetic:.1f} s; "
          f"mismatches {synthetic_mismatches}")

    print(verdict(mismatches + synthetic_mismatches == 0, "identical quoted / not-quoted decisions"))
    print(verdict(ratio >= SPEED_TARGET,
                  f"best_verbatim ≥ {SPEED_TARGET:.0f}x faster than difflib ({ratio:,.0f}x)"))
    print(verdict(seconds < SYNTHETIC_TARGET_SECONDS, f"{n_sentences} sentences over {tokens:,} tokens in "
                                                      f"{seconds:.3f} s (< {SYNTHETIC_TARGET_SECONDS} s)"))
    return 1 if mismatches or synthetic_mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
