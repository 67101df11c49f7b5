"""The turn a free or metered command works on: a stored-turn file, or a conversation log as an agent left it.

``gate``, ``quote`` and ``trace`` take either. A stored-turn file (the service's own shape, see ``fixtures/``) is
read as it stands. Any other file is read the way ``provenance import`` reads it — one conversation in any
importable format (OpenAI chat, Responses, Anthropic, pydantic-ai, LangChain, OTel GenAI, MCP, AgentDojo and
τ-bench logs, …) — and split into turns by the same rule; the command works on its last turn, or on ``--turn N``
(0 the first, -1 the last), so a user points them at a log without a store.
"""

from __future__ import annotations

import json
from pathlib import Path

from estimator.corpus.turn import StoredTurn
from provenance_api.core.errors import InvalidInput
from provenance_api.importers import UnknownFormatError, import_conversation
from provenance_api.importers.turn_files import load_turn_file

__all__ = ["load_turn"]


def _stored_turn_shape(path: Path) -> bool:
    """Whether the file is meant as a stored turn (an object with ``turn_id`` or ``response`` and no message list
    of its own), not a conversation: then the stored-turn reader names whatever is wrong with it."""
    if path.suffix == ".jsonl":
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return True  # not JSON: the stored-turn reader names the problem and the fix
    return isinstance(data, dict) and ("turn_id" in data or "response" in data) and "messages" not in data


def load_turn(path: str | Path, turn: int | None = None) -> StoredTurn:
    """The turn to work on (see the module docstring); a clear error naming ``FILE`` or ``--turn`` otherwise."""
    p = Path(path)
    if not p.is_file():
        raise InvalidInput(f"no such file: {p}", field="FILE", fix="pass a stored-turn JSON file or a conversation log")
    if _stored_turn_shape(p):
        if turn is not None:
            raise InvalidInput(
                f"{p} is a stored turn: it holds one turn, so --turn does not apply",
                field="--turn",
                fix="leave out --turn, or pass a conversation log",
            )
        return load_turn_file(p)
    from provenance_api.operations.imports import file_items  # the storage layer's import: only for a log

    items = list(file_items(p))
    readable = [i for i in items if i.problem is None]
    if not readable:
        why = items[0].problem if items else "it holds no conversation"
        raise InvalidInput(f"{p}: {why}", field="FILE", fix="pass a stored-turn JSON file or a conversation log")
    if len(readable) > 1:
        raise InvalidInput(
            f"{p} holds {len(readable)} conversations; gate, quote and trace work on one",
            field="FILE",
            fix="import it (provenance import FILE) and use the service, or pass a file of one conversation",
        )
    item = readable[0]
    try:
        result = import_conversation(item.obj, None, conversation_id=item.name)
    except UnknownFormatError as exc:
        raise InvalidInput(f"{p}: {exc}", field="FILE", fix="pass a stored turn or a supported log") from exc
    turns = result.turns
    if not turns:
        said = "; ".join(f"{e.where}: {e.reason}" for e in [*result.errors, *result.notes][:3])
        raise InvalidInput(
            f"{p}: the conversation has no turn (no assistant reply and no tool call)" + (f" — {said}" if said else ""),
            field="FILE",
            fix="pass a conversation in which the agent replied or acted",
        )
    index = -1 if turn is None else turn
    if not -len(turns) <= index < len(turns):
        raise InvalidInput(
            f"{p} has {len(turns)} turn{'s' if len(turns) != 1 else ''}; there is no turn {index}",
            field="--turn",
            fix=f"pass --turn 0 to {len(turns) - 1} (or -1 for the last)",
        )
    return turns[index]
