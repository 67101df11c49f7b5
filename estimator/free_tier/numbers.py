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
* a number written with thousands separators loses them (``12,000`` reads ``12000``), and a decimal
  comma becomes a point: ``1.234,50``, ``1 234,50`` (thin or non-breaking spaces too) and ``1234.50``
  all read ``1234.50``, ``39,90`` reads ``39.90``; a comma before exactly three digits (``12,000``)
  is read as grouping, the English way;
* currency symbols and codes before or after the number (``39,90 €``, ``189,00 zł``, ``CHF 12.50``,
  ``3,980円``) read ``<number> <code>`` like ``$``;
* full-width forms read as their ASCII twins (``２０２５`` is ``2025``), and thin, non-breaking and
  ideographic spaces as spaces.

``Folded`` keeps a map from the folded text back to the original, so a block found in the folded
source is cited with the source's exact text (``original_span``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

SYMBOL_CODES: dict[str, str] = {
    "$": "usd",
    "€": "eur",
    "£": "gbp",
    "¥": "jpy",
    "₹": "inr",
    "₩": "krw",
    "₽": "rub",
    "円": "jpy",
    "元": "cny",
    "zł": "pln",
    "kč": "czk",
    "kr": "kr",  # krona or krone: which one is the context's to say
}
CODES = (
    "usd",
    "eur",
    "gbp",
    "jpy",
    "cad",
    "aud",
    "chf",
    "cny",
    "inr",
    "mxn",
    "nzd",
    "sgd",
    "hkd",
    "pln",
    "sek",
    "nok",
    "dkk",
    "czk",
    "huf",
    "brl",
    "krw",
    "zar",
)
_CODE = "(?:" + "|".join(CODES) + ")"
_BEFORE = "[$€£¥₹₩₽]"  # symbols written before the number (or after it)
_AFTER = "(?:[$€£¥₹₩₽円元]|(?:zł|kč|kr)(?!\\w))"  # symbols written after the number
# English grouping (1,234.50), continental grouping (1.234,50), grouping by spaces with a decimal comma
# (1 234,50 — thin and non-breaking spaces are spaces by now), a decimal comma (39,90), plain (1234.50);
# written with the shared first digits factored out, tried in this order
_GROUPED_NUM = r"\d{1,3}(?:(?:,\d{3})+(?:\.\d+)?|(?:\.\d{3})+,\d+|(?: \d{3})+,\d+)|\d+,\d{1,2}(?!\d)"
_NUM = r"(?>\d{1,3}(?:(?:,\d{3})+(?:\.\d+)?|(?:\.\d{3})+,\d+|(?: \d{3})+,\d+)|\d+(?:,\d{1,2}(?!\d)|\.\d+)?)"
# grouping by spaces without a decimal part (1 234 €) only right before a symbol or code
_NUM_BEFORE_UNIT = rf"(?>\d{{1,3}}(?: \d{{3}})+(?= ?(?:{_AFTER}|{_CODE}\b))|{_NUM})"
_END = r"(?![\d,]\d|\.\d)"
_SPACE_LIKE = "\t\n\r\f\v\x1c\x1d\x1e\x1f\x85\u2028\u2029\xa0"
_WHITESPACE = str.maketrans({c: " " for c in _SPACE_LIKE})
_WIDE_SPACES = "\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
# full-width forms read as their ASCII twins, one character for one (２０２５年 is 2025年, ￥ is ¥)
_FULL_WIDTH = str.maketrans(
    {**{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)}, "￥": "¥", "￡": "£", **{c: " " for c in _WIDE_SPACES}}
)
_SPACES = re.compile(r"  +")
# symbol or digit first, so the scan is cheap; the code-first form runs only where a code occurs
_AMOUNT = re.compile(
    rf"(?<![\w.,$€£¥₹₩₽])(?:(?P<symbol>{_BEFORE}) ?(?P<n1>{_NUM}){_END}(?: ?(?P<code1>{_CODE})\b)?"
    rf"|(?P<n2>{_NUM_BEFORE_UNIT}) ?(?=[a-z$€£¥₹₩₽円元])(?:(?P<code>{_CODE})\b|(?P<after>{_AFTER}))"
    rf"|(?P<grouped>{_GROUPED_NUM}){_END})"
)
_CODE_FIRST = re.compile(rf"\b(?P<code2>{_CODE}) ?(?P<n3>{_NUM}){_END}")
# what must occur for an amount or a grouped number to be there (codes are looked for separately)
_TRIGGER_SYMBOLS = ("$", "€", "£", "¥", "₹", "₩", "₽", "円", "元", "zł", "kč", "kr")
_COMMA_BETWEEN_DIGITS = re.compile(r"\d,\d")
_ENGLISH_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def _number(text: str, amount: bool) -> str:
    """The number with its grouping removed and ``.`` as the decimal mark: ``1.234,50``,
    ``1 234,50`` and ``1,234.50`` all read ``1234.50``; ``39,90`` reads ``39.90``."""
    plain = text.replace(" ", "")
    if "," in plain and "." in plain:
        if plain.rfind(",") > plain.rfind("."):
            plain = plain.replace(".", "").replace(",", ".")
        else:
            plain = plain.replace(",", "")
    elif "," in plain:
        plain = plain.replace(",", "") if _ENGLISH_GROUPED.fullmatch(plain) else plain.replace(",", ".")
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
    if groups.get("after") is not None:
        return f"{_number(match.group('n2'), True)} {SYMBOL_CODES[match.group('after')]}"
    if groups.get("code2") is not None:
        return f"{_number(match.group('n3'), True)} {match.group('code2')}"
    if groups.get("grouped") is not None:
        return _number(match.group("grouped"), False)
    return " "  # a run of spaces


def _replacements(spaced: str) -> list[tuple[int, int, str]]:
    """(start, end, replacement) of every change after whitespace is spaced, in order, disjoint."""
    found = [m for m in _SPACES.finditer(spaced)]
    has_code = any(c in spaced for c in CODES)
    if has_code or any(c in spaced for c in _TRIGGER_SYMBOLS) or _COMMA_BETWEEN_DIGITS.search(spaced):
        found += _AMOUNT.finditer(spaced)
        if has_code:
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
    if not spaced.isascii():  # (a constant-time test) thin, ideographic and full-width forms, one for one
        spaced = spaced.translate(_FULL_WIDTH)
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
