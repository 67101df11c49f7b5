"""OpenAI Responses API items → stored turns.

Accepts a bare item list, or a response object ``{"instructions", "input": [...], "output": [...],
"model", "created_at"}`` (the input and output items in order). Items: ``message`` (``role`` user /
system / developer / assistant; content a string or ``input_text`` / ``output_text`` / ``refusal`` /
``input_image`` / ``input_file`` parts; ``type`` may be omitted on input messages), ``function_call`` /
``custom_tool_call`` and every other ``*_call`` item with a ``call_id``, answered by the
``*_call_output`` item of the same ``call_id`` (pairing is on ``call_id``, never ``id``), and hosted
tools that are call and return in one item (``web_search_call``, ``file_search_call``, ``mcp_call``,
``code_interpreter_call``, ``image_generation_call``, …).

Consecutive model-side items (assistant messages, calls, reasoning) are one assistant step. When an
assistant message says ``phase: "final_answer"``, only such messages are the reply text.
Failure marks, each keeping the error text as the return: a hosted call with ``status: "failed"``, an
``mcp_call`` with an ``error``, a ``*_call_output`` with ``status: "failed"`` (the Agents SDK writes it for a
rejected or failed ``apply_patch`` / shell call), and an output that is an MCP ``CallToolResult`` with
``isError: true`` (an object or a JSON string of one). A ``function_call_output`` has no failure field: the
error string an agent library sends instead ("An error occurred while running the tool…") is kept as it is.
An entry that is no Responses item, or an item type this reader does not read, is skipped (a warning).

Times: the response's ``created_at`` is its output items' produced time. An item's own ``created_at`` (the API's
items have none; the Agents SDK session connector writes the time its row was stored) is preferred: a
``*_call_output``'s observed time (an MCP result's ``_meta`` time first), a user message's time, and for a
model-side step the time of its first item that has one.
"""

from __future__ import annotations

from typing import Any

from estimator.corpus.turn import SourceMeta
from provenance_api.importers.common import (
    ImportIssue,
    ImportResult,
    NeutralMessage,
    NeutralToolCall,
    NeutralToolResult,
    as_dict,
    as_list,
    opt_str,
    parse_arguments,
    parse_time,
    placed,
    split_turns,
)
from provenance_api.importers.mcp import flatten_content, message_content, observed, return_text

