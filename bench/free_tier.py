"""Free-tier benchmark: gating recall/precision on the labelled set, speed against the seed's free
tier in the same run, and BestVerbatim against difflib.

Runs from the repository root or anywhere else:

    python bench/free_tier.py [--data PATH] [--labels PATH] [--difflib-seconds 60] [--seed 7] [--rounds 3]
    python bench/free_tier.py --labels-only --labels tests/data/gating/multilingual.jsonl

* Recall and precision of the gate against ``tests/data/gating/labelled.jsonl`` (labelled by
  reading, see its GUIDE.md), for the seed's free tier (the seed's anchor patterns, texts compared
  as written) and today's (the agent pattern groups, folded reading): recall is the share of
  *fact* statements offered for tracing or resolved for free (traceable, quoted or action);
  precision the share of sentences offered for tracing (traceable) that are *fact*. Per split
  (dev / held_out) and overall; "no cue" is today's without the rule cue. The verdict on precision counts a
  sentence that restates a rule (``rules.jsonl``) as worth tracing too.
* The rule cue (``estimator/free_tier/restates.py``) on ``tests/data/gating/rules.jsonl`` (``--rules``): recall of
  the sentences that restate a policy rule, precision of what the cue offers and how often it names the labelled
  section, before → after the cue, and the dev-only sweep its constants were chosen from (``bench/rule_cue.py``).
* With ``--labels tests/data/gating/multilingual.jsonl`` (turns in ``multilingual_turns.json`` beside
  it), the same figures per language too; ``--labels-only`` stops after them.
* Speed: corpus construction once, then gating of every τ-bench turn with the seed's free tier and
  with today's, alternated over ``--rounds`` rounds (best of each); the ratio is printed.
* ``best_verbatim`` (index build included) against the plain difflib definition on the same
  (sentence, corpus) pairs, asserting identical quoted / not-quoted decisions; and the time to gate
  a 13-sentence response over a synthetic 60,000-token corpus.

Exit status 1 if any BestVerbatim decision differs.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rule_cue import (
    gates_for,
    load_rule_labels,
    report,
    sweep,
)  # sibling modules: this script's directory is on sys.path
from tau_turns import tau_turns

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.free_tier.anchors import ANCHOR_SETS, AnchorSet
from estimator.free_tier.gating import (
    Citation,
    GateReport,
    SegmentGate,
    VerbatimIndex,
    best_verbatim_difflib,
    gate_turn,
)
from estimator.free_tier.numbers import fold, literal
from estimator.free_tier.restates import RuleIndex
from estimator.free_tier.segment import Segment, segment_response
from estimator.tokens import ApproxTokenizer

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT / "tests" / "data" / "tau-bench" / "airline-gpt-4o-dev.json"
DEFAULT_LABELS = ROOT / "tests" / "data" / "gating" / "labelled.jsonl"
DEFAULT_RULES = ROOT / "tests" / "data" / "gating" / "rules.jsonl"
FIXTURES = ROOT / "fixtures"
GATING_DATA = ROOT / "tests" / "data" / "gating"
SPEED_TARGET = 20.0
SYNTHETIC_TOKENS = 60_000
SYNTHETIC_TARGET_SECONDS = 1.0
RECALL_TARGET = 0.95
PRECISION_TARGET = 0.90
THROUGHPUT_TARGET = 0.90  # today's gating throughput over the seed's, same run
RESOLVED = ("traceable", "quoted", "action")


@dataclass(frozen=True)
class Tier:
    """One free tier to measure: which anchor patterns, and how BestVerbatim reads both sides."""

    name: str
    anchor_set: AnchorSet
    reading: str  # "folded" | "literal"
    rule_cue: bool = True

    def gate(self, corpus: Corpus, segments: Sequence[Segment]) -> GateReport:
        read = fold if self.reading == "folded" else literal
        index = VerbatimIndex(corpus, reading=read)
        return gate_turn(corpus, segments, index=index, anchor_set=self.anchor_set, rule_cue=self.rule_cue)


SEED = Tier("seed", ANCHOR_SETS["seed"], "literal", rule_cue=False)
NO_CUE = Tier("no cue", ANCHOR_SETS["agent"], "folded", rule_cue=False)  # today's, before the rule cue
TODAY = Tier("today", ANCHOR_SETS["agent"], "folded")

Prepared = list[tuple[Corpus, tuple[Segment, ...]]]


def prepare(turns: Sequence[StoredTurn]) -> tuple[Prepared, float]:
    started = time.perf_counter()
    prepared = [(build_corpus(t), segment_response(t.response)) for t in turns]
    return prepared, time.perf_counter() - started


def gate_all(prepared: Prepared, tier: Tier) -> tuple[float, Counter[str]]:
    fold.cache_clear()
    statuses: Counter[str] = Counter()
    started = time.perf_counter()
    for corpus, segments in prepared:
        statuses.update(g.status.value for g in tier.gate(corpus, segments).segments)
    return time.perf_counter() - started, statuses


# ---- recall / precision on the labelled set -------------------------------------------------------


@dataclass(frozen=True)
class Labelled:
    text: str
    label: str
    source: str
    split: str


def load_labels(path: Path) -> list[Labelled]:
    rows: list[Labelled] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            rows.append(Labelled(data["text"], data["label"], data["source"], data["split"]))
        except (ValueError, KeyError) as exc:
            print(
                f"{path}:{n}: skipped, not a labelled sentence ({exc!r}); "
                "each line needs text, label, source and split",
                file=sys.stderr,
            )
    return rows


def _turn_of(source: str, by_id: dict[str, StoredTurn]) -> tuple[StoredTurn, str | None] | None:
    """The turn a labelled sentence comes from: ``fixtures/NAME.json rN`` or ``tau-bench … TURN_ID``."""
    name, _, rest = source.rpartition(" ")
    if name.startswith("fixtures/"):
        path = ROOT / name
        return StoredTurn.model_validate_json(path.read_text(encoding="utf-8")), rest
    if name.endswith(".json") and (GATING_DATA / name).is_file():  # turns written beside a labelled set
        found = [t for t in _gating_turns(name) if t.turn_id == rest]
        return (found[0], None) if found else None
    turn = by_id.get(rest)
    return (turn, None) if turn is not None else None


_TURN_FILES: dict[str, list[StoredTurn]] = {}


def _gating_turns(name: str) -> list[StoredTurn]:
    if name not in _TURN_FILES:
        raw = json.loads((GATING_DATA / name).read_text(encoding="utf-8"))
        _TURN_FILES[name] = [StoredTurn.model_validate(t) for t in raw]
    return _TURN_FILES[name]


def language_of(row: Labelled) -> str | None:
    """The language of a sentence of the multilingual set (its turn id starts with it: ``de-3``)."""
    name, _, turn_id = row.source.rpartition(" ")
    return turn_id.split("-")[0] if name.endswith("multilingual_turns.json") else None


def locator(turns: Sequence[StoredTurn], tier: Tier) -> Callable[[str, str], SegmentGate | None]:
    """``locate(source, text)``: the gate of a labelled sentence in its own turn (None when not found)."""
    by_id = {t.turn_id: t for t in turns}
    cache: dict[str, GateReport] = {}

    def locate(source: str, text: str) -> SegmentGate | None:
        found = _turn_of(source, by_id)
        if found is None:
            return None
        turn, seg_id = found
        if turn.turn_id not in cache:
            cache[turn.turn_id] = tier.gate(build_corpus(turn), segment_response(turn.response))
        gates = [
            g for g in cache[turn.turn_id].segments if (g.segment.id == seg_id if seg_id else g.segment.text == text)
        ]
        return gates[0] if gates and gates[0].segment.text == text else None

    return locate


def rule_index(turns: Sequence[StoredTurn]) -> Callable[[str], RuleIndex]:
    """``index_for(source)``: the rules of the instructions of a labelled sentence's turn."""
    by_id = {t.turn_id: t for t in turns}
    cache: dict[str, RuleIndex] = {}

    def index_for(source: str) -> RuleIndex:
        found = _turn_of(source, by_id)
        if found is None:
            return RuleIndex(())
        turn = found[0]
        if turn.turn_id not in cache:
            cache[turn.turn_id] = RuleIndex.of(build_corpus(turn))
        return cache[turn.turn_id]

    return index_for


