"""BestVerbatim (seed §6.1, §7.3): the free tier's verbatim quote, with its line span.

A sentence is quoted for free when its longest common block with one source is at least ℓq
characters and covers at least ρ of the sentence. ``best_verbatim_difflib`` is the plain
definition; ``VerbatimIndex`` answers the same question in a few C-speed scans per sentence and is
checked against it (``bench/free_tier.py``, and the property tests).

Both read the two sides the same way (``numbers.fold``: case, spacing, amounts — ``$1,234.50`` is
``1234.50 USD``), trim the block to word boundaries of both texts before the thresholds apply (a
quote never starts or ends mid-word), and cite the source's exact text.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from estimator.corpus.units import Corpus
from estimator.free_tier.numbers import Folded, fold
from estimator.params import DEFAULT_PARAMS, Params


@dataclass(frozen=True)
class Citation:
    """A source and a 1-based line span in its text; ``quote`` is the verbatim block when there is one."""

    source_id: str
    line_start: int
    line_end: int
    quote: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_id": self.source_id,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "quote": self.quote,
        }


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
    return Citation(
        source_id, text.count("\n", 0, at) + 1, text.count("\n", 0, at + size - 1) + 1, text[at : at + size]
    )


def _inside_word(text: str, at: int) -> bool:
    """Does offset ``at`` fall between two word characters of ``text``?"""
    return (
        0 < at < len(text)
        and (text[at - 1].isalnum() or text[at - 1] == "_")
        and (text[at].isalnum() or text[at] == "_")
    )


def word_bounded(sentence: str, i: int, source: str, j: int, size: int) -> tuple[int, int]:
    """The common block sentence[i:i+size] == source[j:j+size] trimmed to start and end on word
    boundaries of BOTH texts, without surrounding spaces or punctuation; (offset in block, size)."""
    start, end = 0, size
    while start < end and (
        _inside_word(sentence, i + start) or _inside_word(source, j + start) or not sentence[i + start].isalnum()
    ):
        start += 1
    while end > start and (
        _inside_word(sentence, i + end) or _inside_word(source, j + end) or sentence[i + end - 1] in _TRAILING
    ):
        end -= 1
    return start, end - start


_TRAILING = " \t\n,;:(-"


def _digit_at(text: str, at: int) -> bool:
    return 0 <= at < len(text) and text[at].isdigit()


def _number_conflict(a: str, i: int, b: str, j: int, edge: int, outside: int) -> bool:
    """One end of the block: ``edge`` is its last character on that side (an offset relative to the
    block's start ``i``/``j``), ``outside`` the offset of the first character past it."""
    edge_a = a[i + edge]
    numeric = edge_a.isdigit() or (edge_a in ".," and _digit_at(a, i + edge + (1 if outside < edge else -1)))
    out_a, out_b = _digit_at(a, i + outside), _digit_at(b, j + outside)
    return (numeric and (out_a or out_b)) or (edge_a.isspace() and out_a and out_b)


def cuts_number(sentence: str, i: int, source: str, j: int, size: int) -> bool:
    """Does the maximal common block sentence[i:i+size] == source[j:j+size] end where the two texts
    state different numbers? Either the block stops inside a number that goes on in one text
    (``55 usd (to be charged…`` against ``5 usd (to be charged…``: ``$55`` is not ``$5``; ``39.9``
    then ``0`` or ``5``), or a space ends it and both texts have a number just beyond it (``39.90 is
    the amount…`` against ``39.95 is the amount…``). Then the block is no quote of the sentence. Both
    sides are folded (``numbers.fold``), so one number written two ways (``39,90`` and ``39.90``) is
    the same text and never stops a block."""
    if size <= 0:
        return False
    return _number_conflict(sentence, i, source, j, 0, -1) or _number_conflict(sentence, i, source, j, size - 1, size)


def _accept(
    sentence: Folded, i: int, source_id: str, source: Folded, j: int, size: int, params: Params
) -> Citation | None:
    """The decision shared by both BestVerbatim implementations: refuse a block that ends inside a
    number the two texts write differently, trim it to word boundaries, test |b| ≥ ℓq and
    |b|/|sentence| ≥ ρ on what is left, and cite the source's own text."""
    if cuts_number(sentence.text, i, source.text, j, size):
        return None
    offset, size = word_bounded(sentence.text, i, source.text, j, size)
    n = len(sentence.text)
    if size < params.quote_min_chars or size / n < params.quote_min_fraction:
        return None
    begin, end = source.original_span(j + offset, j + offset + size)
    return _cite(source_id, source.original, begin, end - begin)


def best_verbatim_difflib(text: str, corpus: Corpus, params: Params = DEFAULT_PARAMS) -> Citation | None:
    """BestVerbatim by its plain definition, on both sides' folded reading (``numbers.fold``):
    difflib's longest block per source (autojunk off), maximised over sources (ties → lowest
    ordinal), trimmed to word boundaries, accepted iff |b| ≥ ℓq and |b|/|text| ≥ ρ."""
    sentence = fold(text)
    if not sentence.text:
        return None
    best: tuple[int, str, Folded | None, int, int] = (0, "", None, 0, 0)
    for unit in corpus.units:
        source = fold(unit.text)
        m = difflib.SequenceMatcher(None, sentence.text, source.text, autojunk=False).find_longest_match(
            0, len(sentence.text), 0, len(source.text)
        )
        if m.size > best[0]:
            best = (m.size, unit.id, source, m.a, m.b)
    size, source_id, folded, i, j = best
    if folded is None:
        return None
    return _accept(sentence, i, source_id, folded, j, size, params)


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

    Both sides are searched in their folded reading (``numbers.fold``: case, spacing, amounts), the
    block is trimmed to word boundaries before the thresholds are applied, and the citation shows
    the source's exact text — the same steps ``best_verbatim_difflib`` takes, so the two agree.
    """

    def __init__(self, corpus: Corpus, k: int = 12, reading: Callable[[str], Folded] = fold) -> None:
        self.k = k
        self.reading = reading  # how both sides are read: folded (the default) or ``numbers.literal``
        self.sources: tuple[tuple[str, str], ...] = _sources_of(corpus)
        self._folded = tuple(reading(text) for _, text in self.sources)
        self._joined = "\x00".join(f.text for f in self._folded)

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
            gram = text[i : i + k]
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
        sentence = self.reading(text)
        folded = sentence.text
        n = len(folded)
        if n == 0:
            return None
        threshold = quote_threshold(n, params)
        if threshold > n:
            return None
        k, positions = self._sampled(n, threshold)
        if not any(folded[i : i + k] in self._joined for i in positions):
            return None  # no source holds a sampled k-gram: the common case, decided in a few scans
        best_size, best_start, best_ordinal = 0, 0, -1
        for ordinal, source in enumerate(self._folded):
            need = max(threshold, best_size + 1)  # ties keep the lowest ordinal
            if need > n:
                break
            found = self._longest(folded, source.text, need)
            if found is not None:
                (best_size, best_start), best_ordinal = found, ordinal
        if best_ordinal < 0:
            return None
        source = self._folded[best_ordinal]
        at = source.text.find(folded[best_start : best_start + best_size])
        return _accept(sentence, best_start, self.sources[best_ordinal][0], source, at, best_size, params)


OCCURRENCE_CAP = 64


def _common_prefix(a: str, i: int, b: str, j: int) -> int:
    """Length of the longest common prefix of a[i:] and b[j:] (binary search on slice equality)."""
    lo, hi = 0, min(len(a) - i, len(b) - j)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[i : i + mid] == b[j : j + mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, i: int, b: str, j: int) -> int:
    """Length of the longest common suffix of a[:i] and b[:j]."""
    lo, hi = 0, min(i, j)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[i - mid : i] == b[j - mid : j]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _longest_by_windows(text: str, source: str, need: int, k: int, positions: range) -> tuple[int, int] | None:
    """Exact fallback: binary search on the block size with substring tests of candidate windows
    (every window of size ≥ need contains a sampled k-gram start, so only windows around hits)."""
    hits = [i for i in positions if text[i : i + k] in source]

    def earliest(size: int) -> int | None:
        last = len(text) - size
        starts = sorted({x for i in hits for x in range(max(0, i - (size - k)), min(i, last) + 1)})
        return next((x for x in starts if text[x : x + size] in source), None)

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


def best_verbatim(
    text: str, corpus_or_index: Corpus | VerbatimIndex, params: Params = DEFAULT_PARAMS
) -> Citation | None:
    """BestVerbatim (fast): same result as ``best_verbatim_difflib``. Pass a VerbatimIndex to reuse it."""
    index = corpus_or_index if isinstance(corpus_or_index, VerbatimIndex) else VerbatimIndex(corpus_or_index)
    return index.best(text, params)
