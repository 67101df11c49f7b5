"""Anthropic Messages (``{"system", "messages", "model"}`` or a bare message list) → stored turns.

Content is a string or a list of blocks: ``text``, ``image`` / ``document`` (named as attachments),
``tool_use`` / ``server_tool_use`` / ``mcp_tool_use`` (calls; ``input`` is an object),
``tool_result`` / ``mcp_tool_result`` (``tool_use_id``, content a string or blocks, ``is_error``) and
the server-tool results in the same assistant message (``web_search_tool_result``,
``web_fetch_tool_result``, ``code_execution_tool_result``, … — any ``*_tool_result``). ``thinking``
blocks are not context for provenance and are skipped. A reply's adjacent text blocks are one text, joined as
the model produced them (a streamed or cited answer comes as many blocks: ``"4"``, ``"."``, ``"5"`` is ``4.5``);
texts that a call or a result separates are paragraphs.

A lone response object (``{"type": "message", "role": "assistant", "content", "model"}``) is a
conversation of one reply, with no query. A user message that only carries tool results is not a query.
Failure marks: ``is_error: true`` (any type but a boolean rejects the message, naming the block), an MCP
``CallToolResult`` content with ``isError: true``, and a server-tool result whose content is a
``*_tool_result_error`` object (its ``error_code`` is the error text). A failed result keeps its text. An entry
that is no user or assistant message is skipped (a warning); a message of the wrong shape is rejected (an
error). A ``null`` tool-result content is
the return ``null``. The top-level ``system`` (string or text blocks) is the instructions layer.
"""

from __future__ import annotations

from typing import Any

from estimator.corpus.turn import SourceMeta
from provenance_api.importers.common import (
    FieldError,
    ImportIssue,
    ImportResult,
    NeutralMessage,
    NeutralToolCall,
    NeutralToolResult,
    opt_str,
    optional_bool,
    parse_arguments,
    parse_time,
    placed,
    split_turns,
    unwrap,
)
from provenance_api.importers.mcp import flatten_content, media_name, message_content, observed, return_text

FORMAT = "anthropic"
_CALLS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_MEDIA = frozenset({"image", "document", "container_upload"})
_SKIPPED = frozenset({"thinking", "redacted_thinking"})
_ANTHROPIC_BLOCKS = _CALLS | {"tool_result"} | _SKIPPED


def looks_like(obj: Any, messages: list[Any]) -> bool:
    """A ``system`` beside ``messages``, or messages with Anthropic blocks (tool_use, *_tool_result, …)."""
    if isinstance(obj, dict) and "system" in obj and "messages" in obj:
        return True
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict)
            and isinstance(b.get("type"), str)
            and (
                b["type"] in _ANTHROPIC_BLOCKS
                or b["type"].endswith("_tool_result")
                or (b["type"] in _MEDIA and isinstance(b.get("source"), dict))
            )
            for b in content
        ):
            return True
    return False


def is_lone_message(obj: Any) -> bool:
    """One Messages API response object (``{"type": "message", "role": "assistant", "content": [...]}``)."""
    return (
        isinstance(obj, dict)
        and obj.get("type") == "message"
        and obj.get("role") == "assistant"
        and isinstance(obj.get("content"), list)
        and "messages" not in obj
    )


def import_anthropic(obj: Any, conversation_id: str) -> ImportResult:
    raw, envelope = ([obj], obj) if is_lone_message(obj) else unwrap(obj, ("messages",))
    model = opt_str(envelope.get("model"))
    errors: list[ImportIssue] = []
    warnings: list[ImportIssue] = []
    neutral: list[NeutralMessage] = []
    for index, message in enumerate(raw):
        where = f"{conversation_id}: message {index}"
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            warnings.append(ImportIssue(where, "not a user or assistant message; skipped"))
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            errors.append(ImportIssue(where, "content is neither a string nor a block list; skipped"))
            continue
        try:
            neutral.append(placed(_message(message, blocks), index))
        except ValueError as exc:
            errors.append(ImportIssue(where, f"{message['role']} message rejected: {exc}"))
    system = message_content(envelope.get("system"))[0] if envelope.get("system") else None
    return split_turns(
        conversation_id, neutral, system, model=model, marks_failure=True, errors=errors, warnings=warnings
    )


def _message(message: dict[str, Any], blocks: list[Any]) -> NeutralMessage:
    texts: list[str] = []
    runs: list[list[str]] = [[]]  # the reply's text: adjacent text blocks are one text the model streamed
    media: list[str] = []
    calls: list[NeutralToolCall] = []
    results: list[NeutralToolResult] = []
    for position, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        kind = str(block.get("type"))
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
            runs[-1].append(block["text"])
            continue
        if kind not in _SKIPPED and runs[-1]:
            runs.append([])  # a call, a result or a document between texts: a new text
        if kind in _MEDIA:
            text = message_content([block])[0] if kind == "document" else ""
            if text:
                texts.append(text)
                runs[-1].append(text)
                runs.append([])
            else:
                media.append(media_name(block))
        elif kind in _CALLS:
            name = str(block.get("name") or "tool")
            server = opt_str(block.get("server_name"))
            calls.append(
                NeutralToolCall(
                    opt_str(block.get("id")),
                    f"{server}.{name}" if server else name,
                    parse_arguments(block.get("input")),
                    meta=SourceMeta(server=server) if server else None,
                )
            )
        elif kind == "tool_result" or kind.endswith("_tool_result"):
            try:
                results.append(_result(block, kind))
            except FieldError as exc:
                raise exc.within(f"content[{position}]") from None
    created = parse_time(message.get("created_at") or message.get("timestamp"))
    if message["role"] == "user":
        return NeutralMessage("user", "\n".join(texts), calls, results, attachments=media, created_at=created)
    return NeutralMessage(
        "assistant",
        "\n\n".join(text for text in ("".join(run) for run in runs) if text),
        calls,
        results,
        model=opt_str(message.get("model")),
        created_at=created,
    )


def _result(block: dict[str, Any], kind: str) -> NeutralToolResult:
    content = block.get("content")
    call_id = opt_str(block.get("tool_use_id"))
    if kind in ("tool_result", "mcp_tool_result"):
        failed = optional_bool(block, "is_error")
        # A ``null`` content is the return null; an absent one is an empty result (the API allows it).
        text, mcp_error = return_text(content) if "content" in block else ("", False)
        failed = failed or mcp_error
        return observed(NeutralToolResult(call_id, text, "failed" if failed else "success"), content)
    # A server-tool result: an error object, or a result (list of search results, fetched document, …).
    if isinstance(content, dict) and str(content.get("type", "")).endswith("_error"):
        return NeutralToolResult(call_id, str(content.get("error_code") or content.get("type")), "failed")
    return NeutralToolResult(call_id, _server_text(content))


def _server_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n\n".join(_server_text(item) for item in content if item is not None)
    if not isinstance(content, dict):
        return flatten_content(content)
    kind = str(content.get("type", ""))
    if kind == "web_search_result":  # the page text is encrypted; the title and address are what is known
        return " · ".join(str(content[k]) for k in ("title", "url") if content.get(k))
    if kind == "web_fetch_result":
        document = content.get("content")
        body = message_content([document])[0] if isinstance(document, dict) else flatten_content(document)
        return "\n".join(t for t in (str(content.get("url") or ""), body) if t)
    if kind.endswith("code_execution_result"):
        streams = [str(content[k]) for k in ("stdout", "stderr") if content.get(k)]
        return "\n".join(streams) or f"return code {content.get('return_code')}"
    return flatten_content(content)