def statuses_of(labels: Sequence[Labelled], turns: Sequence[StoredTurn], tier: Tier) -> dict[int, str]:
    """The gate status of each labelled sentence in its own turn (index → status)."""
    locate = locator(turns, tier)
    out: dict[int, str] = {}
    for i, row in enumerate(labels):
        gate = locate(row.source, row.text)
        if gate is None:
            print(f"labelled sentence {i + 1}: not a segment of {row.source!r}; skipped", file=sys.stderr)
            continue
        out[i] = gate.status.value
    return out


@dataclass(frozen=True)
class Score:
    facts: int
    resolved: int
    offered: int
    offered_facts: int

    @property
    def recall(self) -> float:
        return self.resolved / self.facts if self.facts else float("nan")

    @property
    def precision(self) -> float:
        return self.offered_facts / self.offered if self.offered else float("nan")

    def line(self) -> str:
        return (
            f"recall {self.recall:.2f} ({self.resolved}/{self.facts})  "
            f"precision {self.precision:.2f} ({self.offered_facts}/{self.offered})"
        )


def score(labels: Sequence[Labelled], statuses: dict[int, str], split: str | None) -> Score:
    rows = [
        (row, statuses[i]) for i, row in enumerate(labels) if i in statuses and (split is None or row.split == split)
    ]
    facts = [s for row, s in rows if row.label == "fact" and not row.text.rstrip().endswith("?")]
    offered = [row for row, s in rows if s == "traceable"]
    return Score(
        len(facts), sum(s in RESOLVED for s in facts), len(offered), sum(row.label == "fact" for row in offered)
    )


