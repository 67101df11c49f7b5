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
from functools import lru_cache

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
# Amounts as written outside the US: a decimal comma (39,90), grouping by points, spaces (thin and
# non-breaking too) or apostrophes (1.234,50 · 1 234,50 · 1'234.50), the symbol or code before or
# after (39,90 € · 189,00 zł · CHF 12.50 · 3,980円 · 50 kr).
INTL_CURRENCY_CODES = (*CURRENCY_CODES, "PLN", "SEK", "NOK", "DKK", "CZK", "HUF", "BRL", "KRW", "RUB", "ZAR")
_INTL_CODE = "(?:" + "|".join(INTL_CURRENCY_CODES) + ")"
_SYMBOL_BEFORE = "[€£¥₹₩₽￥]"  # "$" is the ``currency`` group's
_SYMBOL_AFTER = r"(?:[€£¥₹₩₽￥円元]|(?:zł|kč|Kč|kr|Fr)(?![\w]))"
_INTL_NUMBER = r"(?:\d{1,3}(?:[,.']\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d+)?)"
_INTL_NUMBER_SPACED = r"(?:\d{1,3}(?:[,.'\u00a0\u202f\u2009 ]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d+)?)"
_INTL_CURRENCY_STRINGS = (
    *("€", "£", "¥", "₹", "₩", "₽", "￥", "円", "元", "zł", "kč", "Kč"),
    *INTL_CURRENCY_CODES[len(CURRENCY_CODES) :],
)
_INTL_NUMBER_FORMS = re.compile(r"\d(?:\s?(?:kr|Fr)\b|,\d{1,2}(?!\d)|['\u00a0\u202f\u2009 ]\d{3}(?!\d)|\.\d{3},)")


def _intl_currency_trigger(p: TextSketch) -> bool:
    """A symbol or code of another currency, or a number written another way (39,90 · 1 234 · 1.234,5)."""
    return any(c in p.text for c in _INTL_CURRENCY_STRINGS) or _INTL_NUMBER_FORMS.search(p.text) is not None


_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)"
)
MONTH_STEMS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")

# Month names of other languages, day first ("3. März 2025", "3 mars", "3 de marzo de 2025", "3 marca",
# "3 maart", "3 Μαρτίου"): one table per language, the forms a date uses (Polish and Greek: genitive).
MONTHS_BY_LANGUAGE: dict[str, tuple[str, ...]] = {
    "de": (
        "Januar",
        "Jänner",
        "Februar",
        "März",
        "April",
        "Mai",
        "Juni",
        "Juli",
        "August",
        "September",
        "Oktober",
        "November",
        "Dezember",
        "Jan",
        "Feb",
        "Mär",
        "Apr",
        "Jun",
        "Jul",
        "Aug",
        "Sep",
        "Sept",
        "Okt",
        "Nov",
        "Dez",
    ),
    "fr": (
        "janvier",
        "février",
        "mars",
        "avril",
        "mai",
        "juin",
        "juillet",
        "août",
        "septembre",
        "octobre",
        "novembre",
        "décembre",
        "janv",
        "févr",
        "avr",
        "juil",
        "sept",
        "oct",
        "nov",
        "déc",
    ),
    "es": (
        "enero",
        "febrero",
        "marzo",
        "abril",
        "mayo",
        "junio",
        "julio",
        "agosto",
        "septiembre",
        "setiembre",
        "octubre",
        "noviembre",
        "diciembre",
    ),
    "it": (
        "gennaio",
        "febbraio",
        "marzo",
        "aprile",
        "maggio",
        "giugno",
        "luglio",
        "agosto",
        "settembre",
        "ottobre",
        "novembre",
        "dicembre",
    ),
    "pt": (
        "janeiro",
        "fevereiro",
        "março",
        "abril",
        "maio",
        "junho",
        "julho",
        "agosto",
        "setembro",
        "outubro",
        "novembro",
        "dezembro",
    ),
    "pl": (
        "stycznia",
        "lutego",
        "marca",
        "kwietnia",
        "maja",
        "czerwca",
        "lipca",
        "sierpnia",
        "września",
        "października",
        "listopada",
        "grudnia",
    ),
    "nl": (
        "januari",
        "februari",
        "maart",
        "april",
        "mei",
        "juni",
        "juli",
        "augustus",
        "september",
        "oktober",
        "november",
        "december",
    ),
    "el": (
        "Ιανουαρίου",
        "Φεβρουαρίου",
        "Μαρτίου",
        "Απριλίου",
        "Μαΐου",
        "Μαίου",
        "Ιουνίου",
        "Ιουλίου",
        "Αυγούστου",
        "Σεπτεμβρίου",
        "Οκτωβρίου",
        "Νοεμβρίου",
        "Δεκεμβρίου",
    ),
}
INTL_MONTHS: tuple[str, ...] = tuple(
    sorted({m for names in MONTHS_BY_LANGUAGE.values() for m in names}, key=lambda m: (-len(m), m))
)
_INTL_MONTH = "(?i:" + "|".join(INTL_MONTHS) + r")(?!\w)"
INTL_MONTH_STEMS: tuple[str, ...] = tuple(sorted({m[:3].lower() for m in INTL_MONTHS}))

