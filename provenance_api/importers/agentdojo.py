"""AgentDojo runs (the JSON its ``TraceLogger`` writes for one task, or a bare list of its messages) → stored turns.

A run is an object with ``messages`` and the run's own fields (``suite_name``, ``pipeline_name``, ``user_task_id``,
``injection_task_id``, ``attack_type``, ``injections``, ``utility``, ``security``, ``duration``, ``error``,
``agentdojo_package_version``, ``benchmark_version``, …; logs other tools write in the same shape add more, such as
``evaluation``). Those fields are kept on every turn as ``StoredTurn.metadata``, as written, except the ones that
only repeat the messages (``messages``, ``trace``: the calls again, ``final_answer``: the reply again);
``pipeline_name`` (the agent AgentDojo ran) is also the turn's ``agent``.

Messages: ``system`` / ``user`` / ``assistant`` / ``tool``, each ``content`` a string, ``null`` or a list of blocks
(``{"type": "text", "content": …}``; ``thinking`` and ``redacted_thinking`` blocks are left out, as in every format).
An assistant's ``tool_calls`` are ``{"function", "args", "id", "placeholder_args"}``: ``args`` is an object (a JSON
string of one is read; any other text is kept as it is, with a warning); an empty or ``null`` ``id`` pairs the
call with its return by tool name, in the order the calls were made. A tool message answers ``tool_call_id`` (else
the ``id`` of the ``tool_call`` it repeats) and carries ``error``: ``null``, or the error text the agent was shown
instead of the content, which marks the call failed (a source of kind ``tool_error``). A message of the wrong shape
is rejected (an error naming its index and field); an entry that is no AgentDojo message is skipped (a warning).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from provenance_api.importers.common import (
    FieldError,
    ImportIssue,
    ImportResult,
    NeutralMessage,
    NeutralToolCall,
    NeutralToolResult,
    Role,
    opt_str,
    optional_list,
    parse_arguments,
    placed,
    split_turns,
    unwrap,
)
from provenance_api.importers.mcp import return_text

FORMAT = "agentdojo"
_ROLES: dict[str, Role] = {"system": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
_RUN_FIELDS = ("suite_name", "user_task_id", "pipeline_name", "injection_task_id", "attack_type")
_REPEATS = frozenset({"messages", "trace", "final_answer"})  # run fields that only repeat the messages
_UNREAD_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def looks_like(obj: Any, messages: list[Any]) -> bool:
    """An AgentDojo run or message list: chat roles only, and something only AgentDojo writes — a call as
    ``{"function": name, "args": …}``, a tool message repeating its ``tool_call``, a ``{"type": "text", "content"}``
    block, or the run's own fields around the messages."""
    if not messages or not all(isinstance(m, dict) and m.get("role") in _ROLES for m in messages):
        return False
    if isinstance(obj, dict) and sum(key in obj for key in _RUN_FIELDS) >= 2:
        return True
    return any(_agentdojo_only(m) for m in messages)


def _agentdojo_only(message: dict[str, Any]) -> bool:
    if message.get("role") == "tool" and isinstance(message.get("tool_call"), dict) and "error" in message:
        return True
    calls = message.get("tool_calls")
    if isinstance(calls, list) and any(isinstance(c, dict) and isinstance(c.get("function"), str) for c in calls):
        return True
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("content"), str) for b in content
    )


def import_agentdojo(obj: Any, conversation_id: str) -> ImportResult:
    raw, envelope = unwrap(obj, ("messages",))
    errors: list[ImportIssue] = []
    warnings: list[ImportIssue] = []
    neutral: list[NeutralMessage] = []
    repeats: list[tuple[str | None, Any]] = []  # per message: the call a tool message repeats (tool, arguments)
    for index, message in enumerate(raw):
        where = f"{conversation_id}: message {index}"
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            role = message.get("role") if isinstance(message, dict) else None
            warnings.append(ImportIssue(where, f"not an AgentDojo message (role {role!r}); skipped"))
            continue
        try:
            read, cautions = _message(message)
        except (TypeError, ValueError) as exc:
            errors.append(ImportIssue(where, f"{message['role']} message rejected: {exc}"))
            continue
        neutral.append(placed(read, index))
        repeated = message.get("tool_call") if read.role == "tool" else None
        repeats.append((repeated.get("function"), repeated.get("args")) if isinstance(repeated, dict) else (None, None))
        warnings.extend(ImportIssue(where, caution) for caution in cautions)
    _tell_shared_ids_apart(conversation_id, neutral, repeats, warnings)
    metadata = {k: v for k, v in envelope.items() if k not in _REPEATS}
    return split_turns(
        conversation_id,
        neutral,
        model=opt_str(envelope.get("model")),
        agent=opt_str(envelope.get("pipeline_name")),
        marks_failure=True,
        errors=errors,
        warnings=warnings,
        metadata=metadata,
    )


