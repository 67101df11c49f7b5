"""OpenAI Chat Completions transcripts (a ``messages`` list) → stored turns.

Roles: ``system`` / ``developer`` (the instructions, string or text parts), ``user`` (string or parts; images,
audio and files are named as attachments), ``assistant`` (``content``, ``refusal``, ``tool_calls`` of type
``function{name, arguments: JSON string}`` or ``custom{name, input}``, and the deprecated ``function_call``),
``tool`` (``tool_call_id``) and the deprecated ``function`` (paired by name only). The format has no failure
flag of its own: an error is text in ``content``, kept as it is. Marked failed: a content that is an MCP
``CallToolResult`` with ``isError: true`` (as an object or a JSON string of one), and ``is_error: true`` on
the message (what this project writes into stored history). A ``null`` content is the return ``null``. A field
of the wrong type (``tool_calls`` not a list) rejects that message (an error), named by index and field; an
entry that is no chat message at all is skipped (a warning). A user message of ``This is file <id>:`` and
files, after a tool return saying ``See file <id>``, is that tool's output (pydantic-ai writes it), not a
query.
"""

from __future__ import annotations

from typing import Any

from provenance_api.importers.common import (
    FieldError,
    ImportIssue,
    ImportResult,
    NeutralMessage,
    NeutralToolCall,
    NeutralToolResult,
    as_dict,
    is_file_follow_up,
    opt_str,
    optional_bool,
    optional_list,
    parse_arguments,
    parse_time,
    placed,
    split_turns,
    unwrap,
)
from provenance_api.importers.mcp import message_content, observed, return_text

FORMAT = "openai_chat"
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def looks_like(messages: list[Any]) -> bool:
    return bool(messages) and all(isinstance(m, dict) and m.get("role") in ROLES for m in messages)


def import_openai_chat(obj: Any, conversation_id: str) -> ImportResult:
    raw, envelope = unwrap(obj)
    errors: list[ImportIssue] = []
    warnings: list[ImportIssue] = []
    neutral: list[NeutralMessage] = []
    for index, message in enumerate(raw):
        where = f"{conversation_id}: message {index}"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            role = message.get("role") if isinstance(message, dict) else None
            warnings.append(ImportIssue(where, f"not a chat message (role {role!r}); skipped"))
            continue
        try:
            neutral.append(placed(read_message(message), index))
        except (TypeError, ValueError, AttributeError) as exc:
            errors.append(ImportIssue(where, f"unreadable {message['role']} message: {exc}; skipped"))
    return split_turns(conversation_id, neutral, model=opt_str(envelope.get("model")), errors=errors, warnings=warnings)


def read_message(message: dict[str, Any]) -> NeutralMessage:
    """One chat message as a neutral message."""
    role = message["role"]
    created = parse_time(message.get("created_at") or message.get("timestamp"))
    if role in ("system", "developer"):
        return NeutralMessage("system", message_content(message.get("content"))[0])
    if role == "user":
        text, media = message_content(message.get("content"))
        if is_file_follow_up(text, media):  # a tool's file sent on after its return: not a query
            return NeutralMessage("tool", created_at=created)
        return NeutralMessage("user", text, attachments=media, created_at=created)
    if role in ("tool", "function"):
        text, mcp_error = return_text(message.get("content"))
        failed = mcp_error or optional_bool(message, "is_error")
        call_id = opt_str(message.get("tool_call_id")) if role == "tool" else None
        name = opt_str(message.get("name")) or (None if role == "tool" else "function")
        result = NeutralToolResult(call_id, text, "failed" if failed else "success", name)
        return NeutralMessage("tool", tool_results=[observed(result, message.get("content"))], created_at=created)
    text = message_content(message.get("content"))[0]
    if not text.strip() and isinstance(message.get("refusal"), str):
        text = message["refusal"]
    calls = [_call(tc, i) for i, tc in enumerate(optional_list(message, "tool_calls"))]
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        calls.append(
            NeutralToolCall(None, str(legacy.get("name") or "function"), parse_arguments(legacy.get("arguments")))
        )
    return NeutralMessage("assistant", text, calls, model=opt_str(message.get("model")), created_at=created)


def _call(tool_call: Any, index: int) -> NeutralToolCall:
    if not isinstance(tool_call, dict):
        raise FieldError(f"tool_calls[{index}]", "a tool call object", tool_call)
    if isinstance(tool_call.get("custom"), dict):
        custom = tool_call["custom"]
        return NeutralToolCall(
            opt_str(tool_call.get("id")),
            str(custom.get("name") or "tool"),
            custom.get("input") if custom.get("input") is not None else {},
        )
    function = as_dict(tool_call.get("function"))
    name = function.get("name") or tool_call.get("name") or "tool"
    return NeutralToolCall(
        opt_str(tool_call.get("id")), str(name), parse_arguments(function.get("arguments", tool_call.get("arguments")))
    )
