"""The free tier's rule cue on τ-bench replies: which sentences that restate a rule of the airline policy are
offered for tracing (or resolved for free), before and after the cue (``estimator/free_tier/restates.py``).

The labels are ``tests/data/gating/rules.jsonl`` (its guide: ``tests/data/gating/GUIDE.md``, *Restates a rule*):
the 353 sentences of ``labelled.jsonl`` and 300 more τ-bench reply sentences (a seeded sample), each labelled by
reading with the policy section it restates, or null. Per split (the guide's hash rule):

* *recall*: share of restating sentences offered for tracing or resolved for free (traceable, quoted, action);
* *cue precision*: share of sentences the cue offers (class ``rule_restatement``) that restate a rule;
* *rule named*: of those, the share whose reason names the policy section of the label;
* *worth tracing*: share of all sentences offered for tracing that are a *fact* (``labelled.jsonl``) or restate a
  rule — on the sentences that carry both labels.

Used by ``bench/free_tier.py``, which also prints ``sweep``: how the cue's two constants were chosen, on the dev
split only.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from estimator.free_tier.gating import GateClass, SegmentGate
from estimator.free_tier.restates import RuleIndex, is_statement

RESOLVED = ("traceable", "quoted", "action")


@dataclass(frozen=True)
class RuleLabel:
    text: str
    restates: str | None
    source: str
    split: str


def load_rule_labels(path: Path) -> list[RuleLabel]:
    rows: list[RuleLabel] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            rows.append(RuleLabel(data["text"], data["restates"], data["source"], data["split"]))
        except (ValueError, KeyError) as exc:
            print(f"{path}:{n}: skipped ({exc!r}); each line needs text, restates, source and split", file=sys.stderr)
    return rows


@dataclass(frozen=True)
class CueScore:
    restating: int
    resolved: int
    cue_offered: int
    cue_right: int
    cue_named: int
    offered: int
    offered_worth: int

    @property
    def recall(self) -> float:
        return self.resolved / self.restating if self.restating else float("nan")

    @property
    def cue_precision(self) -> float:
        return self.cue_right / self.cue_offered if self.cue_offered else float("nan")

    @property
    def worth(self) -> float:
        return self.offered_worth / self.offered if self.offered else float("nan")

    def line(self) -> str:
        return (
            f"recall {self.recall:.2f} ({self.resolved}/{self.restating})  cue precision "
            f"{self.cue_precision:.2f} ({self.cue_right}/{self.cue_offered}, rule named {self.cue_named}/"
            f"{self.cue_right})  worth tracing {self.worth:.2f} "
            f"({self.offered_worth}/{self.offered})"
        )


def score_cue(
    labels: Sequence[RuleLabel], gates: Mapping[int, SegmentGate], facts: Mapping[str, bool], split: str | None
) -> CueScore:
    """``gates``: the gate of each labelled sentence (index → gate); ``facts``: text → labelled *fact*."""
    rows = [(row, gates[i]) for i, row in enumerate(labels) if i in gates and split in (None, row.split)]
    restating = [g for row, g in rows if row.restates]
    cue = [(row, g) for row, g in rows if g.klass == GateClass.RULE_RESTATEMENT]
    offered = [row for row, g in rows if g.status.value == "traceable" and row.text in facts]
    return CueScore(
        len(restating),
        sum(g.status.value in RESOLVED for g in restating),
        len(cue),
        sum(row.restates is not None for row, _ in cue),
        sum(row.restates is not None and f'"{row.restates}"' in (g.reason or "") for row, g in cue),
        len(offered),
        sum(facts[row.text] or row.restates is not None for row in offered),
    )


def report(
    labels: Sequence[RuleLabel],
    facts: Mapping[str, bool],
    gates_by_tier: Mapping[str, Mapping[int, SegmentGate]],
) -> dict[str, dict[str | None, CueScore]]:
    """Print and return the figures of each tier (``before``: the cue off; ``after``: on)."""
    scores = {
        name: {split: score_cue(labels, gates, facts, split) for split in ("dev", "held_out", None)}
        for name, gates in gates_by_tier.items()
    }
    positives = sum(row.restates is not None for row in labels)
    print(f"rule cue: {len(labels)} sentences, {positives} restate a rule of the policy")
    for split in ("dev", "held_out", None):
        for n, name in enumerate(scores):
            print(f"  {(split or 'all') if n == 0 else '':9s} {name + ':':7s} {scores[name][split].line()}")
    return scores


def gates_for(labels: Sequence[RuleLabel], locate: Callable[[str, str], SegmentGate | None]) -> dict[int, SegmentGate]:
    """The gate of each labelled sentence, found by ``locate(source, text)`` (None: not a segment; skipped)."""
    out: dict[int, SegmentGate] = {}
    for i, row in enumerate(labels):
        gate = locate(row.source, row.text)
        if gate is None:
            print(f"rule label {i + 1}: not a segment of {row.source!r}; skipped", file=sys.stderr)
            continue
        out[i] = gate
    return out


def sweep(
    labels: Sequence[RuleLabel],
    before: Mapping[int, SegmentGate],
    index_for: Callable[[str], RuleIndex],
    split: str = "dev",
) -> tuple[int, float]:
    """How ``MIN_SHARED`` and ``THRESHOLD`` were chosen: on ``split`` only, every sentence the gate without the
    cue leaves unoffered (unanchored, or an offer) that is a statement, scored against the rules of its turn
    (``RuleIndex.rules``: each rule read whole, one of its statements sharing at least ``MIN_IN_STATEMENT`` words);
    for each (min shared words, threshold) the restating sentences offered / all offered, and the pair with the
    best F1 against the restating sentences left unresolved (among equals the fewest shared words, then the highest
    threshold). Then, at the chosen pair, what ``MIN_IN_STATEMENT`` of 1, 2 or 3 would offer."""
    candidates: list[tuple[bool, RuleIndex, str]] = []
    unresolved = 0
    for i, row in enumerate(labels):
        gate = before.get(i)
        if gate is None or row.split != split:
            continue
        unresolved += bool(row.restates) and gate.status.value in ("unanchored", "agent_voice")
        offer = gate.status.value == "unanchored" or gate.klass == GateClass.RECOMMENDATION
        if offer and is_statement(row.text):
            candidates.append((row.restates is not None, index_for(row.source), row.text))
    scored = [(ok, [(m.score, len(m.shared)) for m in index.rules(text)]) for ok, index, text in candidates]
    best = (-1.0, 0, 0.0)
    print(f"rule cue sweep on {split}: {len(scored)} candidate sentences, {unresolved} restating ones unresolved")
    for least in (2, 3, 4):
        cells = []
        for step in range(1, 20):
            threshold = step / 20
            offered = [ok for ok, found in scored if any(s >= threshold and n >= least for s, n in found)]
            right = sum(offered)
            f1 = 2 * right / (len(offered) + unresolved) if offered else 0.0
            best = max(best, (f1, -least, threshold))
            cells.append(f"{threshold:.2f}:{right}/{len(offered)}")
        print(f"  ≥{least} shared  " + " ".join(cells))
    f1, least, threshold = best[0], -best[1], best[2]
    print(f"  best F1 {f1:.2f} at ≥{least} shared words, threshold {threshold:.2f}")
    cells = []
    for in_statement in (1, 2, 3):
        offered = [
            ok
            for ok, index, text in candidates
            if any(m.score >= threshold for m in index.rules(text, least, in_statement))
        ]
        cells.append(f"≥{in_statement}: {sum(offered)}/{len(offered)}")
    print("  at that pair, with the words of one statement " + "  ".join(cells))
    return least, threshold
