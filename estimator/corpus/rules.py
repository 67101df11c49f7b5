"""A system prompt read as its rules: the instructions layer one source per section (beyond the paper).

The seed's Algorithm 1 makes the whole system prompt one source, cut to the scoring window
(``SOURCE_TOKEN_CAP``): a rule 900 tokens into a 1,650-token prompt is shown to no judge, and no removal can
name it. Here the prompt is split where its author structured it, and each part is a source with its own
line span in the prompt:

* **headings** start a section — Markdown ``#`` lines, numbered or lettered headings (``3. Refund policy``,
  ``B) Cancellations:``), short lines in capitals (``REFUND POLICY``) and short lines ending with ``:``;
* **list items** (``-``, ``*``, ``+``, ``•``, ``1.``, ``1)``, ``a)``, ``(a)``) and **paragraphs** are the pieces
  of a section (an indented item belongs to the item above it); text before the first heading is a section of
  its own, and a prompt with no heading has one section per piece.

The count is kept sane for round 2's ``MAX_SOURCES`` and the cost gate: a section larger than the scoring window
is split between its pieces (``part 2`` …, its heading shown above the later parts), a section smaller than
``MIN_RULE_TOKENS`` joins its neighbour, and neighbours are merged — the smallest adjacent pair first — until at
most ``max_rules(params)`` remain (two thirds of ``MAX_SOURCES``: the instructions layer alone never fills
round 2, and every rule is measured when it is the only layer that matters). One piece larger than the
window stays one rule and is cut with the corpus's usual warning. A prompt that reads as one rule is kept whole.

``Params.instructions_as_rules = False`` is the seed's Algorithm 1 (the prompt whole). Where it must hold: the
paper's figures for the foundation fixtures — §8.1–8.2's 8 sources and 31 calls, §8.3's 11 and 39
(tests/method/test_cost.py, test_recorded_outcomes.py) — are counted on the whole prompt; results and jobs stored
before the setting existed are read with it (``Params.stored``), so their source ids do not shift.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import regex

from estimator.params import Params
from estimator.tokens import Tokenizer

MIN_RULE_TOKENS = 24
"""A section smaller than this (a heading with one short line) is merged into a neighbour."""
TITLE_CHARS = 48
FIRST_WORDS = 6
TITLES_SHOWN = 3

_MARKDOWN_HEADING = regex.compile(r"^\s{0,3}#{1,6}\s+(?P<title>\S.*?)\s*#*\s*$")
_NUMBERED_HEADING = regex.compile(
    r"^\s{0,3}(?:§\s*)?(?:\d{1,3}(?:\.\d{1,3})*[.)]?|[A-Za-z][.)]|[IVXLC]{1,5}[.)])\s+(?P<title>\S.*?)\s*$"
)
_ITEM = regex.compile(r"^(?P<indent>\s*)(?:[-*+•]|\d{1,3}[.)]|[A-Za-z][.)]|\(\w{1,3}\))\s+\S")
_SENTENCE_END = regex.compile(r"[.;,!?]\s*$")
_EMPHASIS = regex.compile(r"[*_`]+")
_LETTER = regex.compile(r"\p{L}")


@dataclass(frozen=True)
class _Piece:
    start: int  # 0-based line index, inclusive
    end: int  # 0-based line index, inclusive
    heading: str | None = None  # the title, when the piece is a heading line


@dataclass(frozen=True)
class Rule:
    """A part of the system prompt that is one instructions source: sections ``first``–``last`` (§ numbers, in
    prompt order), the prompt's lines ``line_start``–``line_end`` (1-based, inclusive) and their text."""

    first: int
    last: int
    titles: tuple[str, ...]
    line_start: int
    line_end: int
    text: str
    part: int | None = None
    """The part of a section split at the scoring window (1, 2, …), else None."""
    heading: str = ""
    """A later part's section heading line, shown above its text (not evidence)."""

    @property
    def label(self) -> str:
        """What a reader recognises: ``instructions §5 "Cancel flight" · prompt lines 54–62``."""
        where = f"§{self.first}" if self.first == self.last else f"§{self.first}–{self.last}"
        shown = [f'"{t}"' for t in self.titles[:TITLES_SHOWN]]
        more = len(self.titles) - TITLES_SHOWN
        named = ", ".join(shown) + (f" and {more} more" if more > 0 else "")
        part = f" (part {self.part})" if self.part else ""
        return f"instructions {where} {named}{part} · prompt {self.lines}"

    @property
    def lines(self) -> str:
        """``lines 54–62`` (``line 7`` for one)."""
        if self.line_start == self.line_end:
            return f"line {self.line_start}"
        return f"lines {self.line_start}–{self.line_end}"


