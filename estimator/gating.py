"""Algorithm 3 — GateTurn, Classify and BestVerbatim (seed §6.1, §7.3): the free tier.

Every segment is accounted for at zero model cost: questions and offers are agent voice,
self-reports are attributed to the turn's actual tool calls, disclaimers are traceable (their
provenance is a directive), verbatim overlap with a source is a quote with a line span, and only
sentences asserting something specific (anchors) are offered for tracing.

The order of Classify encodes three corrections (§7.3): self-report before recommendation (with
a negative lookahead rejecting a modal after the pronoun), disclaimer before recommendation,
and anchors beat modal phrasing.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import regex

from .anchors import anchors
from .params import DEFAULT_PARAMS, Params
from .segment import Segment
from .units import Corpus


class GateClass(StrEnum):
    QUESTION = "question"
    RECOMMENDATION = "recommendation"
    SELF_REPORT = "self_report"
    DISCLAIMER = "disclaimer"
    ANCHORED_ASSERTION = "anchored_assertion"
    GENERIC_ASSERTION = "generic_assertion"


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


def classify(text: str, params: Params = DEFAULT_PARAMS) -> tuple[GateClass, tuple[str, ...]]:
    """Classify: order matters (question, self-report, disclaimer, recommendation-without-anchors)."""
    found = anchors(text, params)
    if text.rstrip(_CLOSERS).endswith("?"):
        return GateClass.QUESTION, found
    if SELF_REPORT.search(text):
        return GateClass.SELF_REPORT, found
    if DISCLAIMER.search(text):
        return GateClass.DISCLAIMER, found
    if RECOMMEND.search(text) and not found:
        return GateClass.RECOMMENDATION, found
    return (GateClass.ANCHORED_ASSERTION if found else GateClass.GENERIC_ASSERTION), found


@dataclass(frozen=True)
class Citation:
    """A source and a 1-based line span in its text; ``quote`` is the verbatim block when there is one."""

    source_id: str
    line_start: int
    line_end: int
    quote: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"source_id": self.source_id, "line_start": self.line_start, "line_end": self.line_end,
                "quote": self.quote}


def quote_threshold(length: int, params: Params = DEFAULT_PARAMS) -> int:
    """T: the least block size b with b ≥ ℓq and b/length ≥ ρ, evaluated with the same float
    comparison as the definition (so ⌈ρ·n⌉'s rounding can never flip a decision)."""
    lq, rho = params.quote_min_chars, params.quote_min_fraction
    t = max(lq, math.ceil(rho * length))
    while t > lq and (t - 1) / length >= rho:
        t -= 1
    while t <= length and t / length < rho:
        t += 1
    return t


def _cite(source_id: str, text: str, at: int, size: int) -> Citation:
    return Citation(source_id, text.count("\n", 0, at) + 1, text.count("\n", 0, at + size - 1) + 1,
                    text[at:at + size])


def best_verbatim_difflib(text: str, corpus: Corpus, params: Params = DEFAULT_PARAMS) -> Citation | None:
    """BestVerbatim by its plain definition: difflib's longest block per source (autojunk off),
    maximised over sources (ties → lowest ordinal), accepted iff |b| ≥ ℓq and |b|/|text| ≥ ρ."""
    if not text:
        return None
    best: tuple[int, str, str, int] = (0, "", "", 0)
    for unit in corpus.units:
        m = difflib.SequenceMatcher(None, text, unit.text, autojunk=False).find_longest_match(
            0, len(text), 0, len(unit.text))
        if m.size > best[0]:
            best = (m.size, unit.id, unit.text, m.b)
    size, source_id, source, at = best
    if size >= params.quote_min_chars and size / len(text) >= params.quote_min_fraction:
        return _cite(source_id, source, at, size)
    return None


def _sources_of(corpus: Corpus) -> tuple[tuple[str, str], ...]:
    return tuple((u.id, u.text) for u in corpus.units)


class VerbatimIndex:
    """The corpus prepared for BestVerbatim, built once per corpus and reused across sentences.

    Only T = max(ℓq, ⌈ρ·|sentence|⌉) matters for the decision (see ``quote_threshold``). Any common
    block of length L ≥ T covers T−k+1 consecutive k-gram starts of the sentence, so it contains the
    k-gram at a start that is a multiple of s = T−k+1. Only those few sampled k-grams are searched
    (one C-speed scan of the corpus each); each occurrence is extended both ways to the maximal
    common block through it. The longest such block is exactly difflib's longest match, and the
    earliest in the sentence, then in the source, is the block difflib returns.
    """

    def __init__(self, corpus: Corpus, k: int = 12) -> None:
        self.k = k
        self.sources: tuple[tuple[str, str], ...] = _sources_of(corpus)
        self._joined = "\x00".join(text for _, text in self.sources)

    def built_from(self, corpus: Corpus) -> bool:
        """Was this index built from exactly these sources (ids and texts)?"""
        return self.sources == _sources_of(corpus)

    def _sampled(self, n: int, need: int) -> tuple[int, range]:
        k = min(self.k, need)
        return k, range(0, n - k + 1, need - k + 1)

    def _longest(self, text: str, source: str, need: int) -> tuple[int, int] | None:
        """(size, earliest start in text) of the longest common block, if it is at least ``need``."""
        k, positions = self._sampled(len(text), need)
        best = (0, 0)
        for i in positions:
            gram = text[i:i + k]
            p = source.find(gram)
            seen = 0
            while p >= 0:
                seen += 1
                if seen > OCCURRENCE_CAP:  # a repetitive source: window tests are cheaper than extending
                    return _longest_by_windows(text, source, need, k, positions)
                left = _common_suffix(text, i, source, p)
                size = left + k + _common_prefix(text, i + k, source, p + k)
                if size > best[0] or (size == best[0] and i - left < best[1]):
                    best = (size, i - left)
                p = source.find(gram, p + 1)
        return best if best[0] >= need else None

    def best(self, text: str, params: Params = DEFAULT_PARAMS) -> Citation | None:
        n = len(text)
        if n == 0:
            return None
        threshold = quote_threshold(n, params)
        if threshold > n:
            return None
        k, positions = self._sampled(n, threshold)
        if not any(text[i:i + k] in self._joined for i in positions):
            return None  # no source holds a sampled k-gram: the common case, decided in a few scans
        best_size, best_start, best_ordinal = 0, 0, -1
        for ordinal, (_, source) in enumerate(self.sources):
            need = max(threshold, best_size + 1)  # ties keep the lowest ordinal
            if need > n:
                break
            found = self._longest(text, source, need)
            if found is not None:
                (best_size, best_start), best_ordinal = found, ordinal
        if best_ordinal < 0:
            return None
        source_id, source = self.sources[best_ordinal]
        return _cite(source_id, source, source.find(text[best_start:best_start + best_size]), best_size)


OCCURRENCE_CAP = 64


def _common_prefix(a: str, i: int, b: str, j: int) -> int:
    """Length of the longest common prefix of a[i:] and b[j:] (binary search on slice equality)."""
    lo, hi = 0, min(len(a) - i, len(b) - j)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[i:i + mid] == b[j:j + mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, i: int, b: str, j: int) -> int:
    """Length of the longest common suffix of a[:i] and b[:j]."""
    lo, hi = 0, min(i, j)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[i - mid:i] == b[j - mid:j]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _longest_by_windows(text: str, source: str, need: int, k: int,
                        positions: range) -> tuple[int, int] | None:
    """Exact fallback: binary search on the block size with substring tests of candidate windows
    (every window of size ≥ need contains a sampled k-gram start, so only windows around hits)."""
    hits = [i for i in positions if text[i:i + k] in source]

    def earliest(size: int) -> int | None:
        last = len(text) - size
        starts = sorted({x for i in hits for x in range(max(0, i - (size - k)), min(i, last) + 1)})
        return next((x for x in starts if text[x:x + size] in source), None)

    if earliest(need) is None:
        return None
    lo, hi = need, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if earliest(mid) is not None:
            lo = mid
        else:
            hi = mid - 1
    start = earliest(lo)
    assert start is not None
    return lo, start


def best_verbatim(text: str, corpus_or_index: Corpus | VerbatimIndex,
                  params: Params = DEFAULT_PARAMS) -> Citation | None:
    """BestVerbatim (fast): same result as ``best_verbatim_difflib``. Pass a VerbatimIndex to reuse it."""
    index = corpus_or_index if isinstance(corpus_or_index, VerbatimIndex) else VerbatimIndex(corpus_or_index)
    return index.best(text, params)


@dataclass(frozen=True)
class SegmentGate:
    segment: Segment
    klass: GateClass
    status: GateStatus
    anchors: tuple[str, ...]
    citations: tuple[Citation, ...] = ()

    @property
    def traceable(self) -> bool:
        return self.status == GateStatus.TRACEABLE

    def to_dict(self) -> dict[str, Any]:
        s = self.segment
        return {"id": s.id, "text": s.text, "start": s.start, "end": s.end, "status": self.status.value,
                "class": self.klass.value, "anchors": list(self.anchors),
                "citations": [c.to_dict() for c in self.citations]}


_SUMMARY_PARTS = (
    ("traceable", "you can trace"), ("quoted", "quoted directly"), ("action", "reports of actions"),
    ("agent_voice", "questions or offers"), ("unanchored", "nothing specific to check"),
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
        head = (f"{self.sources} source{'' if self.sources == 1 else 's'} · "
                f"{self.sentences} sentence{'' if self.sentences == 1 else 's'}")
        shown = [f"{getattr(self, name)} {label}" for name, label in _SUMMARY_PARTS if getattr(self, name)]
        return head + (": " + ", ".join(shown) if shown else "")

    def to_dict(self) -> dict[str, Any]:
        return {"sources": self.sources, "sentences": self.sentences, "traceable": self.traceable,
                "quoted": self.quoted, "agent_voice": self.agent_voice, "action": self.action,
                "unanchored": self.unanchored, "line": self.line()}


@dataclass(frozen=True)
class GateReport:
    summary: GateSummary
    segments: tuple[SegmentGate, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary.to_dict(), "segments": [g.to_dict() for g in self.segments]}


def _gate_one(segment: Segment, corpus: Corpus, params: Params, tool_citations: tuple[Citation, ...],
              index: list[VerbatimIndex]) -> SegmentGate:
    klass, found = classify(segment.text, params)
    if klass in (GateClass.QUESTION, GateClass.RECOMMENDATION):
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
    return SegmentGate(segment, klass, GateStatus.TRACEABLE if found else GateStatus.UNANCHORED, found)


def gate_turn(corpus: Corpus, segments: Sequence[Segment], params: Params = DEFAULT_PARAMS,
              index: VerbatimIndex | None = None) -> GateReport:
    """Algorithm 3: one SegmentGate per segment, in order; the evidence is every unit of every layer.
    Segments come from the renderer and are never re-split."""
    if index is not None and not index.built_from(corpus):
        raise ValueError("the VerbatimIndex was built from a different corpus")
    tool_citations = tuple(Citation(u.id, 1, len(u.lines)) for u in corpus.tool_units())
    lazy: list[VerbatimIndex] = [index] if index is not None else []
    gates = tuple(_gate_one(s, corpus, params, tool_citations, lazy) for s in segments)
    count = {status: sum(1 for g in gates if g.status == status) for status in GateStatus}
    summary = GateSummary(
        sources=len(corpus.units), sentences=len(gates), traceable=count[GateStatus.TRACEABLE],
        quoted=count[GateStatus.QUOTED], agent_voice=count[GateStatus.AGENT_VOICE],
        action=count[GateStatus.ACTION], unanchored=count[GateStatus.UNANCHORED],
    )
    return GateReport(summary, gates)
