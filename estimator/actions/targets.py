"""The actions of a turn: every tool call the agent made, in order, with the context it had when it made it.

A call's context is the system prompt, the history and the query — which the agent had from the start — and the
tool returns that came back **before** the call. A return that arrives later, the call's own included, can never
have caused it. Positions follow the corpus (``Unit.returned_at``): in native messages, a part's index among the
current turn's parts; in a flat list of calls, the call's index (call ``i`` was made after return ``i - 1``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import regex

from estimator.corpus.build import current_messages, history_messages
from estimator.corpus.turn import TOOL_CALL_KINDS, StoredTurn, recorded_time
from estimator.corpus.units import Corpus, Layer, Unit

__all__ = [
    "Action",
    "ActionContext",
    "HistoryItem",
    "action_context",
    "canonical_arguments",
    "extract_actions",
    "tool_words",
    "whole_history",
]


def canonical_arguments(arguments: Any) -> Any:
    """The arguments as sent: a JSON text is parsed (an object, list or value), anything else is kept as is."""
    if isinstance(arguments, str):
        stripped = arguments.strip()
        if not stripped:
            return {}
        try:
            return json.loads(stripped)
        except ValueError:
            return arguments
    return {} if arguments is None else arguments


def tool_words(tool: str) -> list[str]:
    """A tool's name in lower-case words: ``transfer_money``, ``transferMoney`` → ``["transfer", "money"]``."""
    return [w.lower() for w in regex.split(r"[_\-.\s]+|(?<=[a-z])(?=[A-Z])", tool) if w]


@dataclass(frozen=True)
class Action:
    """One tool call of the turn: ``a<index>``, the tool, the call id the history gave it, the arguments and
    when it was made (``position``, comparable with ``Unit.returned_at``)."""

    id: str
    index: int
    tool: str
    call_id: str | None
    arguments: Any
    position: int
    produced_at: datetime | None = None
    """When the agent made the call, as the history recorded it (None: not recorded)."""
    principal: str | None = None
    """Whom the call was made for, as the history recorded it (None: not recorded)."""

    @property
    def text(self) -> str:
        """The call exactly as emitted, canonically: ``name({"key": value, …})`` with sorted keys."""
        return f"{self.tool}({json.dumps(self.arguments, ensure_ascii=False, sort_keys=True, default=str)})"


def extract_actions(turn: StoredTurn) -> tuple[Action, ...]:
    """Every tool call of the current turn, in the order made (native messages first, else the flat calls of
    the response payload — the same path ``build_corpus`` takes for the returns)."""
    actions: list[Action] = []
    if turn.model_messages:
        position = -1
        for message in current_messages(turn):
            for part in message.parts:
                position += 1
                if part.part_kind in TOOL_CALL_KINDS:
                    index = len(actions)
                    actions.append(
                        Action(
                            id=f"a{index}",
                            index=index,
                            tool=part.tool_name or "tool",
                            call_id=part.tool_call_id or None,
                            arguments=canonical_arguments(part.args),
                            position=position,
                            produced_at=part.recorded_at or message.recorded_at,
                            principal=part.provenance.principal if part.provenance else None,
                        )
                    )
    if not actions:
        for index, call in enumerate(turn.response_payload.tool_calls):
            actions.append(
                Action(
                    id=f"a{index}",
                    index=index,
                    tool=call.name,
                    call_id=None,
                    arguments=canonical_arguments(call.arguments),
                    position=index,
                    produced_at=recorded_time(call.made_at),
                    principal=call.provenance.principal if call.provenance else None,
                )
            )
    return tuple(actions)


@dataclass(frozen=True)
class HistoryItem:
    """One message of the conversation before the query, whole (trimmed as its unit is). ``unit_id`` is its
    history unit when the corpus keeps it, which holds its first ``kept_chars`` characters (all of them unless
    the message was cut to its budget); ``index`` is its place in the conversation, from 0."""

    index: int
    role: str
    text: str
    unit_id: str | None = None
    kept_chars: int = 0

    def source_id(self, end: int) -> str:
        """The id to cite for a match ending at ``end``: the unit when it holds it, else ``history:<index>`` —
        the agent read the message, but the corpus left it (or that part of it) out."""
        return self.unit_id if self.unit_id is not None and end <= self.kept_chars else f"history:{self.index}"


@dataclass(frozen=True)
class ActionContext:
    """What the agent could read when it made ``action``: the query, the corpus units it had seen, and the whole
    conversation before the query (``history``, oldest first: argument provenance searches all of it)."""

    action: Action
    query: str
    units: tuple[Unit, ...]
    history: tuple[HistoryItem, ...] = ()

    def later(self, corpus: Corpus) -> tuple[Unit, ...]:
        """The tool sources that came back at or after the call (never its cause)."""
        seen = {u.id for u in self.units}
        return tuple(u for u in corpus.tool_units() if u.id not in seen)


def _seen_before(unit: Unit, action: Action) -> bool:
    if unit.layer != Layer.TOOLS:
        return True  # instructions and history were there before the turn began
    return unit.returned_at is not None and unit.returned_at < action.position


def whole_history(turn: StoredTurn, corpus: Corpus) -> tuple[HistoryItem, ...]:
    """Every message before the query, each tied to its history unit when the corpus keeps it (the newest)."""
    every = history_messages(turn, corpus.failed_calls_as_sources)  # the items the corpus was built from
    kept = corpus.in_layer(Layer.HISTORY)
    first_kept = len(every) - len(kept)
    items = []
    for index, (role, text, call) in enumerate(every):
        whole = text.rstrip() if call is not None else text.strip()  # as the history layer trims it
        unit = kept[index - first_kept] if index >= first_kept else None
        kept_chars = len(unit.text) if unit is not None and whole.startswith(unit.text) else 0
        items.append(HistoryItem(index, role, whole, unit.id if unit is not None else None, kept_chars))
    return tuple(items)


def action_context(
    turn: StoredTurn, corpus: Corpus, action: Action, history: tuple[HistoryItem, ...] | None = None
) -> ActionContext:
    """The context ``action`` was made in (units in corpus order); ``history`` when already built for the turn."""
    return ActionContext(
        action=action,
        query=turn.effective_query(),
        units=tuple(u for u in corpus.units if _seen_before(u, action)),
        history=whole_history(turn, corpus) if history is None else history,
    )
