"""The free tier's rule cue (beyond the paper): a sentence that restates a rule of the agent's instructions.

Anchors make a sentence checkable when it names something specific; a sentence that restates a rule often names
nothing ("a full refund is not available beyond the 24-hour window", "the travel insurance only covers
cancellations for health or weather reasons") and would read as *nothing specific to check* — yet a trace of it
names the rule that directs it, or finds that none does. This cue offers it for tracing, naming the rule.

The measure is the share of the sentence's content words that one statement of the instructions (a line: a list
item, a heading, a paragraph line) carries, each word weighted by how rare it is among the instructions' statements
(inverse document frequency: "flight" in an airline policy weighs little, "insurance" more). Content words are the
words left after function words and the procedural vocabulary of a conversation ("proceed", "confirm", "details"),
without a plural "s" and cut to their first ``STEM_CHARS`` letters (so "cancellation", "cancelled" and "cancel"
meet, and "hours" meets "24-hour"). A sentence is offered
when at least ``MIN_SHARED`` of its content words are in one statement and their weight is at least ``THRESHOLD``
of the sentence's.

Only a statement can restate a rule: a request or next step ("please provide …", "to proceed, I'll need …",
"let me …"), a report of what was done ("… has been refunded") or of what the data seems to say ("it seems …"),
and a list item with no verb ("3. The reason for cancellation (…)": an item of a list of what the agent asks for)
are not offered. Questions never reach the cue (they are agent voice before it runs).

``MIN_SHARED`` and ``THRESHOLD`` were measured on the dev split of ``tests/data/gating/rules.jsonl`` (sentences of
τ-bench airline replies labelled by reading: does the sentence restate a rule of the airline policy?), the
threshold being the highest one at the best F1 on dev; the held-out split was not consulted. Figures:
``bench/free_tier.py`` and ``bench/README.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import regex

from estimator.corpus.units import Corpus, Layer, Unit

STEM_CHARS = 5
MIN_SHARED = 3
THRESHOLD = 0.20
MIN_WORD = 3

_STOP_WORDS = """
    a an the and or but if then else of to in on at by for with from as is are was were be been being am do does
    did done have has had having will would shall should can could may might must not no nor so than that this
    these those there here it its i me my we our us you your yours he she they them their his her what which who
    whom whose when where why how all any both each few more most other some such only own same too very just also
    into over under again further once about above below up down out off before after while during until against
    between through because per via please thank thanks let know like yes okay sure great well however therefore
    currently now new proceed assist help need needs needed provide provided confirm confirmed details detail
    information info following option options make made take look check find found search want wish able unable
    sorry apologize understand get got see seem seems way thing things time today user agent
"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
"""Function words and the procedural vocabulary of a conversation: words that say nothing of a rule."""

_WORD = regex.compile(r"\p{L}+")
_REQUEST = regex.compile(
    r"(?i)\b(?:please|let\s+me|let's|could\s+you|would\s+you|can\s+you|do\s+you|I(?:'ll|’ll|\s+will)?\s+need"
    r"|once\s+(?:you|I)|to\s+proceed|here\s+(?:are|is)"
    r"|I(?:'ll|’ll|\s+will)\s+(?:now\s+)?(?:proceed|assist|help|take|make|search|check|look|be)"
    r"|thank\s+you|thanks|feel\s+free)\b"
)
_DONE = regex.compile(r"(?i)\b(?:has|have)\s+(?:\w+\s+)?been\b")
_SEEMS = regex.compile(r"(?i)\bit\s+(?:seems|appears|looks)\b")
_ITEM = regex.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s")
_PREDICATE = regex.compile(
    r"(?i)\b(?:is|are|was|were|be|can|cannot|could|will|would|must|may|might|should|shall|has|have|does|do|not)\b"
    r"|['’](?:s|re|m)\b|n['’]t\b"
)


def content_words(text: str) -> frozenset[str]:
    """The sentence's or statement's content words, each cut to its first ``STEM_CHARS`` letters."""
    words = (w.casefold() for w in _WORD.findall(text))
    return frozenset(_stem(w) for w in words if len(w) >= MIN_WORD and w not in STOP_WORDS)


