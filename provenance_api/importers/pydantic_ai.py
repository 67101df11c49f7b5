"""pydantic-ai ``ModelMessage`` JSON (``all_messages_json()`` / ``ModelMessagesTypeAdapter``) → stored turns.

Requests carry ``system-prompt``, ``user-prompt``, ``tool-return`` and ``retry-prompt`` parts and an
``instructions`` string; responses carry ``text``, ``tool-call``, ``builtin-tool-call`` /
``builtin-tool-return`` parts, a ``model_name`` and a ``timestamp``. Raw dicts are read tolerantly: part kinds
this reader does not know are skipped, not rejected.

Failure marks: a ``tool-return`` whose ``outcome`` is not ``success`` (missing means success; ``failed``,
``denied``, ``retried`` — a tool's ``ModelRetry``), an MCP ``CallToolResult`` return with ``isError: true``,
and a ``retry-prompt`` naming a tool (the call was rejected); each keeps its text (the tool's error, the
denial, the retry prompt), the source of what the agent said and did next. A message that is no pydantic-ai
message is skipped (a warning). Structured output: a ``tool-call`` named ``final_result`` (or
``final_result_<Type>``) is the response, not a tool, and its return is dropped. A ``null`` tool return is the
return ``null``. The user part pydantic-ai sends after a tool returned a file (``["This is file <id>:",
<file>]``, the return saying ``See file <id>``) is the tool's, not a query.
"""

from __future__ import annotations

import json
from typing import Any

from provenance_api.importers.common import (
    ImportIssue,
    ImportResult,
    NeutralMessage,
    NeutralToolCall,
    NeutralToolResult,
    is_file_follow_up,
    opt_str,
    parse_arguments,
    parse_time,
    placed,
    split_turns,
    unwrap,
)
from provenance_api.importers.mcp import message_content, observed, return_text

FORMAT = "pydantic_ai"
_CALL_KINDS = frozenset({"tool-call", "builtin-tool-call"})
_RETURN_KINDS = frozenset({"tool-return", "builtin-tool-return"})


def looks_like(messages: list[Any]) -> bool:
    return bool(messages) and all(
        isinstance(m, dict) and m.get("kind") in ("request", "response") and isinstance(m.get("parts"), list)
        for m in messages
    )


def is_final_result(name: Any) -> bool:
    return isinstance(name, str) and (name == "final_result" or name.startswith("final_result_"))


def import_pydantic_ai(obj: Any, conversation_id: str) -> ImportResult:
    raw, envelope = unwrap(obj, ("messages", "model_messages", "all_messages"))
    warnings: list[ImportIssue] = []
    neutral: list[NeutralMessage] = []
    final_ids: set[str] = set()
    for index, message in enumerate(raw):
        where = f"{conversation_id}: message {index}"
        if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
            warnings.append(ImportIssue(where, "not a pydantic-ai message (no parts list); skipped"))
            continue
        parts = [p for p in message["parts"] if isinstance(p, dict)]
        if message.get("kind") == "response":
            neutral.append(placed(_response(parts, message, final_ids), index))
        elif message.get("kind") == "request":
            neutral.extend(placed(m, index) for m in _request(parts, message, final_ids))
        else:
            warnings.append(ImportIssue(where, f"unknown message kind {message.get('kind')!r}; skipped"))
    return split_turns(
        conversation_id, neutral, model=opt_str(envelope.get("model")), marks_failure=True, warnings=warnings
    )


