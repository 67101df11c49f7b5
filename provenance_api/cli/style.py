"""How the command line writes: colour and in-place progress on a terminal only, plain lines otherwise.

As ``gh`` and ``llm`` do: colour only when the stream is a terminal, never with ``NO_COLOR`` set (any
value, https://no-color.org), ``TERM=dumb`` or ``--no-color``. Progress redraws one line with ``\\r`` on
a terminal; redirected, it writes a plain line as each stage starts and never a ``\\r``, and a long count
(an import) writes its counts every ``COUNT_EVERY`` seconds, which a CI log can follow without being flooded.
Counts are written with their noun in the right number (``plural``). A long list of issues is cut
(``capped_lines``): a few of each kind, then how many more of that kind there are.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

__all__ = ["COUNT_EVERY", "Progress", "Style", "capped_lines", "issue_kind", "plural", "wants_colour"]

COUNT_EVERY = 10.0
"""Seconds between two count lines of a long count on a stream that is not a terminal."""
REDRAW_EVERY = 0.1  # seconds between two redraws of the live line
BAR_WIDTH = 24

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
    clock: Callable[[], float] = time.monotonic
    _seen: set[str] = field(default_factory=set)
    _drawn: bool = False
    _started: float | None = None
    _last: float | None = None

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

    def count(self, stage: str, counts: str, done: float | None = None, amount: str = "") -> None:
        """A long count: ``done`` the share finished (0–1, None when unknown), ``amount`` what it is a share of
        (``18.5 of 50.0 MB``). On a terminal, the line is redrawn with a bar (at most every ``REDRAW_EVERY``
        seconds); otherwise a plain line every ``COUNT_EVERY`` seconds (none for a count that ends sooner)."""
        now = self.clock()
        if self._started is None:
            self._started = self._last = now
        assert self._last is not None
        since = now - self._last
        share = "" if done is None else f"{min(max(done, 0.0), 1.0):.0%}"
        if self.live:
            if self._drawn and since < REDRAW_EVERY:
                return
            bar = ""
            if done is not None:
                filled = round(min(max(done, 0.0), 1.0) * BAR_WIDTH)
                bar = self.style.bold("█" * filled) + self.style.dim("░" * (BAR_WIDTH - filled)) + f" {share:>4} "
            head = self.style.bold(f"[{stage}]")
            self.stream.write(f"\r\x1b[K{head} {bar}{amount + ' · ' if amount else ''}{counts}")
            self._drawn = True
        else:
            if since < COUNT_EVERY:
                return
            elapsed = _duration(now - self._started)
            where = f"{share} ({amount})" if share and amount else share or amount
            self.stream.write(f"[{stage}] {where + ' ' if where else ''}after {elapsed}: {counts}\n")
        self._last = now
        self.stream.flush()

    def done(self) -> None:
        """End the live line (nothing to end when redirected)."""
        if self.live and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
        self._drawn = False


def _duration(seconds: float) -> str:
    """``45 s``, ``3 min 05 s``, ``1 h 02 min``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


_VARIABLE = re.compile(r"'[^']*'|\"[^\"]*\"|(?<![\w-])\d[\d,.]*")


def issue_kind(reason: str) -> str:
    """What kind of issue ``reason`` is: its text up to the first ``:`` or `` (``, with quoted names and
    numbers left out (``invalid JSON``, ``not UTF-8``, ``turn … is … bytes as stored, over …``)."""
    head = _VARIABLE.sub("…", reason)
    for stop in (": ", " (", "; "):
        head = head.split(stop, 1)[0]
    return head.strip()[:80]


def capped_lines(
    issues: Sequence[dict[str, str]], prefix: str = "", *, per_kind: int = 5, total: int = 20, more: str = ""
) -> list[str]:
    """One line per issue (``{where, reason}``), as ``  {prefix}{where}: {reason}``, but at most ``per_kind`` of
    each kind (``issue_kind``) and ``total`` in all, taken a kind at a time so every kind is seen; then, for each
    kind with more, how many more there are (``more``: where they all are, e.g. `` (all of them: --json)``)."""
    kinds: dict[str, list[int]] = {}
    for index, issue in enumerate(issues):
        kinds.setdefault(issue_kind(issue["reason"]), []).append(index)
    shown: set[int] = set()
    for turn in range(per_kind):
        for group in kinds.values():
            if turn < len(group) and len(shown) < total:
                shown.add(group[turn])
    lines = [f"  {prefix}{issues[i]['where']}: {issues[i]['reason']}" for i in sorted(shown)]
    for kind, group in kinds.items():
        left = sum(1 for i in group if i not in shown)
        if left:
            lines.append(f"  {prefix}… and {left:,} more like {kind!r}{more}")
    return lines
