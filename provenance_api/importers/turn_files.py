"""Stored turns as files: reading one from a JSON file (with errors that name the problem and the fix), and
telling the CLI's own turn shape from a conversation log when history is imported.

A stored-turn file (``fixtures/*.json``, what ``POST /v1/turns`` takes) is one turn already split: its system
prompt, history (``request_payload.messages``), the agent's own messages, tool calls and response are kept as
they are, under its own ``turn_id``. ``provenance import`` and ``POST /v1/imports`` read it as such
(``is_stored_turns``, ``import_stored_turns``) — one object, a list of them or JSONL lines of them — instead of
reading its ``model_messages`` as a conversation and losing everything else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from estimator.corpus.turn import StoredTurn
from provenance_api.core.errors import InvalidInput
from provenance_api.importers.common import ImportIssue, ImportResult

__all__ = [
    "CONVERSATION_KEYS",
    "import_stored_turns",
    "is_stored_turn",
    "is_stored_turns",
    "load_turn_file",
]

CONVERSATION_KEYS = frozenset(
    {"messages", "all_messages", "input", "output", "traj", "trajectory", "conversation", "history"}
)
"""Keys under which a conversation format keeps its messages, and a stored turn has none of."""


def is_stored_turn(obj: Any) -> bool:
    """Whether ``obj`` is meant as a stored turn, not a conversation: an object with ``turn_id`` and
    ``response`` and none of the keys a conversation format keeps its messages under. Any other key it has is
    a stored turn's or a mistake, which reading it as a turn names (``extra_forbidden``) instead of passing over."""
    return isinstance(obj, dict) and {"turn_id", "response"} <= obj.keys() and not obj.keys() & CONVERSATION_KEYS


def is_stored_turns(obj: Any) -> bool:
    """A stored turn, or a non-empty list of them (one JSON document or one JSONL line holding several)."""
    if isinstance(obj, list):
        return bool(obj) and all(is_stored_turn(x) for x in obj)
    return is_stored_turn(obj)


def import_stored_turns(obj: Any) -> ImportResult:
    """Stored turns as they stand: every field kept, each under its own ``turn_id``. A single turn that is not
    a valid one raises ``ValidationError`` (naming the field); in a list, each invalid one is an error of its
    own (``[i]``) and the others are imported."""
    if not isinstance(obj, list):
        return ImportResult(turns=[StoredTurn.model_validate(obj)])
    turns: list[StoredTurn] = []
    errors: list[ImportIssue] = []
    for index, item in enumerate(obj):
        try:
            turns.append(StoredTurn.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "(root)"
            errors.append(ImportIssue(f"[{index}]", f"turn.{where}: {first['msg']}"))
    return ImportResult(turns=turns, errors=errors)


def load_turn_file(path: str | Path) -> StoredTurn:
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8-sig")  # a UTF-8 BOM is accepted
    except FileNotFoundError as exc:
        raise InvalidInput(f"no such file: {p}", field="FILE", fix="pass the path of a stored-turn JSON file") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{p} is not UTF-8 text", field="FILE", fix="save the file as UTF-8 JSON") from exc
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{p} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            field="FILE",
            fix="fix the JSON syntax",
        ) from exc
    try:
        return StoredTurn.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(root)"
        raise InvalidInput(
            f"{p}: field {where}: {first['msg']}",
            field=where,
            fix="the file must be a stored turn (see fixtures/ for examples)",
        ) from exc
