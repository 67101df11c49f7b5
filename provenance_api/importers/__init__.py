"""Importers: stored chat history of seven formats → stored turns (issue 5).

Pure functions from parsed JSON to :class:`~estimator.corpus.turn.StoredTurn`; no I/O. Every format is read
into the neutral messages of :mod:`.common` and split into turns by one rule, so
``import_conversation(obj, conversation_id="c1")`` yields one turn per assistant reply (and an unfinished one,
with an empty response, for calls after the last reply), with content ids ``c1:<12 hex>`` (re-importing is
idempotent; :mod:`.common`).

Formats (``FORMATS``): ``pydantic_ai``, ``openai_chat``, ``openai_responses``, ``anthropic``,
``langchain``, ``otel``, ``agentdojo``. :func:`detect_format` picks one from the data; ``format=`` overrides it
(hyphens are accepted: ``openai-chat``). MCP ``CallToolResult`` payloads inside tool returns (objects or
JSON strings of them) are flattened by :mod:`.mcp` in every format, ``isError`` marking a failed call. A failed
call keeps its error text: the turn carries it as a failed return, later turns as history marked ``is_error``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from provenance_api.importers import (
    agentdojo,
    anthropic,
    langchain,
    openai_chat,
    openai_responses,
    otel,
    pydantic_ai,
    turn_files,
)
from provenance_api.importers.common import (
    ImportIssue,
    ImportResult,
    NeutralMessage,
    NeutralToolCall,
    NeutralToolResult,
    split_turns,
    turn_key,
)

Importer = Callable[[Any, str], ImportResult]

IMPORTERS: dict[str, Importer] = {
    pydantic_ai.FORMAT: pydantic_ai.import_pydantic_ai,
    openai_chat.FORMAT: openai_chat.import_openai_chat,
    openai_responses.FORMAT: openai_responses.import_openai_responses,
    anthropic.FORMAT: anthropic.import_anthropic,
    langchain.FORMAT: langchain.import_langchain,
    otel.FORMAT: otel.import_otel,
    agentdojo.FORMAT: agentdojo.import_agentdojo,
}
FORMATS: tuple[str, ...] = tuple(IMPORTERS)
MAX_CONVERSATION_ID = 236  # a turn id is "<conversation id>:<12 hex>[.<n>]" (common.content_ids), at most 256

__all__ = [
    "FORMATS",
    "IMPORTERS",
    "MAX_CONVERSATION_ID",
    "ImportIssue",
    "ImportResult",
    "NeutralMessage",
    "NeutralToolCall",
    "NeutralToolResult",
    "UnknownFormatError",
    "detect_format",
    "import_conversation",
    "normalize_format",
    "split_turns",
    "turn_key",
]


class UnknownFormatError(ValueError):
    """The data matches none of the formats, or a format name is not one of ``FORMATS``."""


def normalize_format(name: str) -> str:
    """A format name as ``FORMATS`` spells it (``openai-chat`` → ``openai_chat``)."""
    key = name.strip().lower().replace("-", "_")
    if key not in IMPORTERS:
        raise UnknownFormatError(f"unknown format {name!r}; expected one of {', '.join(FORMATS)}")
    return key


def _messages(obj: Any) -> list[Any] | None:
    if isinstance(obj, list):
        return obj
    if isinstance(obj, dict):
        for key in ("messages", "model_messages", "all_messages", "traj", "trajectory", "conversation", "history"):
            if isinstance(obj.get(key), list):
                return list(obj[key])
    return None


def detect_format(obj: Any) -> str:
    """The format of one conversation, from its shape alone.

    Order matters only where shapes overlap: a plain ``[{"role", "content": str}]`` list is valid
    OpenAI Chat and Anthropic alike and is read as OpenAI Chat (both give the same turns); an AgentDojo run is
    chat-shaped too, and is told by what only AgentDojo writes (``agentdojo.looks_like``)."""
    if otel.looks_like(obj) and not (isinstance(obj, list) and openai_chat.looks_like(obj)):
        return otel.FORMAT
    if anthropic.is_lone_message(obj):
        return anthropic.FORMAT
    envelope = obj if isinstance(obj, dict) and not isinstance(obj.get("messages"), list) else {}
    if isinstance(envelope.get("input"), list) or isinstance(envelope.get("output"), list):
        return openai_responses.FORMAT
    messages = _messages(obj)
    if not messages:
        raise UnknownFormatError("no message list found (expected a list, or an object with 'messages')")
    if agentdojo.looks_like(obj, messages):
        return agentdojo.FORMAT
    if pydantic_ai.looks_like(messages):
        return pydantic_ai.FORMAT
    if langchain.looks_like(messages):
        return langchain.FORMAT
    if openai_responses.looks_like(messages):
        return openai_responses.FORMAT
    if anthropic.looks_like(obj, messages):
        return anthropic.FORMAT
    if openai_chat.looks_like(messages):
        return openai_chat.FORMAT
    return _by_most_messages(messages)


_PER_MESSAGE: dict[str, Callable[[Any], bool]] = {
    pydantic_ai.FORMAT: lambda m: pydantic_ai.looks_like([m]),
    langchain.FORMAT: lambda m: langchain.looks_like([m]),
    openai_chat.FORMAT: lambda m: openai_chat.looks_like([m]),
}


def _by_most_messages(messages: list[Any]) -> str:
    """The format most messages are in, when some are not: its importer then reports each misfit by index
    and imports the rest. None fitting at all names the first message and what it is."""
    fits = {name: sum(1 for m in messages if check(m)) for name, check in _PER_MESSAGE.items()}
    best = max(fits, key=lambda name: fits[name])
    if fits[best] * 2 >= len(messages):
        return best
    first = messages[0]
    shown = f"keys {sorted(first)[:6]}" if isinstance(first, dict) else f"a {type(first).__name__}"
    raise UnknownFormatError(
        f"the messages match none of: {', '.join(FORMATS)} (message 0 has {shown}; "
        "chat messages need a role, pydantic-ai messages a kind and parts)"
    )


def import_conversation(obj: Any, format: str | None = None, *, conversation_id: str) -> ImportResult:
    """One conversation → its stored turns. Raises ``UnknownFormatError`` when the format cannot be told,
    ``ValueError`` when the data is not a conversation of that format at all; anything less is reported
    and the rest is imported: in the result's ``errors`` a message that was rejected (its fields of the wrong
    shape), in its ``warnings`` what was read past (an entry that is no message of the format, an item kind
    not read) or read differently (a return that answers no call, kept in the history only)."""
    if not conversation_id or len(conversation_id) > MAX_CONVERSATION_ID:
        raise ValueError(f"conversation_id must be 1–{MAX_CONVERSATION_ID} characters")
    if not format and turn_files.is_stored_turns(obj):  # the CLI's own turn shape: kept whole, not re-split
        return turn_files.import_stored_turns(obj)
    name = normalize_format(format) if format else detect_format(obj)
    return IMPORTERS[name](obj, conversation_id)
