"""LangChain messages, in the ``messages_to_dict`` form (``{"type", "data"}``) or the ``dumpd`` form
(``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``) → stored turns.

Types: ``system``, ``human``, ``ai`` (``content``, ``tool_calls`` with object ``args``,
``invalid_tool_calls`` with raw ``args`` text, ``response_metadata.model_name``), ``tool``
(``tool_call_id``, ``status``), ``function`` (paired by name), ``chat`` (its ``role``). Calls are read
from ``tool_calls`` (or, for old writers, ``additional_kwargs.tool_calls``), not from provider blocks
in ``content``.

Failure marks: ``ToolMessage.status == "error"`` (its content, LangGraph's ``ToolNode`` writes ``Error: …``, is the
error text), an MCP ``CallToolResult`` content with ``isError: true``, and ``invalid_tool_calls``, which were never
executed (their ``error`` is the text, unless a tool message answers them). An entry that is no LangChain message
is skipped (a warning); a message of the wrong shape is rejected (an error).

Times: a ``created_at`` beside ``type`` / ``data`` (or ``lc`` / ``kwargs``) — what the LangGraph connector writes,
the ``ts`` of the checkpoint the message first appears in — is a tool message's observed time and any other
message's time; an AI message's ``response_metadata.created_at`` (the provider's) is preferred for its own, and
an MCP result's ``_meta`` time for a return. LangChain's own forms carry no time: without one, not recorded.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from provenance_api.importers.common import (
    ImportIssue,
    ImportResult,
    NeutralMessage,
    NeutralToolCall,
    NeutralToolResult,
    Role,
    as_dict,
    as_list,
    opt_str,
    optional_list,
    parse_arguments,
    parse_time,
    placed,
    split_turns,
    unwrap,
)
from provenance_api.importers.mcp import message_content, observed, return_text

FORMAT = "langchain"
_TYPES: dict[str, Role] = {
    "system": "system",
    "human": "user",
    "ai": "assistant",
    "tool": "tool",
    "function": "tool",
    "developer": "system",
}
_CLASSES = {
    "SystemMessage": "system",
    "HumanMessage": "human",
    "AIMessage": "ai",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
    "ChatMessage": "chat",
}
_CHAT_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}


def looks_like(messages: list[Any]) -> bool:
    return bool(messages) and all(_kind_and_data(m) is not None for m in messages)


def _kind_and_data(message: Any) -> tuple[str, dict[str, Any]] | None:
    """The message type (human, ai, …) and its fields, from either serialised form."""
    if not isinstance(message, dict):
        return None
    if message.get("lc") == 1 and message.get("type") == "constructor" and as_list(message.get("id")):
        cls = str(message["id"][-1])
        kind = _CLASSES.get(cls.removesuffix("Chunk"))
        kwargs = message.get("kwargs")
        return (kind, kwargs) if kind and isinstance(kwargs, dict) else None
    data = message.get("data")
    kind = message.get("type")
    if isinstance(data, dict) and isinstance(kind, str):
        kind = _CLASSES.get(kind.removesuffix("Chunk"), kind)
        return (kind, data) if kind in _TYPES or kind == "chat" else None
    return None


def import_langchain(obj: Any, conversation_id: str) -> ImportResult:
    raw, envelope = unwrap(obj)
    errors: list[ImportIssue] = []
    warnings: list[ImportIssue] = []
    neutral: list[NeutralMessage] = []
    for index, message in enumerate(raw):
        read = _kind_and_data(message)
        if read is None:
            warnings.append(
                ImportIssue(
                    f"{conversation_id}: message {index}",
                    "not a LangChain message (messages_to_dict or dumpd form); skipped",
                )
            )
            continue
        try:
            neutral.append(placed(_message(*read, parse_time(message.get("created_at"))), index))
        except ValueError as exc:
            errors.append(ImportIssue(f"{conversation_id}: message {index}", f"{read[0]} message rejected: {exc}"))
    return split_turns(
        conversation_id,
        neutral,
        model=opt_str(envelope.get("model")),
        marks_failure=True,
        errors=errors,
        warnings=warnings,
    )


def _message(kind: str, data: dict[str, Any], recorded: datetime | None = None) -> NeutralMessage:
    """One message; ``recorded``: the time written beside it (the LangGraph connector's first-seen checkpoint
    ``ts``), its observed time for a tool message and its produced time otherwise."""
    role = _CHAT_ROLES.get(str(data.get("role")), "user") if kind == "chat" else _TYPES[kind]
    content = data.get("content")
    if role == "tool":
        text, mcp_error = return_text(content)
        failed = data.get("status") == "error" or mcp_error
        call_id = None if kind == "function" else opt_str(data.get("tool_call_id"))
        name = opt_str(data.get("name")) or ("function" if kind == "function" else None)
        result = NeutralToolResult(call_id, text, "failed" if failed else "success", name)
        return NeutralMessage("tool", tool_results=[observed(result, content, recorded)], created_at=recorded)
    text, media = message_content(content)
    if role != "assistant":
        return NeutralMessage(role, text, attachments=media if role == "user" else [], created_at=recorded)
    calls = [
        NeutralToolCall(opt_str(c.get("id")), str(c.get("name") or "tool"), parse_arguments(c.get("args")))
        for c in optional_list(data, "tool_calls")
        if isinstance(c, dict)
    ]
    if "tool_calls" not in data:
        calls = _legacy_calls(data.get("additional_kwargs"))
    for bad in optional_list(data, "invalid_tool_calls"):
        if isinstance(bad, dict):
            reason = f"invalid tool call, never executed: {bad.get('error') or 'unparsable arguments'}"
            calls.append(
                NeutralToolCall(
                    opt_str(bad.get("id")),
                    str(bad.get("name") or "tool"),
                    parse_arguments(bad.get("args")),
                    failure=reason,
                )
            )
    metadata = as_dict(data.get("response_metadata"))
    model = opt_str(metadata.get("model_name")) or opt_str(metadata.get("model"))
    created = parse_time(metadata.get("created_at") or metadata.get("created")) or recorded
    return NeutralMessage("assistant", text, calls, model=model, created_at=created)


def _legacy_calls(extra: Any) -> list[NeutralToolCall]:
    """Calls of writers older than ``AIMessage.tool_calls``: OpenAI-shaped ``additional_kwargs``."""
    if not isinstance(extra, dict):
        return []
    calls: list[NeutralToolCall] = []
    for tc in extra.get("tool_calls") or []:
        function = as_dict(tc.get("function")) if isinstance(tc, dict) else {}
        if function:
            calls.append(
                NeutralToolCall(
                    opt_str(tc.get("id")),
                    str(function.get("name") or "tool"),
                    parse_arguments(function.get("arguments")),
                )
            )
    legacy = extra.get("function_call")
    if isinstance(legacy, dict):
        calls.append(
            NeutralToolCall(None, str(legacy.get("name") or "function"), parse_arguments(legacy.get("arguments")))
        )
    return calls