# ---- BestVerbatim against difflib ----------------------------------------------------------------


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
        fold.cache_clear()
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
        lines = [" ".join(_synthetic_sentence(rng, vocab) for _ in range(rng.randint(1, 3))) for _ in range(60)]
        text = tokenizer.truncate("\n".join(lines), target_tokens - total)
        sources.append(text)
        total += tokenizer.count(text)
    picks = [rng.choice(rng.choice(sources).split("\n")).split(". ")[0].rstrip(".") + "." for _ in range(4)]
    fragments = []
    for _ in range(3):
        source = rng.choice(sources)
        at = rng.randrange(len(source) - 60)
        fragments.append(
            "We note "
            + source[at : at + 50].replace("\n", " ").replace(".", ",")
            + " "
            + " ".join(rng.choice(vocab) for _ in range(14))
            + "."
        )
    fresh = [_synthetic_sentence(rng, vocab) for _ in range(6)]
    response = " ".join(picks[:2] + fragments + fresh + picks[2:])
    if len(segment_response(response)) != 13:
        raise AssertionError("the synthetic response must segment into exactly 13 sentences")
    calls = [
        {"name": f"fetch_report_{i}", "arguments": {"page": i}, "response": text} for i, text in enumerate(sources)
    ]
    return StoredTurn.model_validate(
        {"turn_id": "synthetic-60k", "response": response, "response_payload": {"tool_calls": calls}}
    )


