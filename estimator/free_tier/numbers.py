"""One reading of a text for verbatim matching: case, spacing, numbers and amounts folded alike.

BestVerbatim compares a sentence with its sources character by character. Written the same fact
two ways — ``$1,234.50`` in the reply, ``1234.50 USD`` in the tool's return; ``Drop the parcel``
at the start of a sentence, ``drop the parcel`` inside the source; a line break in the source
where the reply has a space — the two would share only fragments. ``fold`` maps both sides to one
canonical form:

* letters are lower-cased (one character for one, so offsets survive);
* a run of whitespace other than one space becomes one space;
* an amount with a currency symbol or ISO code becomes ``<number> <code>``: ``$1,234.50``,
  ``USD 1234.50`` and ``1234.50 USD`` all read ``1234.50 usd``; an all-zero fraction is dropped
  (``$350.00`` reads ``350 usd``);
* a number written with thousands separators loses them (``12,000`` reads ``12000``).

``Folded`` keeps a map from the folded text back to the original, so a block found in the folded
source is cited with the source's exact text (``original_span``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

SYMBOL_CODES: dict[str, str] = {"$": "usd", "€": "eur", "£": "gbp", "¥": "jpy", "₹": "inr"}
CODES = ("usd", "eur", "gbp", "jpy", "cad", "aud", "chf", "cny", "inr", "mxn", "nzd", "sgd", "hkd")
_CODE = "(?:" + "|".join(CODES) + ")"
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_END = r"(?![\d,]\d|\.\d)"
_WHITESPACE = str.maketrans({c: " " for c in "\t\n\r\f\v\x1c\x1d\x1e\x1f\x85\u2028\u2029\xa0"})
_SPACES = re.compile(r"  +")
# symbol or digit first, so the scan is cheap; the code-first form runs only where a code occurs
_AMOUNT = re.compile(
    rf"(?<![\w.,$€£¥₹])(?:(?P<symbol>[$€£¥₹]) ?(?P<n1>{_NUM}){_END}(?: ?(?P<code1>{_CODE})\b)?"
    rf"|(?P<n2>{_NUM}) ?(?P<code>{_CODE})\b"
    rf"|(?P<grouped>\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?){_END})"
)
_CODE_FIRST = re.compile(rf"\b(?P<code2>{_CODE}) ?(?P<n3>{_NUM}){_END}")
_GROUPED = re.compile(r"\d,\d{3}")


def _number(text: str, amount: bool) -> str:
    plain = text.replace(",", "")
    if amount and "." in plain:
        whole, fraction = plain.split(".", 1)
        if not fraction.strip("0"):
            return whole
    return plain


def _canonical(match: re.Match[str]) -> str:
    groups = match.groupdict()
    if groups.get("symbol") is not None:
        code = match.group("code1") or SYMBOL_CODES[match.group("symbol")]  # "$5 USD" is one amount
        return f"{_number(match.group('n1'), True)} {code}"
    if groups.get("code") is not None:
        return f"{_number(match.group('n2'), True)} {match.group('code')}"
    if groups.get("code2") is not None:
        return f"{_number(match.group('n3'), True)} {match.group('code2')}"
    if groups.get("grouped") is not None:
        return _number(match.group("grouped"), False)
    return " "  # a run of spaces


def _replacements(spaced: str) -> list[tuple[int, int, str]]:
    """(start, end, replacement) of every change after whitespace is spaced, in order, disjoint."""
    found = [m for m in _SPACES.finditer(spaced)]
    if any(c in spaced for c in SYMBOL_CODES) or _GROUPED.search(spaced) or any(c in spaced for c in CODES):
        found += _AMOUNT.finditer(spaced)
        if any(c in spaced for c in CODES):
            found += _CODE_FIRST.finditer(spaced)
    found.sort(key=lambda m: m.start())
    out: list[tuple[int, int, str]] = []
    cursor = 0
    for m in found:
        if m.start() < cursor:
            continue  # overlaps an earlier change
        replacement = _canonical(m)
        if replacement != m.group():
            out.append((m.start(), m.end(), replacement))
            cursor = m.end()
    return out


def _lower(text: str) -> str:
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered  # lower() never shortens a character, so equal length means one for one
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


@dataclass(frozen=True)
class Folded:
    """A folded text and the map back: piece i starts at ``starts[i]`` in the folded text and comes
    from ``original[spans[i][0]:spans[i][1]]``; a ``literal`` piece maps character for character."""

    original: str
    text: str
    starts: tuple[int, ...]
    spans: tuple[tuple[int, int], ...]
    literal: tuple[bool, ...]

    def _piece(self, at: int) -> int:
        return max(0, bisect_right(self.starts, at) - 1)

    def original_start(self, at: int) -> int:
        """The original offset of the folded offset ``at`` (a piece's start if ``at`` falls inside it)."""
        if not self.starts:
            return 0
        i = self._piece(at)
        begin, end = self.spans[i]
        return min(end, begin + (at - self.starts[i])) if self.literal[i] else begin

    def original_end(self, at: int) -> int:
        """The original offset just after folded character ``at - 1`` (a piece's end if inside it)."""
        if at <= 0 or not self.starts:
            return 0
        i = self._piece(at - 1)
        begin, end = self.spans[i]
        return min(end, begin + (at - self.starts[i])) if self.literal[i] else end

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        return self.original_start(start), self.original_end(end)


@lru_cache(maxsize=256)
def fold(text: str) -> Folded:
    """The canonical reading of ``text`` for verbatim matching, with its map back to ``text``.
    Cached: a turn's system prompt and history recur in every later turn of the conversation."""
    spaced = _lower(text).translate(_WHITESPACE)  # one character for one: offsets still agree
    out: list[str] = []
    starts: list[int] = []
    spans: list[tuple[int, int]] = []
    literal: list[bool] = []
    size = cursor = 0

    def piece(chunk: str, begin: int, end: int, is_literal: bool) -> None:
        nonlocal size
        if chunk:
            starts.append(size)
            spans.append((begin, end))
            literal.append(is_literal)
            out.append(chunk)
            size += len(chunk)

    for begin, end, replacement in _replacements(spaced):
        piece(spaced[cursor:begin], cursor, begin, True)
        piece(replacement, begin, end, False)
        cursor = end
    piece(spaced[cursor:], cursor, len(text), True)
    return Folded(text, "".join(out), tuple(starts), tuple(spans), tuple(literal))


def literal(text: str) -> Folded:
    """The identity reading (no folding): the seed's BestVerbatim compared texts as written."""
    return Folded(text, text, (0,) if text else (), ((0, len(text)),) if text else (), (True,) if text else ())