FORMAT = "openai_responses"
_MESSAGE_ROLES = frozenset({"user", "system", "developer", "assistant"})
_SKIPPED = frozenset(
    {"reasoning", "item_reference", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response", "compaction"}
)
_CONTENT_KINDS = frozenset({"input_text", "output_text", "input_image", "input_file", "input_audio", "refusal"})


def looks_like(items: list[Any]) -> bool:
    """Typed items of the Responses API, or messages whose parts are ``input_*`` / ``output_*``."""
    for item in items:
        if not isinstance(item, dict):
            return False
        kind = item.get("type")
        if isinstance(kind, str) and (kind.endswith(("_call", "_call_output")) or kind in _SKIPPED):
            return True
        content = item.get("content")
        if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") in _CONTENT_KINDS for p in content):
            return True
    return False


def items_of(obj: Any) -> tuple[list[Any], dict[str, Any], int]:
    """The items in order, the envelope, and the index of the first output item."""
    if isinstance(obj, list):
        return obj, {}, 0
    if isinstance(obj, dict) and (isinstance(obj.get("input"), list) or isinstance(obj.get("output"), list)):
        given = as_list(obj.get("input"))
        return [*given, *as_list(obj.get("output"))], obj, len(given)
    raise ValueError("expected a list of Responses items or a response object with input/output items")


def import_openai_responses(obj: Any, conversation_id: str) -> ImportResult:
    items, envelope, first_output = items_of(obj)
    model = opt_str(envelope.get("model"))
    created = parse_time(envelope.get("created_at"))
    warnings: list[ImportIssue] = []
    neutral: list[NeutralMessage] = []
    step: NeutralMessage | None = None  # the assistant step being gathered
    own_time = False  # the step's time is one of its items' own
    finals: list[str] = []
    for index, item in enumerate(items):
        where = f"{conversation_id}: message {index}"
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(kind, str):
            warnings.append(ImportIssue(where, "not a Responses item; skipped"))
            continue
        if kind in _SKIPPED:
            continue
        at = parse_time(item.get("created_at"))
        model_side = (kind == "message" and item.get("role") == "assistant") or (
            kind.endswith("_call") and not kind.endswith("_call_output")
        )
        if model_side:
            if step is None:
                step, finals = placed(NeutralMessage("assistant", model=model), index), []
                step.created_at = at or (created if index >= first_output else None)
                own_time = at is not None
                neutral.append(step)
            elif at is not None and not own_time:  # the first of its items with a time of its own
                step.created_at, own_time = at, True
            _add_to_step(step, item, kind, finals)
            continue
        step = None
        if kind.endswith("_call_output"):
            text, mcp_error = return_text(item.get("output"))
            failed = mcp_error or item.get("status") == "failed"
            result = NeutralToolResult(opt_str(item.get("call_id")), text, "failed" if failed else "success")
            result = observed(result, item.get("output"), at)
            neutral.append(placed(NeutralMessage("tool", tool_results=[result], created_at=at), index))
        elif kind == "message" and item.get("role") in _MESSAGE_ROLES:
            text, media = message_content(item.get("content"))
            if item["role"] in ("system", "developer"):
                neutral.append(placed(NeutralMessage("system", text, created_at=at), index))
            else:
                neutral.append(placed(NeutralMessage("user", text, attachments=media, created_at=at), index))
        else:
            warnings.append(ImportIssue(where, f"item type {kind!r} not read; skipped"))
    instructions = envelope.get("instructions")
    system = message_content(instructions)[0] if instructions else None
    return split_turns(conversation_id, neutral, system, model=model, marks_failure=True, warnings=warnings)


def _add_to_step(step: NeutralMessage, item: dict[str, Any], kind: str, finals: list[str]) -> None:
    if kind == "message":
        text = message_content(item.get("content"))[0]
        if item.get("phase") == "final_answer":
            finals.append(text)
            step.text = "\n\n".join(t for t in finals if t)
        elif not finals and text.strip():
            step.text = "\n\n".join(t for t in (step.text, text) if t)
        return
    if item.get("call_id"):  # answered by a later *_call_output item
        custom = kind == "custom_tool_call"
        arguments = item.get("input") if custom else parse_arguments(item.get("arguments"))
        if arguments in ({}, None) and as_dict(item.get("action")):
            arguments = item["action"]
        name = str(item.get("name") or _tool_name(kind))
        step.tool_calls.append(NeutralToolCall(str(item["call_id"]), name, arguments))
        return
    call_id = str(item.get("id") or f"{kind}:{len(step.tool_calls)}")
    name, arguments, output = _hosted(item, kind)
    failed = item.get("status") == "failed" or bool(item.get("error")) or _mcp_error(item, kind)
    if item.get("error"):
        output = flatten_content(item["error"])
    server = opt_str(item.get("server_label")) if kind == "mcp_call" else None
    meta = SourceMeta(server=server) if server else None
    step.tool_calls.append(NeutralToolCall(call_id, name, arguments, meta=meta))
    result = NeutralToolResult(call_id, output, "failed" if failed else "success", name)
    step.tool_results.append(observed(result, item.get("output"), meta=meta))


def _hosted(item: dict[str, Any], kind: str) -> tuple[str, Any, str | None]:
    """Name, arguments and flattened output of a hosted tool item (call and return in one)."""
    if kind == "mcp_call":
        name = str(item.get("name") or "tool")
        label = opt_str(item.get("server_label"))
        text = return_text(item.get("output"))[0] if "output" in item else None
        return (f"{label}.{name}" if label else name), parse_arguments(item.get("arguments")), text
    if kind == "file_search_call":
        results = as_list(item.get("results"))
        texts = [str(r.get("text")) for r in results if isinstance(r, dict) and r.get("text")]
        return "file_search", {"queries": item.get("queries") or []}, "\n\n".join(texts) or None
    if kind == "code_interpreter_call":
        outputs = as_list(item.get("outputs"))
        logs = [str(o.get("logs")) for o in outputs if isinstance(o, dict) and o.get("logs")]
        named = [
            f"[image {o.get('url', '')} not inlined]".replace("  ", " ")
            for o in outputs
            if isinstance(o, dict) and o.get("type") == "image"
        ]
        return "code_interpreter", {"code": item.get("code")}, "\n".join(logs + named) or None
    if kind == "image_generation_call":
        return "image_generation", {}, "[generated image not inlined]" if item.get("result") else None
    action = as_dict(item.get("action"))
    sources = action.get("sources")
    output = flatten_content(sources) if sources else None
    if item.get("output") is not None:
        output = flatten_content(item.get("output"))
    return _tool_name(kind), action, output


def _mcp_error(item: dict[str, Any], kind: str) -> bool:
    """An ``mcp_call`` whose output is a ``CallToolResult`` saying ``isError: true``."""
    return kind == "mcp_call" and "output" in item and return_text(item.get("output"))[1]


def _tool_name(kind: str) -> str:
    return kind.removesuffix("_call") or "tool"
