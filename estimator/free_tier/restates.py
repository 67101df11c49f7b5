"""The free tier's rule cue (beyond the paper): a sentence that restates a rule of the agent's instructions.

Anchors make a sentence checkable when it names something specific; a sentence that restates a rule often names
nothing ("a full refund is not available beyond the 24-hour window", "the travel insurance only covers
cancellations for health or weather reasons") and would read as *nothing specific to check* — yet a trace of it
names the rule that directs it, or finds that none does. This cue offers it for tracing, naming the rule.

The measure is the share of the sentence's content words that one rule of the instructions (a source of the
instructions layer: a section of the prompt, or a list item or paragraph on its own) carries, each word weighted by
how rare it is among the instructions' statements (a line: a list item, a heading, a paragraph line; inverse
document frequency: "flight" in an airline policy weighs little, "insurance" more). Content words are the words and
numbers left after function words and the procedural vocabulary of a conversation ("proceed", "confirm",
"details"), without a plural "s" and cut to their first ``STEM_CHARS`` letters (so "cancellation", "cancelled" and
"cancel" meet, and "24-hour" meets "24 hours"); a list item's own number is not one. A sentence is offered when at
least ``MIN_SHARED`` of its content words are in one rule, at least ``MIN_IN_STATEMENT`` of them in one statement
of it, and their weight is at least ``THRESHOLD`` of the sentence's. The rule named is, of those that clear the bar,
the one with the statement that carries the most of the sentence's weight, and that statement is the line cited. A
rule is read whole because a policy spreads one rule over its lines: "a full refund is not available beyond the
24-hour window" restates a cancellation section that says "24 hours" in one item and "refund" in another, and "as a
Gold member you may be eligible for compensation" a refund section that names gold members in one item and
compensation in the next; ``MIN_IN_STATEMENT`` keeps words scattered over a long rule from counting alone.

Only a statement can restate a rule: a request or next step ("please provide …", "to proceed, I'll need …", "I
cannot proceed without …", "let me …", "here's …", "tell me …"), an offer or advice ("I can help you with …", "we can
handle …", "I recommend …", "you may want to …", "you can choose to …"), a greeting, a report of what was done
("… has been refunded") or of what the data seems to say ("it seems …"), a heading of the reply, a line of a
summary or one of the options the agent lists ("- **Payment:** …", "2. **Keep the current setup**: …") and a list
item with no verb ("3. The reason for cancellation (…)": an item of a list of what the agent asks for) are not
offered. Questions never reach the cue (they are agent voice before it runs).

``MIN_SHARED`` and ``THRESHOLD`` were measured on the dev split of ``tests/data/gating/rules.jsonl`` (sentences of
τ-bench airline replies labelled by reading: does the sentence restate a rule of the airline policy?), the
threshold being the highest one at the best F1 on dev (with the fewest shared words among equals); at that pair
``MIN_IN_STATEMENT`` 1 offers the same dev sentences as 2, and 3 offers 13 restatements of 13 instead of 14 of 15
(a lower F1). The held-out split was not consulted. Figures: ``bench/free_tier.py`` and ``bench/README.md``.
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
MIN_IN_STATEMENT = 2
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

_TOKEN = regex.compile(r"\p{L}+|\p{Nd}+")
_REQUEST = regex.compile(
    r"(?i)\b(?:please|let\s+me|let's|could\s+you|would\s+you|can\s+you|do\s+you|tell\s+me"
    r"|I(?:'ll|’ll|\s+will)?\s+(?:also\s+|still\s+|first\s+)?need"
    r"|once\s+(?:you|I)|to\s+proceed|(?:cannot|can['’]t|unable\s+to)\s+proceed|here\s+(?:are|is)|here['’]s"
    r"|I(?:'ll|’ll|\s+will)\s+(?:now\s+)?(?:proceed|assist|help|take|make|search|check|look|be)"
    r"|thank\s+you|thanks|feel\s+free)\b"
)
_OFFER = regex.compile(
    r"(?i)\b(?:I|we)(?:\s+(?:can|could|will|would)|['’](?:ll|d))\s+(?:also\s+|certainly\s+|gladly\s+)?"
    r"(?:help|assist|handle|transfer|connect|arrange|narrow|look|check|search)\b"
    r"|\bI\s+(?:would\s+)?(?:recommend|suggest|advise)\b|\byou\s+(?:may|might)\s+want\s+to\b"
    r"|\byou\s+can\s+(?:choose|opt|select|decide)\b"
    r"|^\W*(?:hello|hi|hey|welcome|greetings|good\s+(?:morning|afternoon|evening))\b"
)
_DONE = regex.compile(r"(?i)\b(?:has|have)\s+(?:\w+\s+)?been\b")
_SEEMS = regex.compile(r"(?i)\bit\s+(?:seems|appears|looks)\b")
_ITEM = regex.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s")
_LABELLED = regex.compile(r"^\s*(?:#{1,6}\s|(?:[-*+•]|\d{1,3}[.)])\s+(?:\*\*|__))")
_PREDICATE = regex.compile(
    r"(?i)\b(?:is|are|was|were|be|can|cannot|could|will|would|must|may|might|should|shall|has|have|does|do|not)\b"
    r"|['’](?:s|re|m)\b|n['’]t\b"
)


def content_words(text: str) -> frozenset[str]:
    """The sentence's or statement's content words and numbers (not a list item's own number), each word cut to
    its first ``STEM_CHARS`` letters."""
    body = text[m.end() :] if (m := _ITEM.match(text)) else text
    tokens = (t.casefold() for t in _TOKEN.findall(body))
    return frozenset(
        (t.lstrip("0") or "0") if t.isdecimal() else _stem(t)
        for t in tokens
        if t.isdecimal() or (len(t) >= MIN_WORD and t not in STOP_WORDS)
    )


def _stem(word: str) -> str:
    """The word without a plural ``s`` ("hours", "bags"; not "class"), cut to ``STEM_CHARS`` letters."""
    if len(word) > MIN_WORD and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word[:STEM_CHARS]


def is_statement(text: str) -> bool:
    """A sentence that could restate a rule: not a request or next step, an offer, advice or a greeting, a report
    of what was done or of what the data seems to say, a heading or a labelled line of a summary or of a list of
    options, nor a list item without a verb."""
    if any(p.search(text) for p in (_REQUEST, _OFFER, _DONE, _SEEMS)) or _LABELLED.match(text):
        return False
    return not (_ITEM.match(text) and not _PREDICATE.search(text))


@dataclass(frozen=True)
class RuleMatch:
    """A rule of the instructions matched against a sentence: its source, the line (of the source's text) of the
    statement it matches best, the weighted share of the sentence's content words that the whole rule (``rules``)
    or that statement (``matches``) carries, those words, and the share the statement carries alone."""

    source_id: str
    label: str
    line: int
    score: float
    shared: tuple[str, ...]
    line_score: float

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

    def _weight_of(self, words: Iterable[str]) -> float:
        """The words' summed weight, the same whatever order a set yields them in (ties stay ties)."""
        return math.fsum(self.weight(w) for w in words)

    def _shared(self, words: frozenset[str]) -> dict[int, set[str]]:
        """The content words of ``words`` each statement carries (statement index → words; none: not listed)."""
        hits: dict[int, set[str]] = {}
        for word in words:
            for n in self._postings.get(word, ()):
                hits.setdefault(n, set()).add(word)
        return hits

    def matches(self, text: str, min_shared: int = 1) -> list[RuleMatch]:
        """The best statement of each instructions source for ``text`` (at least ``min_shared`` content words in
        common), best first; the score is the share of the sentence's weight that statement carries."""
        words = content_words(text)
        total = self._weight_of(words)
        best: dict[str, RuleMatch] = {}
        if total <= 0:
            return []
        for n, shared in sorted(self._shared(words).items()):
            if len(shared) < min_shared:
                continue
            statement = self.statements[n]
            score = self._weight_of(shared) / total
            uid = statement.unit.id
            if uid not in best or (score, len(shared)) > (best[uid].score, len(best[uid].shared)):
                best[uid] = RuleMatch(uid, statement.unit.label, statement.line, score, tuple(sorted(shared)), score)
        return sorted(best.values(), key=lambda m: (-m.score, -len(m.shared), m.source_id))

    def rules(self, text: str, min_shared: int = 1, in_statement: int = MIN_IN_STATEMENT) -> list[RuleMatch]:
        """Each instructions source read whole against ``text``, best first: the content words of the sentence
        found anywhere in the rule (at least ``min_shared``) and their share of the sentence's weight, the line
        cited being the statement of the rule that carries the most of it — a rule counts only when one of its
        statements shares at least ``in_statement`` words with the sentence."""
        words = content_words(text)
        total = self._weight_of(words)
        if total <= 0:
            return []
        in_rule: dict[str, set[str]] = {}
        cited: dict[str, tuple[float, int, int]] = {}  # source → (weight, words, -line) of its best statement
        for n, shared in self._shared(words).items():
            statement = self.statements[n]
            uid = statement.unit.id
            in_rule.setdefault(uid, set()).update(shared)
            if len(shared) >= in_statement:
                key = (self._weight_of(shared), len(shared), -statement.line)
                cited[uid] = max(cited.get(uid, key), key)
        units = {s.unit.id: s.unit for s in self.statements}
        found = [
            RuleMatch(
                uid,
                units[uid].label,
                -cited[uid][2],
                self._weight_of(shared) / total,
                tuple(sorted(shared)),
                cited[uid][0] / total,
            )
            for uid, shared in in_rule.items()
            if uid in cited and len(shared) >= min_shared
        ]
        return sorted(found, key=lambda m: (-m.score, -len(m.shared), m.source_id))

    def restated(self, text: str) -> RuleMatch | None:
        """The rule ``text`` restates, if it is a statement that clears the cue's measured bar; of several rules
        that clear it, the one whose cited statement carries the most of the sentence (a policy that mentions
        "refund" in its booking rules too names the cancellation rule that says it)."""
        if not self.statements or not is_statement(text):
            return None
        found = [m for m in self.rules(text, MIN_SHARED) if m.score >= THRESHOLD]
        return min(found, key=lambda m: (-m.line_score, -m.score, m.source_id), default=None)


@lru_cache(maxsize=64)
def _index(units: tuple[Unit, ...]) -> RuleIndex:
    return RuleIndex(units)