def max_rules(params: Params) -> int:
    """The most instructions sources a prompt is split into: two thirds of ``MAX_SOURCES`` (8 of 12)."""
    return max(1, (2 * params.max_sources) // 3)


def _heading(line: str, following: str | None) -> str | None:
    """The title when ``line`` is a heading, else None."""
    found = _MARKDOWN_HEADING.match(line)
    if found:
        return found.group("title")
    stripped = _EMPHASIS.sub("", line).strip()
    words = stripped.split()
    if not words or len(words) > 10 or len(stripped) > 80:
        return None
    numbered = _NUMBERED_HEADING.match(stripped)
    if numbered and not _SENTENCE_END.search(stripped):
        return numbered.group("title").rstrip(":")
    if _ITEM.match(line):
        return None  # "- Payment:" is an item of a list, not a heading
    letters = _LETTER.findall(stripped)
    if len(letters) >= 3 and all(c.isupper() for c in letters if c.isalpha() and c.lower() != c.upper()):
        return stripped.rstrip(":")
    if stripped.endswith(":") and following is not None:
        return stripped.rstrip(":")
    return None


def _pieces(lines: Sequence[str]) -> list[_Piece]:
    """Headings, list items (with their continuation and indented sub-items) and paragraphs, in order."""
    out: list[_Piece] = []
    open_start: int | None = None
    open_indent = -1  # the open piece's item indent; -1 for a paragraph
    last = -1

    def close() -> None:
        nonlocal open_start, open_indent
        if open_start is not None:
            out.append(_Piece(open_start, last))
        open_start, open_indent = None, -1

    for i, line in enumerate(lines):
        if not line.strip():
            following = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), None)
            if following is None or open_indent < 0 or _indent(lines[following]) <= open_indent:
                close()  # a blank line ends a paragraph; an item continues only into indented lines
            continue
        item = _ITEM.match(line)
        if item and open_start is not None and open_indent >= 0 and len(item.group("indent")) > open_indent:
            last = i  # a sub-item belongs to the item above it
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].strip() else None
        title = _heading(line, nxt)
        if title is not None:
            close()
            out.append(_Piece(i, i, _EMPHASIS.sub("", title).strip()))
            continue
        if item:
            close()
            open_start, open_indent = i, len(item.group("indent"))
        elif open_start is None:
            open_start = i
        last = i
    close()
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


@dataclass
class _Group:
    first: int  # § of its first section
    last: int  # § of its last section
    titles: list[str]
    pieces: list[_Piece]
    heading_line: int | None = None  # a later part's section heading (0-based line), shown above it

    def span(self) -> tuple[int, int]:
        return self.pieces[0].start, self.pieces[-1].end


def _title(lines: Sequence[str], piece: _Piece) -> str:
    if piece.heading is not None:
        return _short(piece.heading, TITLE_CHARS)
    text = " ".join(lines[piece.start : piece.end + 1]).strip()
    text = regex.sub(r"^(?:[-*+•]|\d{1,3}[.)]|[A-Za-z][.)]|\(\w{1,3}\))\s+", "", text)
    words = _EMPHASIS.sub("", text).split()
    head = " ".join(words[:FIRST_WORDS])
    return _short(head.rstrip(",;:.") + "…" if len(words) > FIRST_WORDS else head, TITLE_CHARS)


def _short(text: str, limit: int) -> str:
    text = text.replace('"', "'")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _sections(lines: Sequence[str], pieces: Sequence[_Piece]) -> list[_Group]:
    """One group per heading with the pieces under it (text before the first heading is a section too); with
    no heading at all, one per piece."""
    if not any(p.heading is not None for p in pieces):
        return [_Group(n, n, [_title(lines, p)], [p]) for n, p in enumerate(pieces, 1)]
    groups: list[_Group] = []
    for piece in pieces:
        if piece.heading is not None or not groups:
            n = len(groups) + 1
            groups.append(_Group(n, n, [_title(lines, piece)], [piece]))
        else:
            groups[-1].pieces.append(piece)
    return groups


