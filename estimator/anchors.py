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
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache

import regex

from .params import DEFAULT_PARAMS, Params
from .units import Unit
from .verify import normalise

# (name, pattern) in the order of §7.2. Case-sensitive; only the unit group scopes its own (?i:).
PATTERNS: tuple[tuple[str, str], ...] = (
    ("backticked", r"`[^`\n]{2,80}`"),
    ("path", r"\b[A-Za-z0-9_]+(/[A-Za-z0-9_.*+-]+)+\b"),
    ("allcaps", r"\b[A-Z][A-Z0-9_]{2,}\b"),
    ("underscore_identifier", r"\b[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)+\b"),
    ("camel_case", r"\b[a-z]+([A-Z][a-z0-9]+)+\b"),
    ("quantity_unit", r"\b\d+(\.\d+)?\s?(?i:km|nm|mm|cm|deg|%|kb|mb|gb|tb|hz|px)(?:\b|(?<=%))"),
    ("degrees", r"\d+(\.\d+)?\s?°"),
    ("iso_date", r"\b\d{4}-\d{2}-\d{2}\b"),
    ("version_decimal", r"\bv?\d+\.\d+(\.\d+)?\b"),
)
COMPILED: tuple[regex.Pattern[str], ...] = tuple(regex.compile(p) for _, p in PATTERNS)

STRIP_CHARS = "`*_.,;:()[]{}\"'"

STOPWORDS: frozenset[str] = frozenset({
    # structural words that name a kind of thing rather than a thing (§7.2: json, id, name, path, file, …)
    "json", "yaml", "xml", "csv", "html", "http", "https", "www", "url", "uri", "api",
    "id", "ids", "name", "names", "path", "paths", "file", "files", "dir", "key", "keys",
    "type", "value", "values", "data", "text", "string", "true", "false", "null", "none",
    # capitalised emphasis in prompts and answers, not identifiers
    "and", "not", "all", "any", "only", "must", "never", "always", "note", "important",
    "todo", "faq", "tbd",
})

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


def _matches(pattern: regex.Pattern[str], text: str, timeout: float) -> list[tuple[int, str]]:
    """All matches of one pattern, or none if the pattern times out on this text."""
    try:
        return [(m.start(), m.group()) for m in pattern.finditer(text, timeout=timeout)]
    except TimeoutError:
        return []


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


def anchors(text: str, params: Params = DEFAULT_PARAMS) -> tuple[str, ...]:
    """Algorithm 2: the anchors of ``text``, lowercased, deduplicated, in order of appearance."""
    hits: list[tuple[int, int, str]] = []
    for rank, pattern in enumerate(COMPILED):
        for start, match in _matches(pattern, text, params.regex_timeout_seconds):
            hits.append((start, rank, match))
    hits.sort(key=lambda h: (h[0], h[1]))
    found: list[str] = []
    seen: set[str] = set()
    for _, _, match in hits:
        token = _keep(match, params.min_anchor_len)
        if token is not None and token not in seen:
            seen.add(token)
            found.append(token)
    return tuple(found)


@lru_cache(maxsize=64)
def _normalised(text: str) -> str:
    return normalise(text)


def df(anchor: str, units: Iterable[Unit]) -> int:
    """df(a, C): the number of units whose normalised text contains the anchor."""
    return sum(1 for u in units if anchor in _normalised(u.text))


def discriminative(found: Iterable[str], units: Iterable[Unit],
                   params: Params = DEFAULT_PARAMS) -> tuple[str, ...]:
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
