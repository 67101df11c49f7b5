"""The named pattern groups of Algorithm 2: the seed's, and those for what agents assert.

The seed's groups (§7.2) were tuned on an Earth-observation data agent: paths, identifiers,
ALLCAPS, quantities with km/px/%, ISO dates, decimals. Customer-service agents are audited for
other facts — prices, refunds, clock times, natural dates, seat and bag counts, booking codes,
passenger names, and reply lines such as ``- **Cabin:** Business`` — and the seed's groups miss
most of them. The groups added here are general forms, not a vocabulary of one domain:

* ``currency``: an amount with a symbol or an ISO code, with grouping and decimals;
* ``clock_time``: 24-hour or AM/PM times, with a zone abbreviation and a ``+1`` day offset;
* ``natural_date``: a month name with a day (and year), or a month with a year;
* ``count``: a number or number word (or a range) with a counted noun, up to two modifiers between;
* ``range``: two numbers joined by a dash or "to";
* ``digit_code``: an upper-case record code that starts with a digit (``4NQLHD``);
* ``long_number``: a number of four or more digits (card endings, gift card numbers, years);
* ``email``, ``url``, ``phone``, ``percentage``;
* ``key_value``: a ``Key: value`` line (list item or not) whose value is short and specific —
  *weak* (see below);
* ``list_item_name``: a list item that is only a capitalised name (``2. James Kim``) — *weak*;
* ``service_tier``: a tier word with the thing it grades (``business class``, ``basic economy``,
  ``gold member``, ``premium plan``) — *weak*, like names;
* ``proper_name``: a capitalised word sequence that does not start a sentence — *weak*.

A *weak* anchor marks a sentence as specific but is no evidence of the claim itself: a name alone
does not turn an offer into a claim (Classify's "anchors beat modal phrasing" needs a strong
anchor), and names, tiers and whole ``key: value`` lines make poor presence detectors for the
probe (a regeneration repeats the topic's names, or states the value in other words), so
``anchors()`` — the probe's presence detector — leaves them out; the values inside such lines
($121, 5XR2KQ, 06:00 EST) are strong anchors of their own groups.

Each group names cheap necessary conditions (a digit; its ``trigger``: an ``@``, a digit before a
colon) so a sentence that cannot match is not scanned: a scan costs microseconds even when it finds
nothing, and most sentences can match only a few groups. The seed's guards (stop-words, short
alphabetic words, path-likeness) apply to every group's token in ``anchors``.

The service tiers are the one closed vocabulary here (tier words and the nouns they grade); the
counted nouns of ``count`` are generic units of what is counted (people, items, bookings, time).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import regex

Token = Callable[["regex.Match[str]"], "str | None"]
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class TextSketch:
    """What a text offers, computed once per text: the text, its lower case, whether it has a digit."""

    text: str
    lower: str
    digit: bool

    @classmethod
    def of(cls, text: str) -> TextSketch:
        return cls(text, text.lower(), _DIGIT.search(text) is not None)


Trigger = Callable[[TextSketch], bool]


def has(*literals: str) -> Trigger:
    """Any of ``literals`` occurs in the lower-cased text."""
    return lambda p: any(s in p.lower for s in literals)


def search(pattern: str) -> Trigger:
    """A trivial, linear pattern (standard ``re``, no timeout needed) occurs in the text."""
    compiled = re.compile(pattern)
    return lambda p: compiled.search(p.text) is not None


@dataclass(frozen=True)
class PatternGroup:
    """One named pattern of Algorithm 2.

    ``token`` turns a match into the anchor text (default: the match itself), or rejects it.
    ``digit`` (the text has a digit) and ``trigger`` (a literal or a trivial linear pattern, tested
    on a ``TextSketch`` of the text) are necessary conditions for a match, so the group's own timed
    scan runs only on texts that could match. A ``weak`` group's anchors never beat modal phrasing
    in Classify and are left out of the presence detector. A ``covers`` group's match absorbs the
    other matches inside it (``$1,234.50`` is one anchor, not also ``234.50``).
    """

    name: str
    pattern: str
    seed: bool = False
    weak: bool = False
    digit: bool = False
    trigger: Trigger | None = None
    token: Token | None = None
    covers: bool = False


SEED_GROUPS: tuple[PatternGroup, ...] = (
    PatternGroup("backticked", r"`[^`\n]{2,80}`", seed=True, trigger=has("`")),
    PatternGroup("path", r"\b[A-Za-z0-9_]+(/[A-Za-z0-9_.*+-]+)+\b", seed=True, trigger=has("/")),
    PatternGroup("allcaps", r"\b[A-Z][A-Z0-9_]{2,}\b", seed=True, trigger=search(r"[A-Z][A-Z0-9_]{2}")),
    PatternGroup("underscore_identifier", r"\b[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)+\b", seed=True, trigger=has("_")),
    PatternGroup("camel_case", r"\b[a-z]+([A-Z][a-z0-9]+)+\b", seed=True, trigger=search(r"[a-z][A-Z]")),
    PatternGroup(
        "quantity_unit", r"\b\d+(\.\d+)?\s?(?i:km|nm|mm|cm|deg|%|kb|mb|gb|tb|hz|px)(?:\b|(?<=%))", seed=True, digit=True
    ),
    PatternGroup("degrees", r"\d+(\.\d+)?\s?°", seed=True, trigger=has("°")),
    PatternGroup("iso_date", r"\b\d{4}-\d{2}-\d{2}\b", seed=True, digit=True, trigger=search(r"\d{4}-\d")),
    PatternGroup("version_decimal", r"\bv?\d+\.\d+(\.\d+)?\b", seed=True, digit=True, trigger=search(r"\d\.\d")),
)

_NUMBER = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
CURRENCY_SYMBOLS = "$€£¥₹"
CURRENCY_CODES = ("USD", "EUR", "GBP", "JPY", "CAD", "AUD", "CHF", "CNY", "INR", "MXN", "NZD", "SGD", "HKD")
_CODE = "(?:" + "|".join(CURRENCY_CODES) + ")"
_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)"
)
MONTH_STEMS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
NUMBER_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_ZONE = r"(?:[A-Z]{1,4}T|UTC|GMT|Z)"
_AMPM = r"(?:[AaPp]\.?[Mm]\.?(?![A-Za-z]))"
_NUMBER_WORD = r"(?:[Oo]ne|[Tt]wo|[Tt]hree|[Ff]our|[Ff]ive|[Ss]ix|[Ss]even|[Ee]ight|[Nn]ine|[Tt]en|[Ee]leven|[Tt]welve)"
# words that end a noun phrase rather than modify a counted noun ("one of these flights" is no count)
_NOT_MODIFIER = (
    r"(?:of|the|these|those|this|that|your|my|our|their|his|her|its|a|an|or|and|to|for|in|on"
    r"|at|by|with|from|more|less|than|is|are|was|were|be|been|will|can|per|each|every|any)"
)
COUNTED_NOUNS = (
    "passenger",
    "person",
    "adult",
    "child",
    "infant",
    "guest",
    "traveller",
    "traveler",
    "member",
    "user",
    "customer",
    "seat",
    "bag",
    "suitcase",
    "piece",
    "item",
    "product",
    "unit",
    "order",
    "package",
    "parcel",
    "shipment",
    "ticket",
    "flight",
    "stop",
    "layover",
    "connection",
    "segment",
    "leg",
    "night",
    "room",
    "day",
    "week",
    "month",
    "year",
    "hour",
    "minute",
    "second",
    "point",
    "mile",
    "reservation",
    "booking",
    "account",
    "card",
    "certificate",
    "voucher",
    "payment",
    "installment",
    "file",
    "record",
    "row",
    "result",
    "page",
    "document",
    "attempt",
    "option",
    "time",
)
_COUNTED = "(?:" + "|".join(COUNTED_NOUNS) + ")s?|people|children|persons"
_QUANTITY = rf"(?:\d+(?:\s?(?:-|–|to)\s?\d+)?|{_NUMBER_WORD})"

TIERS = (
    "basic",
    "economy",
    "business",
    "first",
    "premium",
    "standard",
    "regular",
    "bronze",
    "silver",
    "gold",
    "platinum",
    "diamond",
    "pro",
    "enterprise",
)
_TIER = "(?:" + "|".join(TIERS) + ")"

# A value that starts like a sentence or a request is prose, not a field value.
_PROSE_START = frozenset(
    {
        "the",
        "a",
        "an",
        "your",
        "our",
        "my",
        "this",
        "that",
        "these",
        "those",
        "any",
        "some",
        "you",
        "we",
        "i",
        "i'll",
        "i'm",
        "please",
        "if",
        "to",
        "when",
        "once",
        "here",
        "there",
        "it",
        "they",
        "let",
        "would",
        "could",
        "should",
        "can",
        "will",
        "what",
        "which",
        "how",
        "is",
        "are",
    }
)
MAX_VALUE_WORDS = 6
_ASIDE = regex.compile(r"\s*\([^()]*\)\s*$")
MAX_KEY_WORDS = 5
_MARKUP = "*_` \t"

# Capitalised words that are not names: calendar words (a weekday alone is a relative date) and
# sentence openers that follow a comma.
NOT_NAMES = frozenset(
    {
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "please",
        "thank",
        "thanks",
        "yes",
        "no",
        "hello",
        "hi",
        "dear",
        "okay",
        "however",
        "unfortunately",
        "additionally",
        "also",
        "then",
        "otherwise",
        "if",
        "once",
        "let",
        "feel",
        "note",
        "great",
        "sure",
    }
)


_DIGIT_WORD = re.compile(r"\d\s[a-z]")


def _count_trigger(p: TextSketch) -> bool:
    return (p.digit and _DIGIT_WORD.search(p.text) is not None) or any(w + " " in p.lower for w in NUMBER_WORDS)


def _key_value(match: regex.Match[str]) -> str | None:
    """``Key: value`` where the key is a short label and the value short and specific."""
    key = match.group("key").strip(_MARKUP)
    value = match.group("value").strip(_MARKUP).rstrip(".;,").strip(_MARKUP)
    if not key or not value or len(key.split()) > MAX_KEY_WORDS:
        return None
    value = _ASIDE.sub("", value) or value  # a trailing "(…)" is an aside, not the value
    words = value.split()
    if len(words) > MAX_VALUE_WORDS or words[0].lower().strip("*_(") in _PROSE_START:
        return None
    if key.split()[0].lower() in _PROSE_START:
        return None
    first = value.lstrip("(")[:1]
    if not (first.isupper() or first.isdigit() or first in CURRENCY_SYMBOLS or first == "+"):
        return None
    return f"{key}: {value}".replace("**", "").lower()


def _proper_name(match: regex.Match[str]) -> str | None:
    name = match.group()
    return None if name.split()[0].lower() in NOT_NAMES else name


def _list_name(match: regex.Match[str]) -> str | None:
    name = match.group("name")
    return None if name.split()[0].lower() in NOT_NAMES else name


AGENT_GROUPS: tuple[PatternGroup, ...] = (
    PatternGroup(
        "currency",
        rf"(?<![\w$])[{CURRENCY_SYMBOLS}]\s?{_NUMBER}(?![\d,]\d)"
        rf"|\b{_NUMBER}\s?{_CODE}\b|\b{_CODE}\s?{_NUMBER}(?![\d,]\d)",
        covers=True,
        digit=True,
        trigger=has(*CURRENCY_SYMBOLS, *(c.lower() for c in CURRENCY_CODES)),
    ),
    PatternGroup(
        "clock_time",
        rf"\b(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d)?(?!\d)(?:\s?{_AMPM})?(?:\s?\+\d\b)?"
        rf"(?:\s{_ZONE}\b)?"
        rf"|\b(?:1[0-2]|0?[1-9])\s?{_AMPM}(?:\s{_ZONE}\b)?",
        covers=True,
        digit=True,
        trigger=search(r"\d:\d|\d\s?[AaPp]\.?[Mm]"),
    ),
    PatternGroup(
        "natural_date",
        rf"\b{_MONTH}\.?\s{_DAY}\b(?:,?\s\d{{4}}\b)?"
        rf"|\b{_DAY}\s(?:of\s)?{_MONTH}\b(?:,?\s\d{{4}}\b)?"
        rf"|\b{_MONTH}\s\d{{4}}\b",
        covers=True,
        digit=True,
        trigger=has(*MONTH_STEMS),
    ),
    PatternGroup(
        "count",
        rf"(?<![\w.,:/$-]){_QUANTITY}\s(?:(?!{_NOT_MODIFIER}\b)[a-z][a-z-]*\s){{0,2}}"
        rf"(?:{_COUNTED})\b",
        covers=True,
        trigger=_count_trigger,
    ),
    PatternGroup(
        "range",
        r"(?<![\w.,:/-])\d+(?:\.\d+)?\s?(?:-|–|—|\sto\s)\s?\d+(?:\.\d+)?(?![\w,/-]|\.\d)",
        covers=True,
        digit=True,
        trigger=search(r"\d\s?(?:[-–—]|\sto\s)\s?\d"),
    ),
    PatternGroup("digit_code", r"\b(?=[A-Z0-9]{5,}\b)\d+[A-Z][A-Z0-9]*\b", digit=True, trigger=search(r"\d[A-Z]")),
    PatternGroup("long_number", r"(?<![\w.,$€£¥₹-])\d{4,}(?![\w-]|[.,]\d)", digit=True, trigger=search(r"\d{4}")),
    PatternGroup("email", r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b", trigger=has("@")),
    PatternGroup(
        "url", r"\b(?:https?://|www\.)[^\s<>()\[\]\"'`]+[^\s<>()\[\]\"'`.,;:!?*]", trigger=has("http", "www.")
    ),
    PatternGroup(
        "phone",
        r"(?<![\w+])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}(?!\d)",
        covers=True,
        digit=True,
        trigger=search(r"\d{3}[\s.-]\d{4}"),
    ),
    PatternGroup(
        "percentage",
        r"\b\d+(?:\.\d+)?\s?(?:%|percent\b|per\scent\b)",
        covers=True,
        digit=True,
        trigger=has("%", "percent", "per cent"),
    ),
    PatternGroup(
        "key_value",
        r"(?m)^[ \t]*(?:[-*+][ \t]+|\d{1,3}[.)][ \t]+)?[*_]*[ \t]*"
        r"(?P<key>[A-Z][A-Za-z0-9&/()' -]{0,39}?)[ \t]*[*_]*[ \t]*(?<!\d):(?!\d)[ \t]*[*_]*[ \t]*"
        r"(?P<value>[^\s*_][^\n]{0,79}?)[ \t]*$",
        weak=True,
        trigger=has(":"),
        token=_key_value,
    ),
    PatternGroup(
        "list_item_name",
        r"(?m)^[ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]+[*_]*"
        r"(?P<name>[A-Z][a-z]+(?:[ \t]+[A-Z][a-z]+){1,3})[*_]*[ \t]*\.?[ \t]*$",
        weak=True,
        trigger=search(r"(?m)^[ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]"),
        token=_list_name,
    ),
    PatternGroup(
        "service_tier",
        rf"\b(?i:{_TIER})\s(?:(?i:class|cabin|member|membership|tier|plan|fare|seat)s?\b"
        r"|(?i:economy)\b)|\b(?i:economy|business|first)\s(?i:class|cabin)\b",
        weak=True,
        trigger=has(*TIERS),
    ),
    PatternGroup(
        "proper_name",
        r"(?<=(?<![\w'’-])[a-z][a-z'’]*[,;]?[ \t]|[0-9)][,;]?[ \t])"
        r"[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?(?:[ \t][A-Z][a-z]+)*\b",
        weak=True,
        trigger=search(r"[a-z0-9,;)][ \t][A-Z][a-z]"),
        token=_proper_name,
    ),
)

GROUPS: dict[str, tuple[PatternGroup, ...]] = {
    "seed": SEED_GROUPS,
    "agent": SEED_GROUPS + AGENT_GROUPS,
}
DEFAULT_GROUPS = "agent"