class _Splitter:
    """Sizes are sums of the pieces' own token counts (each counted once) plus one token per line break between
    them: an upper estimate that keeps splitting linear in the prompt's length. The units' own sizes are counted
    whole when they are built."""

    def __init__(self, prompt: str, count: Callable[[str], int], window: int) -> None:
        self.lines = prompt.split("\n")
        self.count = count
        self.window = window
        self._sizes: dict[tuple[int, int], int] = {}

    def text(self, group: _Group) -> str:
        start, end = group.span()
        return "\n".join(self.lines[start : end + 1])

    def _lines(self, start: int, end: int) -> int:
        key = (start, end)
        if key not in self._sizes:
            self._sizes[key] = self.count("\n".join(self.lines[start : end + 1])) + (end - start)
        return self._sizes[key]

    def size(self, group: _Group) -> int:
        head = self._lines(group.heading_line, group.heading_line) + 1 if group.heading_line is not None else 0
        return head + sum(self._lines(p.start, p.end) + 1 for p in group.pieces) - 1

    def split(self, group: _Group) -> list[_Group]:
        """A section over the window, cut between its pieces into parts that fit (a piece is never cut)."""
        if len(group.pieces) == 1 or self.size(group) <= self.window:
            return [group]
        heading = group.pieces[0].start if group.pieces[0].heading is not None else None
        parts: list[_Group] = []
        for piece in group.pieces:
            if parts and self.size(_Group(0, 0, [], [*parts[-1].pieces, piece], parts[-1].heading_line)) <= self.window:
                parts[-1].pieces.append(piece)
            else:
                later = heading if parts else None
                parts.append(_Group(group.first, group.last, list(group.titles), [piece], later))
        return parts

    @staticmethod
    def merge(groups: list[_Group], i: int) -> None:
        a, b = groups[i], groups.pop(i + 1)
        a.pieces.extend(b.pieces)
        a.last = b.last
        a.titles.extend(t for t in b.titles if t not in a.titles)


def split_rules(prompt: str, count: Callable[[str], int], window: int, most: int) -> tuple[Rule, ...]:
    """The rules of ``prompt`` (``count`` measures a text in tokens; ``window`` is the scoring window; at most
    ``most`` rules). Empty when the prompt has no structure to split at: it is kept whole."""
    work = _Splitter(prompt, count, window)
    pieces = _pieces(work.lines)
    groups = [part for section in _sections(work.lines, pieces) for part in work.split(section)]
    i = 0
    while len(groups) > 1 and i < len(groups):  # a tiny section joins a neighbour
        if work.size(groups[i]) < MIN_RULE_TOKENS:
            work.merge(groups, i if i + 1 < len(groups) else i - 1)
            i = max(i - 1, 0)
        else:
            i += 1
    while len(groups) > max(1, most):  # the cap: the smallest adjacent pair first, one that fits the window if any
        sizes = [work.size(g) for g in groups]
        pair = min(range(len(groups) - 1), key=lambda k: (sizes[k] + sizes[k + 1] > window, sizes[k] + sizes[k + 1]))
        work.merge(groups, pair)
    if len(groups) <= 1:
        return ()
    parts: dict[int, int] = {}
    for g in groups:
        if g.first == g.last:
            parts[g.first] = parts.get(g.first, 0) + 1
    seen: dict[int, int] = {}
    out: list[Rule] = []
    for g in groups:
        start, end = g.span()
        part = None
        if g.first == g.last and parts[g.first] > 1:
            part = seen[g.first] = seen.get(g.first, 0) + 1
        heading = work.lines[g.heading_line] if g.heading_line is not None else ""
        out.append(Rule(g.first, g.last, tuple(g.titles), start + 1, end + 1, work.text(g), part, heading))
    return tuple(out)


_MEMO: weakref.WeakKeyDictionary[Any, OrderedDict[tuple[str, int, int], tuple[tuple[Rule, int], ...]]]
_MEMO = weakref.WeakKeyDictionary()
MEMO_PROMPTS = 16
_LOCK = threading.Lock()
"""Prompts whose rules are remembered per tokenizer: the turns of one agent share their prompt."""


def rules_with_sizes(prompt: str, tok: Tokenizer, window: int, most: int) -> tuple[tuple[Rule, int], ...]:
    """``split_rules`` with each rule's size as shown (its heading above a later part), remembered per tokenizer
    for the last ``MEMO_PROMPTS`` prompts (the service builds corpora on several threads: the memo is locked)."""
    key = (prompt, window, most)
    with _LOCK:
        try:
            memo: OrderedDict[tuple[str, int, int], tuple[tuple[Rule, int], ...]] | None
            memo = _MEMO.setdefault(tok, OrderedDict())
        except TypeError:  # a tokenizer that cannot be weakly referenced: nothing is remembered
            memo = None
        found = memo.get(key) if memo is not None else None
        if found is not None and memo is not None:
            memo.move_to_end(key)
            return found
    rules = split_rules(prompt, tok.count, window, most)
    found = tuple((r, tok.count(r.heading + "\n" + r.text if r.heading else r.text)) for r in rules)
    if memo is not None:
        with _LOCK:
            memo[key] = found
            while len(memo) > MEMO_PROMPTS:
                memo.popitem(last=False)
    return found