def _message(message: dict[str, Any]) -> tuple[NeutralMessage, list[str]]:
    """One message as a neutral message, and what of it was read only in part."""
    role = _ROLES[message["role"]]
    text, cautions = _content(message.get("content"))
    if role == "tool":
        return _tool_message(message, text), cautions
    if role != "assistant":
        return NeutralMessage(role, text), cautions
    calls: list[NeutralToolCall] = []
    for i, call in enumerate(optional_list(message, "tool_calls")):
        read, caution = _call(call, f"tool_calls[{i}]")
        calls.append(read)
        if caution:
            cautions.append(caution)
    return NeutralMessage("assistant", text, calls), cautions


def _content(content: Any) -> tuple[str, list[str]]:
    """A message's text: a string, ``null`` or AgentDojo's content blocks."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise FieldError("content", "a string, null or a list of content blocks", content)
    texts: list[str] = []
    cautions: list[str] = []
    for i, block in enumerate(content):
        if isinstance(block, str):
            texts.append(block)
            continue
        if not isinstance(block, dict):
            raise FieldError(f"content[{i}]", "a content block object", block)
        kind = block.get("type")
        if kind in _UNREAD_BLOCKS:
            continue
        value = block.get("content", block.get("text"))
        if kind == "text" and (value is None or isinstance(value, str)):
            texts.append(value or "")
        elif kind == "text":
            raise FieldError(f"content[{i}].content", "a string", value)
        else:
            cautions.append(f"content[{i}]: a block of type {kind!r} is not read; passed over")
    return "\n".join(texts), cautions


def _call(call: Any, path: str) -> tuple[NeutralToolCall, str | None]:
    """One ``FunctionCall`` (``{"function", "args", "id"}``) and, when its ``args`` are no object, what was kept."""
    if not isinstance(call, dict):
        raise FieldError(path, "a tool call object", call)
    name = call.get("function")
    if not isinstance(name, str) or not name.strip():
        raise FieldError(f"{path}.function", "the tool's name", name)
    raw = call.get("args")
    arguments = parse_arguments(raw)
    caution = None
    if not isinstance(arguments, dict):
        shown = repr(raw) if len(repr(raw)) <= 60 else repr(raw)[:57] + "..."
        what = "text that is not JSON" if isinstance(raw, str) else f"a JSON {type(arguments).__name__}"
        caution = f"{path}.args: expected an object of arguments, got {what} ({shown}); kept as it is"
    return NeutralToolCall(opt_str(call.get("id")), name, arguments), caution


def _tool_message(message: dict[str, Any], text: str) -> NeutralMessage:
    """A return; ``error`` (not null) is what the agent was shown instead of the content: a failed call."""
    repeated = message.get("tool_call")
    if repeated is not None and not isinstance(repeated, dict):
        raise FieldError("tool_call", "the tool call object it answers", repeated)
    repeated = repeated or {}
    error = message.get("error")
    if error is not None and not isinstance(error, str):
        raise FieldError("error", "null or the error text", error)
    call_id = opt_str(message.get("tool_call_id")) or opt_str(repeated.get("id"))
    name = opt_str(repeated.get("function"))
    if error:  # as AgentDojo's own model clients read it: an empty error is none
        return NeutralMessage("tool", tool_results=[NeutralToolResult(call_id, error, "failed", name)])
    content, mcp_error = return_text(text)
    return NeutralMessage(
        "tool", tool_results=[NeutralToolResult(call_id, content, "failed" if mcp_error else "success", name)]
    )


def _tell_shared_ids_apart(
    conversation_id: str,
    messages: list[NeutralMessage],
    repeats: list[tuple[str | None, Any]],
    warnings: list[ImportIssue],
) -> None:
    """Calls that share an id while unanswered (a model that numbers its calls per reply, a writer that copies one
    id) get ids of their own — the first keeps it, the next are ``<id>#2``, ``<id>#3`` … (a warning) — and each
    return the id of the call it repeats (its ``tool_call``: same tool and arguments), else of the first still
    unanswered. Other formats can only guess which return answers which such call; an AgentDojo return names it."""
    pending: dict[str, list[tuple[str, str, Any]]] = {}  # id as written → (own id, tool, arguments), unanswered
    issued: dict[str, int] = {}
    for message, (tool, arguments) in zip(messages, repeats, strict=True):
        calls = []
        for call in message.tool_calls:
            if call.id is None:
                calls.append(call)
                continue
            own = call.id
            if pending.get(call.id):
                issued[call.id] = issued.get(call.id, 1) + 1
                own = f"{call.id}#{issued[call.id]}"
                warnings.append(
                    ImportIssue(
                        f"{conversation_id}: message {message.origin}",
                        f"call id {call.id!r} ({call.name}) is also the id of an earlier call still unanswered; this "
                        f"call is named {own!r}, and each return is paired with the call it repeats",
                    )
                )
            pending.setdefault(call.id, []).append((own, call.name, call.arguments))
            calls.append(replace(call, id=own))
        message.tool_calls = calls
        results = []
        for result in message.tool_results:
            waiting = pending.get(result.call_id or "")
            if not waiting:
                results.append(result)
                continue
            match = next((w for w in waiting if (w[1], w[2]) == (tool, arguments)), waiting[0])
            waiting.remove(match)
            results.append(replace(result, call_id=match[0]))
        message.tool_results = results