def synthetic(seed: int) -> tuple[int, int, float, float, int, int]:
    """(corpus tokens, sentences, seconds for corpus + gating, difflib seconds, mismatches, quoted)."""
    turn = synthetic_turn(seed)
    timings = []
    for _ in range(3):
        fold.cache_clear()
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
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="tau-bench results JSON (default: tests/data/tau-bench/"
        "airline-gpt-4o-dev.json relative to the repository root)",
    )
    parser.add_argument(
        "--labels",
        type=Path,
        default=DEFAULT_LABELS,
        help="labelled sentences, JSONL (default: tests/data/gating/labelled.jsonl)",
    )
    parser.add_argument(
        "--rules",
        type=Path,
        default=DEFAULT_RULES,
        help="sentences labelled with the policy rule they restate, JSONL (default: tests/data/gating/rules.jsonl)",
    )
    parser.add_argument(
        "--difflib-seconds", type=float, default=60.0, help="time budget for the difflib reference on tau-bench turns"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3, help="alternated timing rounds per free tier")
    parser.add_argument("--labels-only", action="store_true", help="stop after recall and precision")
    args = parser.parse_args(argv)

    turns = tau_turns(args.data)
    labels = load_labels(args.labels)
    scores: dict[str, dict[str | None, Score]] = {}
    languages = sorted({lang for row in labels if (lang := language_of(row)) is not None})
    for tier in (SEED, NO_CUE, TODAY):
        statuses = statuses_of(labels, turns, tier)
        scores[tier.name] = {split: score(labels, statuses, split) for split in ("dev", "held_out", None)}
        for lang in languages:
            mine = {i: s for i, s in statuses.items() if language_of(labels[i]) == lang}
            scores[tier.name][f"lang:{lang}"] = score(labels, mine, None)
    print(f"labelled set: {len(labels)} sentences ({args.labels.name})")
    for split in ("dev", "held_out", None, *(f"lang:{lang}" for lang in languages)):
        name = split or "all"
        print(f"  {name:9s} seed:   {scores['seed'][split].line()}")
        print(f"  {'':9s} no cue: {scores['no cue'][split].line()}")
        print(f"  {'':9s} today:  {scores['today'][split].line()}")
    # what is offered is worth tracing when it is a fact or restates a rule (rules.jsonl); without those labels,
    # when it is a fact
    worth = {split: scores["today"][split].precision for split in (None, "held_out")}
    if args.rules.is_file() and not languages:
        rules = load_rule_labels(args.rules)
        facts = {row.text: row.label == "fact" for row in labels}
        before = gates_for(rules, locator(turns, NO_CUE))
        sweep(rules, before, rule_index(turns))
        cue = report(rules, facts, {"before": before, "after": gates_for(rules, locator(turns, TODAY))})
        worth = {split: cue["after"][split].worth for split in worth}
    if args.labels_only:
        return 0

    prepared, corpus_seconds = prepare(turns)
    sentences = sum(len(s) for _, s in prepared)
    best: dict[str, float] = {}
    statuses_by: dict[str, Counter[str]] = {}
    for _ in range(max(1, args.rounds)):
        for tier in (SEED, TODAY):
            seconds, statuses_by[tier.name] = gate_all(prepared, tier)
            best[tier.name] = min(best.get(tier.name, float("inf")), seconds)
    throughput = best["seed"] / best["today"]
    print(f"turns: {len(turns)}   sentences: {sentences}   corpus: {corpus_seconds:.2f} s")
    for tier in (SEED, TODAY):
        seconds = best[tier.name]
        print(
            f"  {tier.name:5s} gating {seconds:.2f} s = {sentences / seconds:,.0f} sentences/s; corpus+gating "
            f"{sentences / (corpus_seconds + seconds):,.0f} sentences/s; statuses: "
            + ", ".join(f"{k} {v}" for k, v in statuses_by[tier.name].most_common())
        )
    total_ratio = (corpus_seconds + best["seed"]) / (corpus_seconds + best["today"])
    print(
        f"throughput today / seed: gating {throughput:.2f}, corpus+gating {total_ratio:.2f} "
        f"(best of {max(1, args.rounds)} alternated rounds)"
    )

    n_turns, n_pairs, quoted, mismatches, citation_diffs, fast, slow = compare(
        prepared, args.difflib_seconds, args.seed
    )
    ratio = slow / fast if fast else float("inf")
    scope = "all" if n_turns == len(prepared) else "a seeded sample of"
    print(
        f"best_verbatim vs difflib: {scope} {n_turns} turns, {n_pairs} (sentence, corpus) pairs, "
        f"{quoted} quoted; fast {fast:.3f} s (index build included), difflib {slow:.2f} s, "
        f"speed ratio {ratio:,.0f}x"
    )
    print(f"decision mismatches: {mismatches}   citation differences: {citation_diffs}")

    tokens, n_sentences, seconds, slow_synthetic, synthetic_mismatches, quoted_synthetic = synthetic(args.seed)
    print(
        f"synthetic: {n_sentences} sentences over a {tokens:,}-token corpus ({quoted_synthetic} quoted): "
        f"corpus+gating {seconds:.3f} s (median of 3); difflib BestVerbatim alone {slow_synthetic:.1f} s; "
        f"mismatches {synthetic_mismatches}"
    )

    overall = scores["today"][None]
    print(
        verdict(
            overall.recall >= RECALL_TARGET,
            f"recall on fact statements ≥ {RECALL_TARGET} ({overall.recall:.2f}; held out "
            f"{scores['today']['held_out'].recall:.2f})",
        )
    )
    print(
        verdict(
            worth[None] >= PRECISION_TARGET,
            f"precision of what is offered ≥ {PRECISION_TARGET}: a fact or a restated rule ({worth[None]:.2f}; "
            f"held out {worth['held_out']:.2f}; facts alone {overall.precision:.2f})",
        )
    )
    print(
        verdict(
            total_ratio >= THROUGHPUT_TARGET,
            f"corpus+gating throughput within 10 % of the seed's free tier ({total_ratio:.2f}; "
            f"gating alone {throughput:.2f})",
        )
    )
    print(verdict(mismatches + synthetic_mismatches == 0, "identical quoted / not-quoted decisions"))
    print(verdict(ratio >= SPEED_TARGET, f"best_verbatim ≥ {SPEED_TARGET:.0f}x faster than difflib ({ratio:,.0f}x)"))
    print(
        verdict(
            seconds < SYNTHETIC_TARGET_SECONDS,
            f"{n_sentences} sentences over {tokens:,} tokens in {seconds:.3f} s (< {SYNTHETIC_TARGET_SECONDS} s)",
        )
    )
    return 1 if mismatches or synthetic_mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