# Counted nouns of other languages (the forms that follow a number), one table per language; Polish
# and Greek inflect, so their entries are stems.
COUNTED_BY_LANGUAGE: dict[str, tuple[str, ...]] = {
    "de": (
        "Gepäckstück",
        "Gepäckstücke",
        "Koffer",
        "Taschen?",
        "Personen?",
        "Passagiere?",
        "Reisende",
        "Erwachsene",
        "Kinder?",
        "Nächte",
        "Nacht",
        "Tage?n?",
        "Wochen?",
        "Monate?n?",
        "Jahre?n?",
        "Stunden?",
        "Minuten?",
        "Sitzplätze",
        "Sitzplatz",
        "Plätze",
        "Tickets?",
        "Artikel",
        "Stück",
        "Zimmer",
        "Flüge",
        "Flug",
        "Bestellungen",
        "Bestellung",
        "Pakete?",
        "Werktage?n?",
        "Punkte?",
    ),
    "fr": (
        "bagages?",
        "valises?",
        "personnes?",
        "passagers?",
        "adultes?",
        "enfants?",
        "nuits?",
        "jours?",
        "semaines?",
        "mois",
        "ans",
        "années?",
        "heures?",
        "minutes?",
        "sièges?",
        "places?",
        "billets?",
        "articles?",
        "chambres?",
        "vols?",
        "commandes?",
        "colis",
        "points",
    ),
    "es": (
        "maletas?",
        "equipajes?",
        "personas?",
        "pasajeros?",
        "adultos?",
        "niños?",
        "noches?",
        "días?",
        "semanas?",
        "meses",
        "mes",
        "años?",
        "horas?",
        "minutos?",
        "asientos?",
        "billetes?",
        "boletos?",
        "artículos?",
        "habitaciones",
        "habitación",
        "vuelos?",
        "pedidos?",
        "paquetes?",
        "puntos",
    ),
    "it": (
        "bagagli",
        "bagaglio",
        "valigie",
        "valigia",
        "persone",
        "persona",
        "passeggeri",
        "adulti",
        "bambini",
        "notti",
        "notte",
        "giorni",
        "giorno",
        "settimane",
        "mesi",
        "anni",
        "ore",
        "minuti",
        "posti",
        "biglietti",
        "articoli",
        "camere",
        "voli",
        "ordini",
        "pacchi",
    ),
    "pt": (
        "malas?",
        "bagagens",
        "bagagem",
        "pessoas?",
        "passageiros?",
        "adultos?",
        "crianças?",
        "noites?",
        "dias?",
        "semanas?",
        "meses",
        "anos?",
        "horas?",
        "minutos?",
        "assentos?",
        "bilhetes?",
        "artigos?",
        "quartos?",
        "voos?",
        "pedidos?",
        "pacotes?",
    ),
    "pl": (
        "bagaż",
        "walizk",
        "walizek",
        "osob",
        "osób",
        "pasażer",
        "dorosł",
        "dzieci",
        "dziecko",
        "noc",
        "dni",
        "dzień",
        "tygodni",
        "tydzień",
        "miesi",
        "lat",
        "rok",
        "godzin",
        "minut",
        "miejsc",
        "bilet",
        "produkt",
        "pokoj",
        "pokój",
        "lot",
        "zamówie",
        "paczk",
        "paczek",
        "sztuk",
        "punkt",
    ),
    "nl": (
        "koffers?",
        "tassen",
        "personen",
        "persoon",
        "passagiers?",
        "volwassenen",
        "kinderen",
        "kind",
        "nachten",
        "nacht",
        "dagen",
        "dag",
        "weken",
        "week",
        "maanden",
        "maand",
        "jaar",
        "uur",
        "minuten",
        "stoelen",
        "tickets?",
        "artikelen",
        "kamers?",
        "vluchten",
        "vlucht",
        "bestellingen",
        "pakketten",
    ),
    "el": (
        "αποσκευ",
        "βαλίτσ",
        "άτομ",
        "επιβάτ",
        "ενήλικ",
        "παιδι",
        "νύχτ",
        "διανυκτερεύσ",
        "ημέρ",
        "μέρ",
        "εβδομάδ",
        "μήν",
        "μην",
        "χρόνι",
        "έτ",
        "ώρ",
        "λεπτ",
        "θέσ",
        "εισιτήρι",
        "προϊόν",
        "δωμάτι",
        "πτήσ",
        "παραγγελ",
        "δέμα",
        "δέματ",
        "πόντ",
    ),
}
_STEM_LANGUAGES = ("pl", "el")  # entries are stems: any word that starts with one
_INTL_COUNTED = (
    "(?i:(?:"
    + "|".join(w for lang, words in COUNTED_BY_LANGUAGE.items() if lang not in _STEM_LANGUAGES for w in words)
    + r")(?!\w)|(?:"
    + "|".join(w for lang in _STEM_LANGUAGES for w in COUNTED_BY_LANGUAGE[lang])
    + r")\w*)"
)
# Counters written right after the number in Japanese and Chinese (3名, 2泊, 5個, 10日間)
_CJK_COUNTER = "(?:名様|名|人|個|件|泊|営業日|日間|日|枚|点|本|台|回|時間|分間|週間|か月|ヶ月|カ月|年間|席|便|つ)"

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
_DIGIT_WORDS = re.compile(r"(?<!\d)\d+(?:\s?[-–]\s?\d+)?\s(?=(\w+)(?:\s(\w+))?)")  # zero-width: overlapping
_DAY_WORD = re.compile(r"\d(?:st|nd|rd|th|er|º|ª)?\.?\s(?:de\s)?(\w+)")
_YEAR = re.compile(r"\s\d{4}")
_DIGIT_H = re.compile(r"\d ?h")
_CJK_TIME = re.compile(r"\d時|[^\x00-\x7f]\d{1,2}:\d")
_TWO_DASHES = re.compile(r"\d-\d+-\d")
_AFTER_CJK = re.compile(r"[^\x00-\x7f]\d{4}")
_DOTTED_DATE = re.compile(r"\d\.\d{1,2}\.\d")
_INTL_MONTH_STEM_SET = frozenset(INTL_MONTH_STEMS)


