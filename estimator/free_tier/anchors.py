"""Algorithm 2 — Anchors (seed §7.2), with df, discriminative filtering and coverage.

An anchor is a token that makes a claim checkable: an identifier, a path, a quantity with a
unit, a date, a version or decimal, an acronym. Anchors serve twice: as the gating signal of
Algorithm 3 ("does this sentence assert anything specific?") and as the presence detector of
the causal probe.

Every guard below was forced by a measured failure (§7.2):

* the patterns are case-SENSITIVE (an IGNORECASE identifier pattern harvested load/all/and);
* short alphabetic tokens are words, not identifiers — unless written in capitals, so
  NASA, MODIS, LST and IGBP survive;
* a slashed token must look like a path (county/watershed is prose);
* mixed-case underscore identifiers (MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual,
  QC_Day) have their own pattern.

Each pattern runs under the ``regex`` module's timeout; a pattern that times out on a text
contributes nothing for that text, so hostile input can slow extraction by at most one
timeout per pattern and can never hang it or raise.

The patterns are named groups (``anchor_groups``): the seed's nine and the groups for what
customer-facing agents assert (amounts, times, dates, counts, codes, names, ``key: value`` lines).
``ANCHOR_SETS["seed"]`` keeps the seed's set selectable, as the baseline of ``bench/free_tier.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import regex

from estimator.corpus.units import Unit
from estimator.free_tier.anchor_groups import DEFAULT_GROUPS, GROUPS, PatternGroup, TextSketch
from estimator.params import DEFAULT_PARAMS, Params
from estimator.spans.verify import normalise

PATTERNS: tuple[tuple[str, str], ...] = tuple((g.name, g.pattern) for g in GROUPS[DEFAULT_GROUPS])


@dataclass(frozen=True)
class AnchorHit:
    """One anchor with the group that found it (the first group, in pattern order, at its position)."""

    token: str
    group: str
    weak: bool = False


@dataclass(frozen=True)
class AnchorSet:
    """A compiled selection of pattern groups: ``agent`` (the default) or the seed's own ``seed``."""

    name: str
    groups: tuple[PatternGroup, ...]
    compiled: tuple[regex.Pattern[str], ...]
    without_digit: tuple[int, ...]  # the ranks of the groups that can match a text with no digit

    def plan(self, digit: bool) -> range | tuple[int, ...]:
        """The ranks of the groups that can match a text with (or without) a digit."""
        return range(len(self.groups)) if digit else self.without_digit


def compile_groups(name: str) -> AnchorSet:
    groups = GROUPS[name]
    return AnchorSet(
        name,
        groups,
        tuple(regex.compile(g.pattern) for g in groups),
        tuple(r for r, g in enumerate(groups) if not g.digit),
    )


ANCHOR_SETS: dict[str, AnchorSet] = {name: compile_groups(name) for name in GROUPS}
DEFAULT_SET = ANCHOR_SETS[DEFAULT_GROUPS]
COMPILED: tuple[regex.Pattern[str], ...] = DEFAULT_SET.compiled

STRIP_CHARS = "`*_.,;:()[]{}\"'"

STOPWORDS: frozenset[str] = frozenset(
    {
        # structural words that name a kind of thing rather than a thing (§7.2: json, id, name, path, file, …)
        "json",
        "yaml",
        "xml",
        "csv",
        "html",
        "http",
        "https",
        "www",
        "url",
        "uri",
        "api",
        "id",
        "ids",
        "name",
        "names",
        "path",
        "paths",
        "file",
        "files",
        "dir",
        "key",
        "keys",
        "type",
        "value",
        "values",
        "data",
        "text",
        "string",
        "true",
        "false",
        "null",
        "none",
        # capitalised emphasis in prompts and answers, not identifiers
        "and",
        "not",
        "all",
        "any",
        "only",
        "must",
        "never",
        "always",
        "note",
        "important",
        "todo",
        "faq",
        "tbd",
    }
)

_FILE_EXTENSION = regex.compile(r"[^/]\.[a-z0-9]{1,8}$")
_DIGIT_OR_UNDERSCORE = regex.compile(r"[0-9_]")


