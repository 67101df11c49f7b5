"""Normalise (§6.6) and Algorithm 5a — VerifyQuote with the one-pass bisection line search.

Normalise casefolds, decodes literal JSON escapes in one left-to-right pass, then collapses
whitespace. Every backslash that survives decoding (a lone one, or a decoded ``\\\\``) becomes
one reserved character, so the output never contains a backslash: that makes Normalise
idempotent, and — because decoding works escape by escape — any substring that does not
split an escape normalises to a substring of the whole.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import regex

BACKSLASH_SENTINEL = "\u2216"  # SET MINUS: stands for a literal backslash after decoding
_ESCAPE = regex.compile(r"\\([\"\\/nrt])|\\")
_DECODED = {'"': '"', "/": "/", "n": " ", "r": " ", "t": " ", "\\": BACKSLASH_SENTINEL}
_WS = regex.compile(r"\s+")


def _decode(match: regex.Match[str]) -> str:
    escaped = match.group(1)
    return BACKSLASH_SENTINEL if escaped is None else _DECODED[escaped]


def normalise(text: str) -> str:
    """ν: casefold, decode literal JSON escapes (\\" \\n \\r \\t \\/ \\\\), collapse whitespace."""
    decoded = _ESCAPE.sub(_decode, text.casefold())
    return _WS.sub(" ", decoded).strip()


@dataclass(frozen=True)
class QuoteCheck:
    """The outcome of VerifyQuote: verified or not, and the tightest 1-based line window."""

    verified: bool
    line_start: int | None = None
    line_end: int | None = None


NOT_VERIFIED = QuoteCheck(False)


def verify_quote(quote: str | None, source_text: str, min_quote_len: int = 12) -> QuoteCheck:
    """Algorithm 5a: is the quote (normalised) a substring of the source, and on which lines."""
    if quote is None or len(quote.strip()) < min_quote_len:
        return NOT_VERIFIED
    needle = normalise(quote)
    if not needle or needle not in normalise(source_text):
        return NOT_VERIFIED
    lines = source_text.split("\n")
    parts: list[str] = []
    ends: list[int] = []
    lineno: list[int] = []
    offset = 0
    for i, line in enumerate(lines):
        n = normalise(line)
        if not n:
            continue  # blank lines never renumber the others
        if parts:
            offset += 1  # the joining space
        parts.append(n)
        offset += len(n)
        ends.append(offset)
        lineno.append(i + 1)
    at = " ".join(parts).find(needle)
    if at < 0:
        return QuoteCheck(True, 1, len(lines))
    return QuoteCheck(True, lineno[bisect_right(ends, at)], lineno[bisect_right(ends, at + len(needle) - 1)])
