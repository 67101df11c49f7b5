"""Segmentation of a response into claim-sized units (seed §2.2, §8).

The renderer is the single segmentation authority: when a client sends segments they are used
as given and never re-split (``client_segments``). For clients that send none,
``segment_response`` is the default: sentence-level and markdown-aware.

* Fenced code blocks, headings and table rows are one segment each and are never torn apart.
* A list item may split into its sentences but never merges with the next item.
* Paragraph text is split at ``.``, ``!``, ``?`` followed by whitespace — so decimals (30.1) and
  URLs (``https://a.b/c?d=e``) never split — unless the next word starts in lower case or the
  word before the full stop is an abbreviation (e.g., i.e., Dr., approx., U.S., an initial, a
  single letter as in German "z. B.", or one of the per-language tables below) or a day number
  before a month name or after a German article or preposition ("bis zum 3. März", "am 3. Okt.").
* Chinese and Japanese sentence ends (``。``, ``！``, ``？``) split with no space after them, and a
  Greek question mark (``;`` after a Greek word, or U+037E) ends a sentence.

Why rules and not a library: pySBD (the maintained rule-based segmenter closest to this) needs the
language named up front — with ``language="en"`` it cuts German at "bis zum 3." / "März" and
"z." / "B."; with the right language it still merges "Abschnitt 2. Der …" and cuts French
"p." / "ex." — and it took about 1.1 ms per English sentence where the whole free tier spends about
0.2 ms, which the throughput target of ``bench/free_tier.py`` cannot absorb. ICU's sentence breaker
needs a compiled dependency and a locale per text, and knows few abbreviations without one. The
rules below need no language: the abbreviation tables are data, one per language, and an
abbreviation that is also a common English word at a sentence's end (``art``, ``min``, ``ok``) is one
only before a number (German "Art. 5", Polish "ok. 3 dni").
* Soft line breaks inside a paragraph are spaces, as a CommonMark renderer draws them.

Every segment satisfies ``response[start:end] == text``; text is stripped of surrounding
whitespace; list markers and heading hashes stay in the text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import regex


@dataclass(frozen=True)
class Segment:
    """One segment of the response, with its character span in the response."""

    id: str
    text: str
    start: int
    end: int


_FENCE_OPEN = regex.compile(r"^[ \t]*(`{3,}|~{3,})")
_HEADING = regex.compile(r"^ {0,3}#{1,6}(?:\s|$)")
_THEMATIC_BREAK = regex.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST_ITEM = regex.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_TABLE_SEPARATOR = regex.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_TERMINATOR = regex.compile(
    r"[.!?…]+[\"'”’)\]*_`]*(?=\s)|(?<=\p{Greek})[;\u037e][\"'”’)\]*_`]*(?=\s)"
    r"|[。！？\u037e]+[」』）\"'”’)\]*_`]*"
)
_LAST_WORD = regex.compile(r"(\S+)$")
_SHORT_DOTTED = regex.compile(r"\w{1,3}\.")
_DOTTED_ABBREVIATION = regex.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")

ABBREVIATIONS: frozenset[str] = frozenset(
    {
        "e.g",
        "i.e",
        "cf",
        "vs",
        "al",
        "approx",
        "ca",
        "resp",
        "incl",
        "excl",
        "fig",
        "figs",
        "eq",
        "eqs",
        "vol",
        "pp",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "st",
        "jr",
        "sr",
        "inc",
        "ltd",
        "corp",
        "dept",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "u.s",
        "u.k",
        "a.m",
        "p.m",
    }
)
# Abbreviations of other languages, one table per language, compared in lower case like the English
# ones. Single letters ("z. B.", "p. ex.", "d. h.") are abbreviations whatever the language.
ABBREVIATIONS_BY_LANGUAGE: dict[str, frozenset[str]] = {
    "de": frozenset(
        {
            "vgl",
            "nr",
            "nrn",
            "bzw",
            "ggf",
            "usw",
            "inkl",
            "zzgl",
            "evtl",
            "str",
            "hr",
            "hrn",
            "abs",
            "bd",
            "kap",
            "abb",
            "anm",
            "bspw",
            "sog",
            "mio",
            "mrd",
            "std",
            "jh",
            "dipl",
            "ing",
            "geb",
            "gem",
            "lt",
            "tsd",
            "ca",
            "jan",
            "feb",
            "mär",
            "apr",
            "jun",
            "jul",
            "aug",
            "sep",
            "sept",
            "okt",
            "nov",
            "dez",
            "u.a",
            "d.h",
            "z.b",
            "o.ä",
            "s.o",
            "s.u",
            "i.d.r",
            "u.u",
            "z.t",
            "v.a",
        }
    ),
    "fr": frozenset(
        {
            "mm",
            "mme",
            "mmes",
            "mlle",
            "mlles",
            "pr",
            "cf",
            "env",
            "etc",
            "av",
            "bd",
            "réf",
            "tél",
            "chap",
            "éd",
            "janv",
            "févr",
            "avr",
            "juil",
            "sept",
            "oct",
            "nov",
            "déc",
            "n°",
            "p.ex",
            "c.-à-d",
            "c.à.d",
        }
    ),
    "es": frozenset(
        {
            "sr",
            "sra",
            "srta",
            "dra",
            "ud",
            "uds",
            "vd",
            "vds",
            "núm",
            "pág",
            "págs",
            "aprox",
            "ej",
            "tel",
            "avda",
            "dpto",
            "n.º",
            "p.ej",
            "etc",
            "admón",
            "cía",
        }
    ),
    "it": frozenset({"sig", "sig.ra", "sigg", "dott", "dott.ssa", "ecc", "pag", "tel", "p.es", "ing", "avv", "geom"}),
    "pt": frozenset({"sra", "dra", "pág", "tel", "nº", "aprox", "p.ex", "av", "exmo", "exma", "lda", "cia"}),
    "pl": frozenset(
        {
            "ul",
            "nr",
            "tel",
            "np",
            "tzn",
            "tj",
            "godz",
            "wg",
            "m.in",
            "itd",
            "itp",
            "pn",
            "ds",
            "tys",
            "mln",
            "mld",
            "św",
            "inż",
            "mgr",
            "zob",
            "ok",
            "r",
            "al",
            "os",
            "poz",
        }
    ),
    "nl": frozenset(
        {"bijv", "bv", "o.a", "d.w.z", "dhr", "mevr", "mw", "nr", "blz", "enz", "evt", "incl", "excl", "tel"}
    ),
    "el": frozenset({"κ", "κα", "π.χ", "δηλ", "τηλ", "αρ", "οδ", "κλπ", "κτλ", "βλ", "σελ"}),
}
# Abbreviations elsewhere that are English words ending English sentences: abbreviations only before a
# number ("Art. 5", "ok. 3 dni", "min. 2"); "I love modern art. The …" still splits
_ENGLISH_WORDS = frozenset({"ok", "r", "al", "os", "art", "min", "max", "ex", "tel", "pl"})
_FOREIGN_ABBREVIATIONS: frozenset[str] = frozenset().union(*ABBREVIATIONS_BY_LANGUAGE.values()) - _ENGLISH_WORDS
_MONTH_NAMES: frozenset[str] = frozenset(
    {
        "januar",
        "jänner",
        "februar",
        "märz",
        "april",
        "mai",
        "juni",
        "juli",
        "august",
        "september",
        "oktober",
        "november",
        "dezember",
        "okt",
        "dez",
        "jan",
        "feb",
        "mär",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "nov",
        "january",
        "march",
        "may",
        "june",
        "july",
        "october",
        "december",
        "mei",
        "maart",
        "januari",
        "februari",
        "augustus",
        "ιανουαρίου",
        "φεβρουαρίου",
        "μαρτίου",
        "απριλίου",
        "μαΐου",
        "ιουνίου",
        "ιουλίου",
        "αυγούστου",
        "σεπτεμβρίου",
        "οκτωβρίου",
        "νοεμβρίου",
        "δεκεμβρίου",
    }
)
# the word before a day number written as an ordinal ("bis zum 3. März", "ab dem 1. Juli")
_ORDINAL_CONTEXT: frozenset[str] = frozenset(
    {"zum", "am", "vom", "bis", "ab", "seit", "dem", "den", "der", "die", "das", "im", "zur", "ihrem", "ihren"}
)
_NO_SPLIT_BEFORE = frozenset(",;:)]}")


@dataclass(frozen=True)
class _Block:
    kind: str  # code | heading | table_row | list_item | paragraph
    start: int
    end: int
    body: int  # where sentence scanning may begin (after a list marker)


def _lines(response: str) -> list[tuple[int, str]]:
    """(offset, line without its terminator) for every line of the response."""
    out: list[tuple[int, str]] = []
    offset = 0
    for raw in response.splitlines(keepends=True):
        out.append((offset, raw.rstrip("\r\n")))
        offset += len(raw)
    return out


def _is_table_row(line: str) -> bool:
    return "|" in line


def _starts_block(lines: list[tuple[int, str]], i: int) -> bool:
    line = lines[i][1]
    return bool(
        _FENCE_OPEN.match(line)
        or _HEADING.match(line)
        or _THEMATIC_BREAK.match(line)
        or _LIST_ITEM.match(line)
        or _table_starts(lines, i)
    )


def _table_starts(lines: list[tuple[int, str]], i: int) -> bool:
    line = lines[i][1]
    if not _is_table_row(line):
        return False
    if line.lstrip().startswith("|"):
        return True
    return i + 1 < len(lines) and "|" in lines[i + 1][1] and bool(_TABLE_SEPARATOR.match(lines[i + 1][1]))


def _blocks(response: str) -> Iterator[_Block]:
    lines = _lines(response)
    i = 0
    while i < len(lines):
        offset, line = lines[i]
        end = offset + len(line)
        fence = _FENCE_OPEN.match(line)
        if not line.strip() or _THEMATIC_BREAK.match(line):
            i += 1
        elif fence:
            marker = fence.group(1)
            fence_char = regex.escape(marker[0])
            close = regex.compile(r"^[ \t]*" + fence_char + "{" + str(len(marker)) + r",}[ \t]*$")
            j = i + 1
            while j < len(lines) and not close.match(lines[j][1]):
                j += 1
            j = min(j, len(lines) - 1)
            yield _Block("code", offset, lines[j][0] + len(lines[j][1]), offset)
            i = j + 1
        elif _HEADING.match(line):
            yield _Block("heading", offset, end, offset)
            i += 1
        elif _table_starts(lines, i):
            while i < len(lines) and lines[i][1].strip() and _is_table_row(lines[i][1]):
                row_offset, row = lines[i]
                if not _TABLE_SEPARATOR.match(row):
                    yield _Block("table_row", row_offset, row_offset + len(row), row_offset)
                i += 1
        else:
            item = _LIST_ITEM.match(line)
            j = i + 1
            while j < len(lines) and lines[j][1].strip() and not _starts_block(lines, j):
                j += 1
            block_end = lines[j - 1][0] + len(lines[j - 1][1])
            if item:
                yield _Block("list_item", offset, block_end, offset + item.end())
            else:
                yield _Block("paragraph", offset, block_end, offset)
            i = j


def _is_abbreviation(before: str, after: str) -> bool:
    """Is the word ending just before a full stop an abbreviation, an initial or a day number
    written as an ordinal (``after`` is the text after the full stop)?"""
    word_match = _LAST_WORD.search(before)
    if word_match is None:
        return False
    word = word_match.group(1).lstrip("([{\"'“‘„«*_`")
    if len(word) == 1 and word.isalpha() and (word.isupper() or _SHORT_DOTTED.match(after)):
        return True  # an initial ("J. Smith"), or one letter of "z. B.", "p. ex.", "d. h."
    lower = word.lower()
    if lower in _ENGLISH_WORDS and after[:1].isdigit():  # "Art. 5", "ok. 3 dni", "tel. 22 123 45 67"
        return True
    if lower in ABBREVIATIONS or bool(_DOTTED_ABBREVIATION.match(word)):
        return True
    if lower in _FOREIGN_ABBREVIATIONS or lower.replace(".", "") in _FOREIGN_ABBREVIATIONS:
        return True
    if word.isdigit() and len(word) <= 2:  # "bis zum 3. März", "am 1. Juli"
        following = after.split(maxsplit=1)[0].strip(".,;:*_").lower() if after.strip() else ""
        if following in _MONTH_NAMES:
            return True
        previous = before[: word_match.start()].split()
        return bool(previous) and previous[-1].lower() in _ORDINAL_CONTEXT
    return False


def _sentence_spans(response: str, start: int, end: int, body: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    current = start
    for m in _TERMINATOR.finditer(response, body, end):
        nxt = m.end()
        while nxt < end and response[nxt].isspace():
            nxt += 1
        if nxt >= end:
            break
        follower = response[nxt]
        if follower.islower() or follower in _NO_SPLIT_BEFORE:
            continue
        if (
            m.group().startswith(".")
            and len(m.group().rstrip("\"'”’)]*_`")) == 1
            and _is_abbreviation(response[current : m.start()], response[nxt:end])
        ):
            continue
        spans.append((current, m.end()))
        current = nxt
    spans.append((current, end))
    return spans


def _trim(response: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and response[start].isspace():
        start += 1
    while end > start and response[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def segment_response(response: str) -> tuple[Segment, ...]:
    """The default segmenter: sentences of prose and list items; whole code blocks, headings, rows."""
    spans: list[tuple[int, int]] = []
    for block in _blocks(response):
        if block.kind in ("list_item", "paragraph"):
            pieces = _sentence_spans(response, block.start, block.end, block.body)
        else:
            pieces = [(block.start, block.end)]
        for s, e in pieces:
            trimmed = _trim(response, s, e)
            if trimmed is not None:
                spans.append(trimmed)
    return tuple(Segment(id=f"r{i}", text=response[s:e], start=s, end=e) for i, (s, e) in enumerate(spans))


def client_segments(response: str, items: Sequence[tuple[str | None, str]]) -> tuple[Segment, ...]:
    """Segments supplied by the renderer, used AS GIVEN (never re-split).

    Each text is located in the response searching forward from the previous segment's end;
    a text that is not found gets start = end = -1 (and does not move the search point).
    A missing id becomes "r{i}" for the item's position i.
    """
    out: list[Segment] = []
    cursor = 0
    for i, (seg_id, text) in enumerate(items):
        at = response.find(text, cursor) if text else -1
        if at < 0:
            start, end = -1, -1
        else:
            start, end = at, at + len(text)
            cursor = end
        out.append(Segment(id=seg_id if seg_id is not None else f"r{i}", text=text, start=start, end=end))
    return tuple(out)
