"""How the command line writes: colour and in-place progress on a terminal only, plain lines otherwise.

As ``gh`` and ``llm`` do: colour only when the stream is a terminal, never with ``NO_COLOR`` set (any
value, https://no-color.org), ``TERM=dumb`` or ``--no-color``. Progress redraws one line with ``\\r`` on
a terminal; redirected, it writes a plain line as each stage starts and never a ``\\r``. Counts are
written with their noun in the right number (``plural``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TextIO

__all__ = ["Progress", "Style", "plural", "wants_colour"]

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34", "cyan": "36"}


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``1 conversation``, ``2 conversations``; ``plural_form`` for irregular nouns."""
    return f"{count:,} {singular if count == 1 else (plural_form or singular + 's')}"


def wants_colour(stream: TextIO, no_color: bool = False) -> bool:
    """Colour for ``stream``: a terminal, without ``--no-color``, ``NO_COLOR`` or ``TERM=dumb``."""
    if no_color or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@dataclass(frozen=True)
class Style:
    """Paints text for one stream, or leaves it plain."""

    colour: bool = False

    @classmethod
    def for_stream(cls, stream: TextIO, no_color: bool = False) -> Style:
        return cls(wants_colour(stream, no_color))

    def paint(self, text: str, *names: str) -> str:
        if not self.colour or not names or not text:
            return text
        codes = ";".join(_CODES[name] for name in names)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def bold(self, text: str) -> str:
        return self.paint(text, "bold")

    def dim(self, text: str) -> str:
        return self.paint(text, "dim")

    def good(self, text: str) -> str:
        return self.paint(text, "green")

    def bad(self, text: str) -> str:
        return self.paint(text, "red")

    def warn(self, text: str) -> str:
        return self.paint(text, "yellow")

    def note(self, text: str) -> str:
        return self.paint(text, "cyan")


@dataclass
class Progress:
    """A running count on ``stream``: redrawn in place on a terminal; otherwise a plain line when a stage starts."""

    stream: TextIO
    live: bool
    style: Style = field(default_factory=Style)
    _seen: set[str] = field(default_factory=set)
    _drawn: bool = False

    @classmethod
    def for_stream(cls, stream: TextIO, no_color: bool = False) -> Progress:
        isatty = getattr(stream, "isatty", None)
        return cls(stream, bool(isatty and isatty()), Style.for_stream(stream, no_color))

    def update(self, stage: str, counts: str, message: str = "") -> None:
        if self.live:
            line = f"{self.style.bold(f'[{stage}]')} {counts}  {self.style.dim(message[:60])}"
            self.stream.write("\r\x1b[K" + line)
            self._drawn = True
        elif stage not in self._seen:  # redirected: one plain line as each stage starts
            self.stream.write(f"[{stage}] {counts}{'  ' + message[:80] if message else ''}\n")
        self._seen.add(stage)
        self.stream.flush()

    def done(self) -> None:
        """End the live line (nothing to end when redirected)."""
        if self.live and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
        self._drawn = False
