"""Argument provenance: where each value an action sent first appears in the context it had.

Every leaf of the arguments (nested objects and lists walked; its path written ``to``, ``items[0].sku``) is looked
up in the query and in each source the agent could read, in the order the agent received them: the system prompt,
the history (oldest first), the query, then the tool returns in the order they came back. A match is whole — a
value is never found inside a longer word or number (``$5`` is not in ``$55``, ``DE89`` not in ``XDE891``) — text
is compared without regard to case or runs of white space, and a number matches the same number however it is
written (``1000``, ``1,000``, ``1000.00``). The first source holding it is reported with its line span and the
line(s) as the quote (a substring of the source, so it verifies); ``holders`` lists every source that holds it.

Booleans, nulls, small numbers (``abs < 10``) and short words (under 3 characters) are skipped: they are
everywhere and tell nothing. A value is *decisive* when it identifies something — a number, or a text of at most
``DECISIVE_MAX_CHARS`` characters and ``DECISIVE_MAX_WORDS`` words (an account, an address, a URL, an id) —
and only decisive values decide an action's origin; a long free text (an e-mail's body) is reported but not
counted, since an agent writes it rather than copies it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import regex

from estimator.actions.targets import ActionContext, HistoryItem
from estimator.corpus.units import Layer

__all__ = ["QUERY_SOURCE", "ArgumentSource", "Holder", "argument_sources", "find_value", "leaf_values"]

QUERY_SOURCE = "query"
"""The source id of the user's current request (not a unit of the corpus: it is never left out)."""
DECISIVE_MAX_CHARS = 120
DECISIVE_MAX_WORDS = 6
MIN_CHARS = 3
MIN_NUMBER = Decimal(10)
QUOTE_MAX_CHARS = 240
_SKIP_WORDS = frozenset({"true", "false", "none", "null", "yes", "no", "asc", "desc", "default", "all", "any"})
_NUMBER = regex.compile(r"(?<![\w.,])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\w|[.,]\d)")
_NUMERIC_TEXT = regex.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


@dataclass(frozen=True)
class Holder:
    """A source holding a value: its id, layer (``query`` for the request) and the lines of the first match."""

    source_id: str
    layer: str
    lines: tuple[int, int]
    quote: str


@dataclass(frozen=True)
class ArgumentSource:
    """One argument value and the sources that hold it (``holders`` empty: it appears nowhere the agent could
    read — made up or computed)."""

    path: str
    value: str
    decisive: bool
    holders: tuple[Holder, ...]

    @property
    def first(self) -> Holder | None:
        return self.holders[0] if self.holders else None


def leaf_values(arguments: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every leaf of nested objects and lists, in order."""
    if isinstance(arguments, dict):
        for key, value in arguments.items():
            yield from leaf_values(value, f"{path}.{key}" if path else str(key))
    elif isinstance(arguments, list | tuple):
        for i, value in enumerate(arguments):
            yield from leaf_values(value, f"{path}[{i}]")
    else:
        yield path or "(arguments)", arguments


def _as_number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return Decimal(str(value))
        except InvalidOperation:
            return None
    if isinstance(value, str) and _NUMERIC_TEXT.fullmatch(value.strip()):
        return Decimal(value.strip().replace(",", ""))
    return None


def _worth_looking_up(value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return False
    number = _as_number(value)
    if number is not None:
        return abs(number) >= MIN_NUMBER
    text = str(value).strip()
    return len(text) >= MIN_CHARS and text.lower() not in _SKIP_WORDS


def _decisive(value: Any) -> bool:
    if _as_number(value) is not None:
        return True
    text = str(value).strip()
    return len(text) <= DECISIVE_MAX_CHARS and len(text.split()) <= DECISIVE_MAX_WORDS


def _text_pattern(text: str) -> regex.Pattern[str]:
    words = [regex.escape(w) for w in text.split()]
    body = r"\s+".join(words)
    head = r"(?<!\w)" if regex.match(r"\w", text) else ""
    tail = r"(?!\w)" if regex.search(r"\w$", text) else ""
    return regex.compile(head + body + tail, regex.IGNORECASE)


def find_value(value: Any, text: str) -> tuple[int, int] | None:
    """The character span of the first whole match of ``value`` in ``text``, or None."""
    number = _as_number(value)
    if number is not None:
        for match in _NUMBER.finditer(text):
            try:
                if Decimal(match.group().replace(",", "")) == number:
                    return match.span()
            except InvalidOperation:
                continue
        if not isinstance(value, str):
            return None
    words = str(value).split()
    if sum(map(len, words)) + len(words) - 1 > len(text):  # longer than the text: no match (and no regex to build)
        return None
    found = _text_pattern(str(value).strip()).search(text)
    return found.span() if found is not None else None


def _holder(source_id: str, layer: str, text: str, span: tuple[int, int]) -> Holder:
    start_line = text.count("\n", 0, span[0]) + 1
    end_line = text.count("\n", 0, span[1]) + 1
    lines = text.split("\n")[start_line - 1 : end_line]
    quote = "\n".join(lines)
    if len(quote) > QUOTE_MAX_CHARS:  # a long line: the match with some of its surroundings, still a substring
        begin = max(0, span[0] - QUOTE_MAX_CHARS // 3)
        quote = text[begin : begin + QUOTE_MAX_CHARS]
        start_line = text.count("\n", 0, begin) + 1
        end_line = text.count("\n", 0, begin + len(quote)) + 1
    return Holder(source_id, layer, (start_line, end_line), quote)


_Source = tuple[str, str, str, "HistoryItem | None"]


def _in_received_order(context: ActionContext) -> list[_Source]:
    """(source id, layer, text, history item) in the order the agent received them: instructions, the whole
    history, the query, the tool returns it had seen."""
    ordered: list[_Source] = [
        (u.id, u.layer.value, u.text, None) for u in context.units if u.layer == Layer.INSTRUCTIONS
    ]
    if context.history:
        ordered.extend(("", Layer.HISTORY.value, h.text, h) for h in context.history)
    else:
        ordered.extend((u.id, u.layer.value, u.text, None) for u in context.units if u.layer == Layer.HISTORY)
    if context.query.strip():
        ordered.append((QUERY_SOURCE, QUERY_SOURCE, context.query, None))
    tools = sorted((u for u in context.units if u.layer == Layer.TOOLS), key=lambda u: (u.returned_at or 0, u.ordinal))
    ordered.extend((u.id, u.layer.value, u.text, None) for u in tools)
    return ordered


def argument_sources(context: ActionContext) -> tuple[ArgumentSource, ...]:
    """Argument provenance of ``context.action``: one entry per leaf value worth looking up, in argument order."""
    sources = _in_received_order(context)
    out: list[ArgumentSource] = []
    for path, value in leaf_values(context.action.arguments):
        if not _worth_looking_up(value):
            continue
        holders = []
        for source_id, layer, text, item in sources:
            span = find_value(value, text)
            if span is not None:
                if item is not None:  # a history message: cite its unit when the unit holds the match
                    source_id = item.source_id(span[1])
                    text = text[: item.kept_chars] if source_id == item.unit_id else text
                holders.append(_holder(source_id, layer, text, span))
        shown = value if isinstance(value, str) else str(value)
        out.append(ArgumentSource(path, shown, _decisive(value), tuple(holders)))
    return tuple(out)