def path_like(token: str) -> bool:
    """PathLike: a token without "/" passes; a slashed one needs a file extension, more than one
    "/", or a digit/underscore in a segment (county/watershed and legal/administrative are prose)."""
    if "/" not in token:
        return True
    if token.count("/") > 1:
        return True
    if _FILE_EXTENSION.search(token):
        return True
    return any(_DIGIT_OR_UNDERSCORE.search(segment) for segment in token.split("/"))


def _matches(group: PatternGroup, pattern: regex.Pattern[str], text: str, timeout: float) -> list[tuple[int, int, str]]:
    """All (start, end, token) of one group, or none if its pattern times out on this text."""
    try:
        found = list(pattern.finditer(text, timeout=timeout))
    except TimeoutError:
        return []
    if group.token is None:
        return [(m.start(), m.end(), m.group()) for m in found]
    return [(m.start(), m.end(), token) for m in found if (token := group.token(m)) is not None]


def _keep(match: str, min_len: int) -> str | None:
    stripped = match.strip(STRIP_CHARS)
    token = stripped.lower()
    if len(token) < min_len:
        return None
    if token in STOPWORDS:
        return None
    if not path_like(token):
        return None
    if token.isalpha() and len(token) < 6 and not stripped.isupper():
        return None  # a word, not an identifier — but ALLCAPS acronyms survive
    return token


def anchor_hits(
    text: str, params: Params = DEFAULT_PARAMS, anchor_set: AnchorSet = DEFAULT_SET
) -> tuple[AnchorHit, ...]:
    """Algorithm 2 with provenance: each anchor of ``text`` with the group that found it."""
    sketch = TextSketch.of(text)
    hits: list[tuple[int, int, int, str]] = []
    for rank in anchor_set.plan(sketch.digit):
        group, pattern = anchor_set.groups[rank], anchor_set.compiled[rank]
        if group.trigger is not None and not group.trigger(sketch):
            continue  # the group cannot match this text
        for start, end, match in _matches(group, pattern, text, params.regex_timeout_seconds):
            hits.append((start, rank, end, match))
    covering = [(s, e) for s, rank, e, _ in hits if anchor_set.groups[rank].covers]
    if covering:  # a match strictly inside a covering match is part of that anchor, not another
        hits = [h for h in hits if not any(s <= h[0] and h[2] <= e and (s, e) != (h[0], h[2]) for s, e in covering)]
    hits.sort(key=lambda h: (h[0], h[1]))
    found: list[AnchorHit] = []
    seen: set[str] = set()
    for _, rank, _, match in hits:
        token = _keep(match, params.min_anchor_len)
        if token is not None and token not in seen:
            seen.add(token)
            group = anchor_set.groups[rank]
            found.append(AnchorHit(token, group.name, group.weak))
    return tuple(found)


def anchors(
    text: str, params: Params = DEFAULT_PARAMS, anchor_set: AnchorSet = DEFAULT_SET, *, weak: bool = False
) -> tuple[str, ...]:
    """Algorithm 2: the anchors of ``text``, lowercased, deduplicated, in order of appearance.

    Weak anchors (names, service tiers) are left out unless ``weak``: they mark a sentence as
    specific for gating (Classify reads ``anchor_hits``), but as a presence detector they measure
    the topic, not the claim — "Alabama spans roughly west −88.47 …" carries "alabama" whether or
    not the claim's bounding box survived."""
    return tuple(h.token for h in anchor_hits(text, params, anchor_set) if weak or not h.weak)


@lru_cache(maxsize=64)
def _normalised(text: str) -> str:
    return normalise(text)


def df(anchor: str, units: Iterable[Unit]) -> int:
    """df(a, C): the number of units whose normalised text contains the anchor."""
    return sum(1 for u in units if anchor in _normalised(u.shown))


def discriminative(found: Iterable[str], units: Iterable[Unit], params: Params = DEFAULT_PARAMS) -> tuple[str, ...]:
    """A_disc: the anchors carried by at most ⌈f·|C|⌉ units (an anchor every source carries
    cannot distinguish between them)."""
    pool = tuple(units)
    limit = math.ceil(params.discriminative_df_fraction * len(pool))
    return tuple(a for a in found if df(a, pool) <= limit)


def cov(found: Iterable[str], text: str) -> float:
    """cov(A, x): the fraction of anchors present in ν(x); cov(∅, x) = 0."""
    pool = tuple(found)
    if not pool:
        return 0.0
    haystack = _normalised(text)
    return sum(1 for a in pool if a in haystack) / len(pool)