def _stem(word: str) -> str:
    """The word without a plural ``s`` ("hours", "bags"; not "class"), cut to ``STEM_CHARS`` letters."""
    if len(word) > MIN_WORD and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word[:STEM_CHARS]


def is_statement(text: str) -> bool:
    """A sentence that could restate a rule: not a request or next step, a report of what was done or of what the
    data seems to say, nor a list item without a verb."""
    if _REQUEST.search(text) or _DONE.search(text) or _SEEMS.search(text):
        return False
    return not (_ITEM.match(text) and not _PREDICATE.search(text))


@dataclass(frozen=True)
class RuleMatch:
    """The instruction rule a sentence restates: its source, the line (of the source's text) of the statement it
    matches best, the weighted share of the sentence's content words that statement carries, and those words."""

    source_id: str
    label: str
    line: int
    score: float
    shared: tuple[str, ...]

    @property
    def reason(self) -> str:
        """Why the sentence is offered: ``restates an instruction rule (s9 instructions §5 "Cancel flight" …)``."""
        return f"restates an instruction rule ({self.source_id} {self.label}, line {self.line})"


@dataclass(frozen=True)
class _Statement:
    unit: Unit
    line: int
    words: frozenset[str]


class RuleIndex:
    """The statements of a corpus's instructions layer, with the rarity of each content word among them."""

    def __init__(self, units: Iterable[Unit]) -> None:
        self.statements = tuple(
            _Statement(u, n, words)
            for u in units
            if u.layer == Layer.INSTRUCTIONS
            for n, line in enumerate(u.lines, 1)
            if (words := content_words(line))
        )
        counts: dict[str, int] = {}
        self._postings: dict[str, list[int]] = {}
        for n, statement in enumerate(self.statements):
            for word in statement.words:
                counts[word] = counts.get(word, 0) + 1
                self._postings.setdefault(word, []).append(n)
        size = len(self.statements) + 1
        self._weights = {w: math.log(size / (c + 0.5)) for w, c in counts.items()}
        self._unseen = math.log(size / 0.5)

    @classmethod
    def of(cls, corpus: Corpus) -> RuleIndex:
        """The index of a corpus's instructions, built once per distinct set of rules (turns of one agent share
        their prompt)."""
        return _index(corpus.in_layer(Layer.INSTRUCTIONS))

    def weight(self, word: str) -> float:
        return self._weights.get(word, self._unseen)

    def matches(self, text: str, min_shared: int = 1) -> list[RuleMatch]:
        """The best statement of each instructions source for ``text`` (at least ``min_shared`` content words in
        common), best first."""
        words = content_words(text)
        total = sum(self.weight(w) for w in words)
        best: dict[str, RuleMatch] = {}
        hits: dict[int, int] = {}
        for word in words:
            for n in self._postings.get(word, ()):
                hits[n] = hits.get(n, 0) + 1
        for n in sorted(k for k, shared_count in hits.items() if shared_count >= min_shared):
            statement = self.statements[n]
            shared = words & statement.words
            if total <= 0:
                continue
            score = sum(self.weight(w) for w in shared) / total
            uid = statement.unit.id
            if uid not in best or (score, len(shared)) > (best[uid].score, len(best[uid].shared)):
                best[uid] = RuleMatch(uid, statement.unit.label, statement.line, score, tuple(sorted(shared)))
        return sorted(best.values(), key=lambda m: (-m.score, -len(m.shared), m.source_id))

    def restated(self, text: str) -> RuleMatch | None:
        """The rule ``text`` restates, if it is a statement that clears the cue's measured bar."""
        if not self.statements or not is_statement(text):
            return None
        found = self.matches(text, MIN_SHARED)
        return found[0] if found and found[0].score >= THRESHOLD else None


@lru_cache(maxsize=64)
def _index(units: tuple[Unit, ...]) -> RuleIndex:
    return RuleIndex(units)