def _intl_date_trigger(p: TextSketch) -> bool:
    """A day number before a word, or a word before a year, where the word starts like a month name of
    another language; or a CJK month (月); or a dotted date (3.3.2025)."""
    if ("月" in p.text and not p.text.isascii()) or _DOTTED_DATE.search(p.text):
        return True
    if any(m.group(1)[:3] in _INTL_MONTH_STEM_SET for m in _DAY_WORD.finditer(p.lower)):
        return True
    for m in _YEAR.finditer(p.lower):  # the word before a year
        before = p.lower[max(0, m.start() - 40) : m.start()].split()
        if before and before[-1][:3] in _INTL_MONTH_STEM_SET:
            return True
    return False


_INTL_COUNT_PREFIXES = frozenset(w[:3].lower() for words in COUNTED_BY_LANGUAGE.values() for w in words)


def _intl_count_trigger(p: TextSketch) -> bool:
    """A word right after a number, or the one after it, starts like a counted noun of another language."""
    if not p.text.isascii() and _CJK_COUNT_TRIGGER.search(p.text):
        return True
    for m in _DIGIT_WORDS.finditer(p.lower):
        for word in m.groups():
            if word and (word[:3] in _INTL_COUNT_PREFIXES or word[:2] in _INTL_COUNT_PREFIXES):
                return True
    return False


_CJK_COUNT_TRIGGER = re.compile(r"\d\s?[名人個件泊営日枚点本台回時分週かヶカ年席便つ]")


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


# Languages that capitalise every noun: there a capitalised word after a lower-case one is a noun, not
# a name (German: "Bitte prüfen Sie Ihre Buchungsnummer" names nothing).
NOUN_CAPITALISING_WORDS: dict[str, frozenset[str]] = {
    "de": frozenset(
        {
            "der",
            "die",
            "das",
            "den",
            "dem",
            "des",
            "und",
            "ist",
            "sind",
            "nicht",
            "mit",
            "für",
            "auf",
            "bei",
            "von",
            "zu",
            "zum",
            "zur",
            "sich",
            "wird",
            "werden",
            "kann",
            "ein",
            "eine",
            "einen",
            "einem",
            "ich",
            "wir",
            "sie",
            "ihr",
            "ihre",
            "ihren",
            "ihnen",
            "bitte",
            "auch",
            "noch",
            "oder",
            "wenn",
            "sobald",
        }
    ),
}
_ENGLISH_TOO = frozenset(
    {"die", "den", "des", "bitte", "sie", "ich", "ihr", "oder", "noch", "auch", "bei", "von", "zu"}
)
_UMLAUT = regex.compile(r"[äöüÄÖÜß]")
_WORD = regex.compile(r"\w+")


