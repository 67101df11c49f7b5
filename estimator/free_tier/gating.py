"""Algorithm 3 — GateTurn and Classify (seed §6.1, §7.3): the free tier; BestVerbatim is in ``verbatim``.

Every segment is accounted for at zero model cost: questions and offers are agent voice,
self-reports are attributed to the turn's actual tool calls, disclaimers are traceable (their
provenance is a directive), verbatim overlap with a source is a quote with a line span, and only
sentences asserting something specific (anchors) are offered for tracing — and, beyond the paper, a
sentence with no anchor that restates a rule of the instructions (``restates``), citing the rule.

The order of Classify encodes three corrections (§7.3): self-report before recommendation (with
a negative lookahead rejecting a modal after the pronoun), disclaimer before recommendation,
and anchors beat modal phrasing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import regex

from estimator.corpus.units import Corpus
from estimator.free_tier.anchors import DEFAULT_SET, AnchorSet, anchor_hits
from estimator.free_tier.restates import RuleIndex, is_statement
from estimator.free_tier.segment import Segment
from estimator.free_tier.verbatim import Citation, VerbatimIndex, best_verbatim, best_verbatim_difflib, quote_threshold
from estimator.params import DEFAULT_PARAMS, Params

__all__ = [
    "Citation",
    "GateClass",
    "GateReport",
    "GateStatus",
    "GateSummary",
    "SegmentGate",
    "VerbatimIndex",
    "best_verbatim",
    "best_verbatim_difflib",
    "classify",
    "gate_turn",
    "quote_threshold",
]


class GateClass(StrEnum):
    QUESTION = "question"
    RECOMMENDATION = "recommendation"
    SELF_REPORT = "self_report"
    DISCLAIMER = "disclaimer"
    ANCHORED_ASSERTION = "anchored_assertion"
    GENERIC_ASSERTION = "generic_assertion"
    RULE_RESTATEMENT = "rule_restatement"
    """Beyond the paper: no anchor, but it restates a rule of the instructions (``restates``): offered for tracing,
    citing the rule."""


class GateStatus(StrEnum):
    AGENT_VOICE = "agent_voice"
    TRACEABLE = "traceable"
    ACTION = "action"
    QUOTED = "quoted"
    UNANCHORED = "unanchored"


_APOS = "['’]"
_CLOSERS = "\"'”’)]*_` \t\r\n"

SELF_REPORT = regex.compile(
    r"\b(?:I|[Ww]e)"
    # a modal right after the pronoun is an offer, not a report ("I can read the file for you")
    rf"(?!\s*{_APOS}(?:d|ll)\b)(?!\s+(?:can|could|will|would|shall|should|may|might|must|cannot)\b)"
    # the auxiliary slot admits modals on purpose: rejecting them is the lookahead's job alone
    rf"(?:\s*{_APOS}(?:ve|d|ll)|\s+(?:have|had|can|could|will|would|shall|should|may|might|must))?"
    r"(?:\s+(?:also|just|already|first|then|now|briefly|previously|additionally))?"
    r"\s+(?:read|checked|searched|looked|called|ran|queried|fetched|opened|reviewed|inspected|examined"
    r"|loaded|listed|retrieved|pulled|used|tried|compared|generated|created|built|verified|confirmed"
    r"|scanned|downloaded|analy[sz]ed|computed|calculated|parsed|tested|executed|invoked|browsed"
    r"|consulted|found|located|identified|gathered|collected|went\s+through|cross-checked|grepped"
    r"|requested|submitted|updated|modified|cancell?ed|booked)\b"
)

DISCLAIMER = regex.compile(
    r"(?i)"
    rf"\b(?:can{_APOS}?t|cannot|can\s+not|could(?:n{_APOS}t|\s+not)|unable\s+to|not\s+able\s+to|won{_APOS}t)"
    r"\s+(?:\w+\s+){0,2}?(?:certify|guarantee|confirm|verify|vouch|promise"
    r"|provide\s+(?:an?\s+)?(?:official|authoritative|definitive)|give\s+(?:an?\s+)?(?:official|legal|medical))"
    r"|\bnon-?authoritative\b"
    r"|\bnot\s+(?:an?\s+|the\s+)?(?:authoritative|official|definitive|certified|endorsed)\b"
    r"|\bnot\s+guaranteed\b|\bno\s+guarantee"
    r"|\bmay\s+(?:be|contain|include)\s+(?:\w+\s+)?(?:inaccura\w*|incomplete|out\s+of\s+date|outdated|errors?)\b"
    rf"|\bI(?:{_APOS}m|\s+am)\s+(?:unable|not\s+able)\b"
    r"|\b(?:consult|check\s+with|confirm\s+with|verify\s+with|speak\s+(?:with|to)|talk\s+to)\s+"
    r"(?:an?\s+|your\s+|the\s+)?(?:qualified\s+|licensed\s+|local\s+|domain\s+)?"
    r"(?:expert|professional|specialist|authorit|official\s+source|agency)"
    r"|\btreat\s+(?:this|these|it|them|the\s+results?|the\s+maps?)\s+as\s+(?:an?\s+)?"
    r"(?:exploratory|indicative|approximate|preliminary|rough|illustrative)"
    r"|\bfor\s+(?:informational|illustrative|exploratory)\s+purposes\b"
    r"|\bnot\s+(?:a\s+substitute|intended)\s+(?:for|as)\b|\bdo(?:es)?\s+not\s+constitute\b"
)

RECOMMEND = regex.compile(
    r"(?i)"
    rf"\b(?:I|we)(?:\s+(?:can|could|would|will|shall|might|may)|{_APOS}(?:d|ll))\b"
    r"|\byou\s+(?:can|could|might|may|should|would)\b|\bif\s+you(?:'d|’d)?\s+(?:want|like|prefer|need|wish)\b"
    r"|\blet\s+me\s+know\b|\b(?:recommend|suggest|advise)(?:ed|s|ation|ion)?\b|\bconsider(?:ing)?\b"
    r"|\bwould\s+you\s+like\b|\b(?:happy|glad)\s+to\b|\bfeel\s+free\b|\bshall\s+I\b|\bdo\s+you\s+want\b"
)


_GREEK = regex.compile(r"\p{Greek}")


def _is_question(text: str) -> bool:
    """Ends with a question mark: ``?``, full-width ``？``, or the Greek ``;`` (U+037E, or the ASCII
    semicolon it is usually typed as, in a Greek sentence)."""
    body = text.rstrip(_CLOSERS)
    if body.endswith(("?", "？", "\u037e")):
        return True
    return body.endswith(";") and _GREEK.search(body) is not None


def classify(
    text: str, params: Params = DEFAULT_PARAMS, anchor_set: AnchorSet = DEFAULT_SET
) -> tuple[GateClass, tuple[str, ...]]:
    """Classify: order matters (question, self-report, disclaimer, recommendation-without-anchors).
    Only strong anchors beat modal phrasing: a name alone ("tell me whether you want statewide
    Alabama") leaves an offer an offer. The anchors returned list the strong ones first, then the
    weak ones (names, tiers, ``key: value`` lines), each in order of appearance."""
    hits = anchor_hits(text, params, anchor_set)
    found = tuple(h.token for h in hits if not h.weak) + tuple(h.token for h in hits if h.weak)
    if _is_question(text):
        return GateClass.QUESTION, found
    if SELF_REPORT.search(text):
        return GateClass.SELF_REPORT, found
    if DISCLAIMER.search(text):
        return GateClass.DISCLAIMER, found
    if RECOMMEND.search(text) and all(h.weak for h in hits):
        return GateClass.RECOMMENDATION, found
    return (GateClass.ANCHORED_ASSERTION if found else GateClass.GENERIC_ASSERTION), found


@dataclass(frozen=True)
class SegmentGate:
    segment: Segment
    klass: GateClass
    status: GateStatus
    anchors: tuple[str, ...]
    citations: tuple[Citation, ...] = ()
    reason: str | None = None
    """Why a sentence with no anchor is offered: ``restates an instruction rule (…)`` naming the rule (its citation
    is the rule's line)."""

    @property
    def traceable(self) -> bool:
        return self.status == GateStatus.TRACEABLE

    def to_dict(self) -> dict[str, Any]:
        s = self.segment
        return {
            "id": s.id,
            "text": s.text,
            "start": s.start,
            "end": s.end,
            "status": self.status.value,
            "class": self.klass.value,
            "anchors": list(self.anchors),
            "citations": [c.to_dict() for c in self.citations],
        }


_SUMMARY_PARTS = (  # (count, words for 1, words for more)
    ("traceable", "you can trace", "you can trace"),
    ("quoted", "quoted directly", "quoted directly"),
    ("action", "report of an action", "reports of actions"),
    ("agent_voice", "question or offer", "questions or offers"),
    ("unanchored", "nothing specific to check", "nothing specific to check"),
)


@dataclass(frozen=True)
class GateSummary:
    sources: int
    sentences: int
    traceable: int
    quoted: int
    agent_voice: int
    action: int
    unanchored: int

    def line(self) -> str:
        """The §8.1 accounting line; zero categories are omitted, so the shown counts sum to sentences."""
        head = (
            f"{self.sources} source{'' if self.sources == 1 else 's'} · "
            f"{self.sentences} sentence{'' if self.sentences == 1 else 's'}"
        )
        shown = [f"{n} {one if n == 1 else more}" for name, one, more in _SUMMARY_PARTS if (n := getattr(self, name))]
        return head + (": " + ", ".join(shown) if shown else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "sources": self.sources,
            "sentences": self.sentences,
            "traceable": self.traceable,
            "quoted": self.quoted,
            "agent_voice": self.agent_voice,
            "action": self.action,
            "unanchored": self.unanchored,
            "line": self.line(),
        }


@dataclass(frozen=True)
class GateReport:
    summary: GateSummary
    segments: tuple[SegmentGate, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary.to_dict(), "segments": [g.to_dict() for g in self.segments]}


def _restating(
    segment: Segment, corpus: Corpus, rules: list[RuleIndex] | None, found: tuple[str, ...]
) -> SegmentGate | None:
    """The sentence offered for tracing because it restates an instruction rule, or None (``rules``: the index,
    built on first use; None when the cue is off)."""
    if rules is None or not is_statement(segment.text):
        return None
    if not rules:
        rules.append(RuleIndex.of(corpus))
    match = rules[0].restated(segment.text)
    if match is None:
        return None
    cite = Citation(match.source_id, match.line, match.line)
    return SegmentGate(segment, GateClass.RULE_RESTATEMENT, GateStatus.TRACEABLE, found, (cite,), match.reason)


def _gate_one(
    segment: Segment,
    corpus: Corpus,
    params: Params,
    tool_citations: tuple[Citation, ...],
    index: list[VerbatimIndex],
    anchor_set: AnchorSet,
    rules: list[RuleIndex] | None,
) -> SegmentGate:
    klass, found = classify(segment.text, params, anchor_set)
    if klass == GateClass.RECOMMENDATION:
        restated = _restating(segment, corpus, rules, found)  # "as a Gold member you may be eligible for compensation"
        return restated or SegmentGate(segment, klass, GateStatus.AGENT_VOICE, found)
    if klass == GateClass.QUESTION:
        return SegmentGate(segment, klass, GateStatus.AGENT_VOICE, found)
    if klass == GateClass.DISCLAIMER:
        return SegmentGate(segment, klass, GateStatus.TRACEABLE, found)
    if klass == GateClass.SELF_REPORT:
        return SegmentGate(segment, klass, GateStatus.ACTION, found, tool_citations)
    if not corpus.units:
        return SegmentGate(segment, klass, GateStatus.UNANCHORED, found)
    if not index:
        index.append(VerbatimIndex(corpus))
    quote = index[0].best(segment.text, params)
    if quote is not None:
        return SegmentGate(segment, klass, GateStatus.QUOTED, found, (quote,))
    if found:
        return SegmentGate(segment, klass, GateStatus.TRACEABLE, found)
    return _restating(segment, corpus, rules, found) or SegmentGate(segment, klass, GateStatus.UNANCHORED, found)


def gate_turn(
    corpus: Corpus,
    segments: Sequence[Segment],
    params: Params = DEFAULT_PARAMS,
    index: VerbatimIndex | None = None,
    anchor_set: AnchorSet = DEFAULT_SET,
    rule_cue: bool = True,
) -> GateReport:
    """Algorithm 3: one SegmentGate per segment, in order; the evidence is every unit of every layer.
    Segments come from the renderer and are never re-split. ``anchor_set`` selects Algorithm 2's
    pattern groups (the seed's own set is kept as a measured baseline); ``rule_cue`` (beyond the paper) offers a
    sentence with no anchor that restates an instruction rule (``restates``)."""
    if index is not None and not index.built_from(corpus):
        raise ValueError("the VerbatimIndex was built from a different corpus")
    tool_citations = tuple(Citation(u.id, 1, len(u.lines)) for u in corpus.tool_units())
    lazy: list[VerbatimIndex] = [index] if index is not None else []
    rules: list[RuleIndex] | None = [] if rule_cue else None
    gates = tuple(_gate_one(s, corpus, params, tool_citations, lazy, anchor_set, rules) for s in segments)
    count = {status: sum(1 for g in gates if g.status == status) for status in GateStatus}
    summary = GateSummary(
        sources=len(corpus.units),
        sentences=len(gates),
        traceable=count[GateStatus.TRACEABLE],
        quoted=count[GateStatus.QUOTED],
        agent_voice=count[GateStatus.AGENT_VOICE],
        action=count[GateStatus.ACTION],
        unanchored=count[GateStatus.UNANCHORED],
    )
    return GateReport(summary, gates)