def _request(parts: list[dict[str, Any]], message: dict[str, Any], final_ids: set[str]) -> list[NeutralMessage]:
    out: list[NeutralMessage] = []
    results: list[NeutralToolResult] = []
    texts: list[str] = []
    attachments: list[str] = []
    for part in parts:
        kind = part.get("part_kind")
        if kind == "system-prompt" and isinstance(part.get("content"), str):
            out.append(NeutralMessage("system", part["content"]))
        elif kind == "user-prompt" and _is_file_follow_up(part.get("content")):
            continue  # a tool's file, sent on after its return ("See file …"): the tool's, not a query
        elif kind == "user-prompt":
            text, media = _user_content(part.get("content"))
            texts.append(text)
            attachments.extend(media)
        elif kind == "tool-return" and part.get("tool_call_id") not in final_ids:
            results.append(_tool_return(part))
        elif kind == "retry-prompt" and part.get("tool_name"):
            # A retry prompt naming a tool answers that call: the call was rejected, and its text is what the
            # agent was told (a tool error).
            result = NeutralToolResult(
                opt_str(part.get("tool_call_id")),
                _retry_text(part.get("content")),
                "failed",
                opt_str(part.get("tool_name")),
            )
            results.append(observed(result, None, parse_time(part.get("timestamp"))))
    instructions = message.get("instructions") if isinstance(message.get("instructions"), str) else None
    created = parse_time(message.get("timestamp")) or next(
        (parse_time(p.get("timestamp")) for p in parts if p.get("timestamp")), None
    )
    if results:
        out.append(NeutralMessage("tool", tool_results=results, instructions=instructions))
        instructions = None
    text = "\n".join(t for t in texts if t)
    if text or attachments or instructions is not None:
        out.append(NeutralMessage("user", text, attachments=attachments, instructions=instructions, created_at=created))
    return out


def _tool_return(part: dict[str, Any]) -> NeutralToolResult:
    """A tool's return part (a request's, or a built-in tool's in a response): its text, its outcome — an MCP
    error result is a failed one — and when the history recorded it."""
    text, mcp_error = return_text(part.get("content"))
    outcome = str(part.get("outcome") or "success")
    result = NeutralToolResult(
        opt_str(part.get("tool_call_id")),
        text,
        "failed" if mcp_error and outcome == "success" else outcome,
        opt_str(part.get("tool_name")),
    )
    return observed(result, part.get("content"), parse_time(part.get("timestamp")))


def _response(parts: list[dict[str, Any]], message: dict[str, Any], final_ids: set[str]) -> NeutralMessage:
    texts: list[str] = []
    calls: list[NeutralToolCall] = []
    results: list[NeutralToolResult] = []
    final = False
    for part in parts:
        kind = part.get("part_kind")
        if kind == "text" and isinstance(part.get("content"), str):
            texts.append(part["content"])
        elif kind in _CALL_KINDS and is_final_result(part.get("tool_name")):
            final = True
            if part.get("tool_call_id"):
                final_ids.add(str(part["tool_call_id"]))
            texts.append(_structured_text(part.get("args")))
        elif kind in _CALL_KINDS:
            name = str(part.get("tool_name") or "tool")
            call_id = opt_str(part.get("tool_call_id"))
            calls.append(NeutralToolCall(call_id, name, parse_arguments(part.get("args"))))
        elif kind in _RETURN_KINDS:
            results.append(_tool_return(part))
    return NeutralMessage(
        "assistant",
        "\n\n".join(t for t in texts if t.strip()),
        calls,
        results,
        model=opt_str(message.get("model_name")),
        created_at=parse_time(message.get("timestamp")),
        final=final,
    )


def _is_file_follow_up(content: Any) -> bool:
    """The user part pydantic-ai adds after a tool returned a file: ``["This is file <id>:", <file>, …]``."""
    return isinstance(content, list) and is_file_follow_up(*_user_content(content))


def _user_content(content: Any) -> tuple[str, list[str]]:
    """A user prompt: a string, or a list of strings and media parts (``image-url``, ``binary``, …)."""
    if not isinstance(content, list):
        return message_content(content)
    texts: list[str] = []
    media: list[str] = []
    for item in content:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, dict) and item.get("kind") == "text" and isinstance(item.get("content"), str):
            texts.append(item["content"])
        elif isinstance(item, dict):
            kind = str(item.get("kind") or item.get("type") or "file").removesuffix("-url")
            label = item.get("url") or item.get("identifier") or item.get("filename")
            mime = item.get("media_type")
            label_text = f" {label}" if label and not str(label).startswith("data:") else ""
            media.append(f"{kind}{label_text}" + (f" ({mime})" if mime else ""))
    return "\n".join(texts), media


def _structured_text(args: Any) -> str:
    parsed = parse_arguments(args)
    return parsed if isinstance(parsed, str) else json.dumps(parsed, ensure_ascii=False, indent=2)


def _retry_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, default=str)