@lru_cache(maxsize=256)
def capitalises_nouns(text: str) -> bool:
    """Is ``text`` written in a language that capitalises its nouns? Two of its function words, or
    one that is no English word, or one with an umlaut in the text."""
    words = {w.lower() for w in _WORD.findall(text)}
    for table in NOUN_CAPITALISING_WORDS.values():
        found = words & table
        if len(found) >= 2 or found - _ENGLISH_TOO or (found and _UMLAUT.search(text)):
            return True
    return False


def _proper_name(match: regex.Match[str]) -> str | None:
    name = match.group()
    if name.split()[0].lower() in NOT_NAMES or capitalises_nouns(match.string):
        return None
    return name


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
        "currency_intl",
        rf"(?<![\w$]){_SYMBOL_BEFORE}\s?{_INTL_NUMBER}(?![\d,.]\d)"
        rf"|(?<![\d.,A-Za-z_]){_INTL_NUMBER_SPACED}\s?(?:{_SYMBOL_AFTER}|{_INTL_CODE}\b)"
        rf"|\b{_INTL_CODE}\s?{_INTL_NUMBER}(?![\d,.]\d)",
        covers=True,
        digit=True,
        trigger=_intl_currency_trigger,
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
        "clock_time_intl",
        r"(?<![\w.,:])(?:[01]?\d|2[0-3])\s?h(?:\s?[0-5]\d)?(?![\w])"
        r"|\b(?:[01]?\d|2[0-3])(?:[:.][0-5]\d)?\s?Uhr\b"
        r"|(?<!\d)(?:[01]?\d|2[0-3])時(?:[0-5]?\d分|半)?"
        r"|(?<=[^\x00-\x7f])(?:[01]?\d|2[0-3]):[0-5]\d(?!\d)",  # 10:05に: a digit right after CJK text
        covers=True,
        digit=True,
        trigger=lambda p: (
            "Uhr" in p.text
            or _DIGIT_H.search(p.text) is not None
            or (not p.text.isascii() and _CJK_TIME.search(p.text) is not None)
        ),
    ),
    PatternGroup(
        "natural_date_intl",
        rf"\b{_DAY}(?:er|º|ª)?\.?\s(?:de\s)?{_INTL_MONTH}(?:,?\s(?:de\s)?\d{{4}}\b)?"
        rf"|(?<!\w){_INTL_MONTH}\s\d{{4}}\b"
        r"|(?<!\d)(?:\d{2,4}\s?年\s?)?\d{1,2}\s?月\s?\d{1,2}\s?日|(?<!\d)\d{4}\s?年\s?\d{1,2}\s?月"
        r"|\b(?:[12]\d|3[01]|0?[1-9])\.(?:1[0-2]|0?[1-9])\.(?:\d{4}|\d{2})(?![\d.]\d)",
        covers=True,
        digit=True,
        trigger=_intl_date_trigger,
    ),
    PatternGroup(
        "seat_or_gate",  # 14C, 22A, 18K: a row and a seat letter
        r"(?<![A-Za-z0-9_.,-])\d{1,3}[A-K](?![A-Za-z0-9_])",
        digit=True,
        trigger=search(r"\d[A-K]"),
    ),
    PatternGroup(
        "dashed_number",  # 4567-8901-2345, 1-2-3 (a Japanese address), 20250303-118 after CJK text
        r"(?<![A-Za-z0-9_.,/-])\d+(?:-\d+){2,}(?![A-Za-z0-9_/-])"
        r"|(?<=[^\x00-\x7f])\d{4,}(?:-\d+)*(?![A-Za-z0-9_/-]|[.,]\d)",
        digit=True,
        trigger=lambda p: (
            _TWO_DASHES.search(p.text) is not None or (not p.text.isascii() and _AFTER_CJK.search(p.text) is not None)
        ),
    ),
    PatternGroup(
        "count_intl",
        rf"(?<![\w.,:/$-])\d+(?:\s?(?:-|–)\s?\d+)?\s(?:\w+\s)?{_INTL_COUNTED}"
        rf"|(?<!\d)\d+\s?{_CJK_COUNTER}",
        covers=True,
        digit=True,
        trigger=_intl_count_trigger,
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
