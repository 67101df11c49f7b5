"""When the answer and each action were produced, and how old each source was at that moment.

A source's age is ``produced_at − observed_at`` in seconds: the moment the answer (or the action) was produced
minus the moment the source's content was observed (its envelope's ``observed_at``). Either time missing gives no
age — ``not recorded`` — never a guess; a source observed after the moment (a clock skew, or a return read after
the answer) has a negative age, shown as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from estimator.corpus.envelope import NOT_RECORDED
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Unit

__all__ = ["SourceAge", "age_seconds", "age_text", "answer_time", "source_ages"]


class SourceAge(BaseModel):
    """One source's age at a moment: ``age_seconds`` None when the source's or the moment's time is not recorded."""

    model_config = ConfigDict(frozen=True)

    source_id: str
    observed_at: datetime | None
    age_seconds: float | None
    shown: str
    """The age in words: ``12 s``, ``3 min 20 s``, or ``not recorded`` (saying which time is missing)."""


def answer_time(turn: StoredTurn) -> datetime | None:
    """When the answer was produced, as the history recorded it: the turn's ``created_at``, else the time of the
    last response message with a text part (its part's, else its own). None: not recorded."""
    if turn.created_at is not None:
        return turn.created_at
    for message in reversed(turn.model_messages):
        texts = [p for p in message.parts if p.part_kind == "text"]
        if message.kind == "response" and texts:
            return texts[-1].recorded_at or message.recorded_at
    return None


def age_seconds(observed_at: datetime | None, at: datetime | None) -> float | None:
    """``at − observed_at`` in seconds, or None when either is missing."""
    if observed_at is None or at is None:
        return None
    return (at - observed_at).total_seconds()


def age_text(age: float | None, *, observed: bool = True, produced: bool = True) -> str:
    """An age in words (``45 s``, ``2 min 5 s``, ``3 h 10 min``), or why there is none."""
    if age is None:
        if not observed and not produced:
            return f"{NOT_RECORDED} (no time for the source or the moment)"
        if not observed:
            return f"{NOT_RECORDED} (the source's time)"
        return f"{NOT_RECORDED} (when it was produced)"
    sign = "-" if age < 0 else ""
    whole = abs(age)
    if whole < 60:
        return f"{sign}{whole:.3g} s" if whole < 10 else f"{sign}{whole:.0f} s"
    minutes, seconds = divmod(round(whole), 60)
    if minutes < 60:
        return f"{sign}{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{sign}{hours} h {minutes} min"
    return f"{sign}{hours // 24} d {hours % 24} h"


def source_ages(units: Iterable[Unit], at: datetime | None) -> tuple[SourceAge, ...]:
    """The age of each source at ``at`` (the answer's or an action's time), in the units' order."""
    out: list[SourceAge] = []
    for unit in units:
        observed = unit.envelope.observed_at
        age = age_seconds(observed, at)
        shown = age_text(age, observed=observed is not None, produced=at is not None)
        out.append(SourceAge(source_id=unit.id, observed_at=observed, age_seconds=age, shown=shown))
    return tuple(out)
