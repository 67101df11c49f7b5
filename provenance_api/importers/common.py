"""The neutral intermediate every importer produces, and the one rule that splits it into stored turns.

Each format module reads its own shape into a list of :class:`NeutralMessage` and calls
:func:`split_turns`; the turn-splitting rule (issue 5 §2) lives here and nowhere else:

* one stored turn per assistant *reply* — an assistant message with text whose tool calls (if any)
  were all answered inside the message itself, or that a format marks as final;
* its query is the last *real* user message before it (a user message carrying only tool results
  is not a query); its tool calls are those made between that message and the reply;
* everything before the query is the history, as OpenAI-chat-shaped messages ending with the query;
* text the agent sent with its calls before the reply is its interim reply: a text part of the turn's own
  messages (``model_messages``, the pydantic-ai shape) and, like every message, history for later turns;
* calls pair with returns by id only (by name, in the order made, where a format has no ids); a reused id pairs
  with the most recent still-unanswered call of that id, never overwriting an earlier one;
* calls after the last reply (the agent stopped, or the log was written before it answered) are one more turn,
  an *unfinished* one: its query and calls as above, its response empty (``""``) — its actions are what can be
  traced, and every text the agent sent with them is interim;
* a turn's id is ``<conversation id>:<content key>`` (:func:`turn_key`, from its query, reply and calls, never
  from its place in the list), so a history that was trimmed or summarised (LangGraph's ``RemoveMessage``)
  gives its kept turns the ids they had; the second turn of the same content in a conversation is ``.2``. An
  unfinished turn whose reply arrives later is another turn: the grown log's finished turn has the reply (and
  maybe more calls) in its key, so a re-import stores it under a new id, and the unfinished turn stays stored as
  it was (``DELETE /v1/turns/{id}`` removes it, with its traces).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from estimator.corpus.turn import SourceMeta, StoredTurn

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ImportIssue:
    """Something of the input that was not imported as it stands, with where it is and why."""

    where: str
    reason: str


@dataclass(frozen=True)
class ImportResult:
    """Turns of one conversation. ``errors`` (rejections) never means the turns are unusable, only that something
    in the input could not be read and was left out; ``warnings``: read, but not in full or not as written (an
    image named instead of inlined, a part of unknown kind passed over) — the turns are stored and the import
    succeeds; ``notes`` are readable content that is no turn."""

    turns: list[StoredTurn]
    errors: list[ImportIssue] = field(default_factory=list)
    notes: list[ImportIssue] = field(default_factory=list)
    warnings: list[ImportIssue] = field(default_factory=list)


@dataclass(frozen=True)
class NeutralToolCall:
    id: str | None
    name: str
    arguments: Any = None
    failure: str | None = None  # marked failed before any return (LangChain invalid_tool_calls)
    at: datetime | None = None  # when the call was made, where the format records it per call
    meta: SourceMeta | None = None  # the server it was sent to (an MCP connector's), where the format names it


@dataclass(frozen=True)
class NeutralToolResult:
    """A tool return; ``content`` is already flattened to text. ``outcome`` is "success" unless the format
    marks this return as failed (then "failed", or pydantic-ai's own "denied" / "interrupted")."""

    call_id: str | None
    content: str | None
    outcome: str = "success"
    name: str | None = None
    at: datetime | None = None  # when the return came back, where the format records it per return
    meta: SourceMeta | None = None  # where it came from (MCP server, resource, principal …), as recorded

    def provenance(self) -> dict[str, Any]:
        """What the stored turn keeps of its provenance: a ``provenance`` object when any was recorded."""
        return {"provenance": self.meta.model_dump(mode="json")} if self.meta is not None else {}

    @property
    def failed(self) -> bool:
        return self.outcome != "success"


@dataclass
class NeutralMessage:
    role: Role
    text: str = ""
    tool_calls: list[NeutralToolCall] = field(default_factory=list)
    tool_results: list[NeutralToolResult] = field(default_factory=list)
    attachments: list[str] = field(default_factory=list)
    model: str | None = None
    created_at: datetime | None = None
    final: bool = False  # a reply even though it carries calls (pydantic-ai structured output)
    instructions: str | None = None  # instructions in force from this message on (pydantic-ai requests)
    origin: int = -1  # index of the input message it was read from, for error locations


class FieldError(ValueError):
    """A field of one message has the wrong type; the message names the field and what was expected."""

    def __init__(self, path: str, expected: str, value: Any) -> None:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        super().__init__(f"{path}: expected {expected}, got {type(value).__name__} {shown}")
        self.path, self.expected, self.value = path, expected, value

    def within(self, prefix: str) -> FieldError:
        """The same error, its field named from an enclosing object (``content[0]`` + ``is_error``)."""
        return FieldError(f"{prefix}.{self.path}", self.expected, self.value)


def optional_list(container: dict[str, Any], key: str) -> list[Any]:
    """``container[key]`` as a list: absent or null is empty, any other type is a :class:`FieldError`."""
    value = container.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise FieldError(key, "a list", value)
    return value


def optional_bool(container: dict[str, Any], key: str) -> bool:
    """``container[key]`` as a flag: absent or null is false, any type but a JSON boolean is a :class:`FieldError`."""
    value = container.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise FieldError(key, "true or false", value)
    return value


def placed(message: NeutralMessage, index: int) -> NeutralMessage:
    """The message, marked as read from input message ``index``."""
    message.origin = index
    return message


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def opt_str(value: Any) -> str | None:
    """A non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def parse_arguments(raw: Any) -> Any:
    """Arguments as a parsed object; a JSON string is parsed, text that is not JSON is kept raw."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def arguments_json(arguments: Any) -> str:
    """Arguments as the JSON string an OpenAI-chat tool call carries (raw text stays raw)."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, default=str)


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 string or a Unix time (seconds, milli-, micro- or nanoseconds) as an aware datetime."""
    if isinstance(value, str) and value.strip():
        text = value.strip()
        if text.isdigit():
            return parse_time(int(text))
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        seconds = float(value)
        while seconds > 1e11:  # milli/micro/nanoseconds since the epoch
            seconds /= 1000.0
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def unwrap(
    obj: Any, keys: Sequence[str] = ("messages", "traj", "trajectory", "conversation", "history")
) -> tuple[list[Any], dict[str, Any]]:
    """The message list of a conversation given bare or inside an envelope object, and the envelope."""
    if isinstance(obj, list):
        return obj, {}
    if isinstance(obj, dict):
        for key in keys:
            if isinstance(obj.get(key), list):
                return obj[key], obj
    raise ValueError("expected a list of messages or an object holding one")


_FILE_FOLLOW_UP = re.compile(r"This is file \S+:")


def is_file_follow_up(text: str, media: Sequence[object]) -> bool:
    """The user message pydantic-ai sends after a tool returned a file (the return says ``See file <id>``):
    ``This is file <id>:`` lines and the files. It is the tool's output, not a query."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return bool(media) and bool(lines) and all(_FILE_FOLLOW_UP.fullmatch(line) for line in lines)


def is_query(message: NeutralMessage) -> bool:
    return message.role == "user" and bool(message.text.strip() or message.attachments)


def query_text(message: NeutralMessage) -> str:
    """A query's text; a query of attachments alone is named by them."""
    return message.text if message.text.strip() else f"[attached: {', '.join(message.attachments)}]"


def is_reply(message: NeutralMessage) -> bool:
    if message.role != "assistant" or not message.text.strip():
        return False
    if message.final:
        return True
    inline = {r.call_id for r in message.tool_results}
    return all(c.failure is not None or (c.id is not None and c.id in inline) for c in message.tool_calls)


KEY_DIGITS = 12
"""Hex digits of a turn's content key in its id: a turn id is ``<conversation id>:<12 hex>[.<n>]``."""


def turn_key(turn: StoredTurn) -> str:
    """What a turn is, whatever history preceded it: the SHA-256 of its query, attachments, reply and the
    calls it made (name, arguments, return). Its history, instructions, model and time are left out, so a
    turn keeps its key when earlier messages are trimmed or summarised away. Computed from the stored
    turn, so turns stored under the positional ids of earlier versions are recognised by it too."""
    calls = [[c.name, c.arguments, c.response] for c in turn.response_payload.tool_calls]
    body = json.dumps(
        [turn.query, list(turn.attachments), turn.response, calls],
        ensure_ascii=False,
        separators=(",", ":"),
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def content_ids(conversation_id: str, turns: Sequence[StoredTurn]) -> list[StoredTurn]:
    """The turns with their content ids: ``<conversation id>:<key>``, ``.2``, ``.3`` … for repeats of the same
    content (the same question answered the same way twice) in one conversation."""
    seen: dict[str, int] = {}
    out: list[StoredTurn] = []
    for turn in turns:
        key = turn_key(turn)[:KEY_DIGITS]
        seen[key] = seen.get(key, 0) + 1
        ident = f"{conversation_id}:{key}" + (f".{seen[key]}" if seen[key] > 1 else "")
        out.append(turn.model_copy(update={"turn_id": ident}))
    return out


@dataclass
class _Pair:
    """One call and, once seen, the return that answers it (and the index of the message carrying it)."""

    call: NeutralToolCall
    call_id: str
    result: NeutralToolResult | None = None
    result_at: int = -1

    def failure_by(self, index: int) -> str | None:
        """The format's failure mark as seen by the reply at ``index`` (None: not failed)."""
        if self.call.failure:
            return self.call.failure
        if self.result is not None and self.result_at <= index and self.result.failed:
            return self.result.outcome
        return None


def _pair(
    conversation_id: str, messages: Sequence[NeutralMessage], warnings: list[ImportIssue]
) -> tuple[list[list[_Pair]], list[list[_Pair | None]]]:
    """Per message: its calls, and for each of its returns the call it answers (None: no such call).

    Calls pair with returns by id (by name where the format has no ids); a return answers the most
    recent still-unanswered call of its id, so a reused id never overwrites an earlier call. Calls without an id
    are answered in the order they were made: the first unanswered call of the return's tool name. An id given to
    a second call while an earlier call of that id is still unanswered is a warning: which call each return
    answers is then a guess (the most recent one)."""
    pending: dict[tuple[str, str], list[_Pair]] = {}
    calls: list[list[_Pair]] = []
    answers: list[list[_Pair | None]] = []
    for index, message in enumerate(messages):
        where = message.origin if message.origin >= 0 else index
        mine: list[_Pair] = []
        for call in message.tool_calls:
            key = ("id", call.id) if call.id is not None else ("name", call.name)
            pair = _Pair(call, call.id if call.id is not None else f"function:{call.name}")
            if key[0] == "id" and pending.get(key):
                warnings.append(
                    ImportIssue(
                        f"{conversation_id}: message {where}",
                        f"call id {call.id!r} ({call.name}) is reused while an earlier call of that id is still "
                        "unanswered; its next return is paired with this, the most recent call",
                    )
                )
            pending.setdefault(key, []).append(pair)
            mine.append(pair)
        calls.append(mine)
        got: list[_Pair | None] = []
        for result in message.tool_results:
            key = ("id", result.call_id) if result.call_id is not None else ("name", result.name or "")
            stack = pending.get(key)
            if stack:
                pair = stack.pop() if key[0] == "id" else stack.pop(0)
                pair.result, pair.result_at = result, index
                got.append(pair)
            else:
                got.append(None)
                warnings.append(
                    ImportIssue(
                        f"{conversation_id}: message {where}",
                        f"tool return for {key[0]} {key[1]!r} answers no earlier call; kept in the history only",
                    )
                )
        answers.append(got)
    return calls, answers


def _chat(message: NeutralMessage, calls: list[_Pair], answers: list[_Pair | None]) -> list[dict[str, Any]]:
    """One neutral message as OpenAI-chat messages. A failed return is kept with its error text and marked
    ``is_error: true`` (the chat format has no failure flag of its own): the corpus reads it as a tool error."""
    returns: list[dict[str, Any]] = []
    for result, pair in zip(message.tool_results, answers, strict=True):
        failed = result.failed or (pair is not None and pair.call.failure is not None)
        returns.append(
            {
                "role": "tool",
                "tool_call_id": pair.call_id if pair else result.call_id,
                "name": pair.call.name if pair else result.name,
                "content": result.content,
                **({"is_error": True} if failed else {}),
                **recorded_at(result.at or message.created_at),
            }
        )
    if message.role != "assistant":
        if is_query(message):
            returns.append({"role": "user", "content": query_text(message), **recorded_at(message.created_at)})
        return returns
    item: dict[str, Any] = {"role": "assistant", "content": message.text or None, **recorded_at(message.created_at)}
    if calls:
        item["tool_calls"] = [
            {
                "id": p.call_id,
                "type": "function",
                "function": {"name": p.call.name, "arguments": arguments_json(p.call.arguments)},
            }
            for p in calls
        ]
    return [item, *returns]  # returns inside an assistant message come from server-side tools


def recorded_at(when: datetime | None, key: str = "timestamp") -> dict[str, Any]:
    """``{key: ISO 8601}`` when the format recorded the time, else nothing (a stored turn never invents one)."""
    return {key: when.isoformat()} if when is not None else {}


def _native(
    query: NeutralMessage | None,
    reply: NeutralMessage | None,
    segment: range,
    messages: Sequence[NeutralMessage],
    calls: list[list[_Pair]],
    answers: list[list[_Pair | None]],
) -> list[dict[str, Any]]:
    """The current turn in the pydantic-ai shape (tool-call / tool-return with outcome), so the corpus's
    primary path sees the calls that failed, each with its error text (the return's own; a call marked failed
    with no return carries the format's failure text). Text the agent sent with its calls ("No problem,
    I can look that up…") is a text part of the response that carries them: the agent's interim reply, kept
    with its turn (it is no evidence for the reply; later turns have it in their history). An unfinished turn
    (``reply`` None) ends on its last calls and returns; all its text is interim."""
    ours = {id(p) for i in segment for p in calls[i]}
    asked = recorded_at(query.created_at) if query is not None else {}
    out: list[dict[str, Any]] = [
        {
            "kind": "request",
            "parts": [{"part_kind": "user-prompt", "content": query_text(query) if query else "", **asked}],
        }
    ]
    for i in segment:
        interim = messages[i] is not reply and messages[i].role == "assistant" and messages[i].text.strip()
        if calls[i] or interim:
            text = [{"part_kind": "text", "content": messages[i].text}] if interim else []
            out.append(
                {
                    "kind": "response",
                    "model_name": messages[i].model,
                    "parts": text
                    + [
                        {
                            "part_kind": "tool-call",
                            "tool_name": p.call.name,
                            "tool_call_id": p.call_id,
                            "args": p.call.arguments,
                            **recorded_at(p.call.at or messages[i].created_at),
                            **({"provenance": p.call.meta.model_dump(mode="json")} if p.call.meta else {}),
                        }
                        for p in calls[i]
                    ],
                }
            )
        returns: list[dict[str, Any]] = [
            {
                "part_kind": "tool-return",
                "tool_name": p.call.name,
                "tool_call_id": p.call_id,
                "content": p.call.failure,
                "outcome": "failed",
            }
            for p in calls[i]
            if p.call.failure and not (p.result is not None and p.result_at in segment)  # no return of its own
        ]
        returns += [
            {
                "part_kind": "tool-return",
                "tool_name": p.call.name,
                "tool_call_id": p.call_id,
                "content": r.content,  # a failed call's own error text, as the agent read it
                "outcome": "failed" if p.call.failure and not r.failed else r.outcome,
                **recorded_at(r.at or messages[i].created_at),
                **r.provenance(),
            }
            for r, p in zip(messages[i].tool_results, answers[i], strict=True)
            if p is not None and id(p) in ours and (r.content is not None or r.failed or p.call.failure)
        ]
        if returns:
            out.append({"kind": "request", "parts": returns})
    if reply is not None:  # an unfinished turn ends on its calls and returns
        text_part = {"part_kind": "text", "content": reply.text, **recorded_at(reply.created_at)}
        out.append({"kind": "response", "model_name": reply.model, "parts": [text_part]})
    return out


def _observed(pair: _Pair, messages: Sequence[NeutralMessage]) -> dict[str, Any]:
    """A flat call's return time and provenance, as the format recorded them."""
    assert pair.result is not None
    when = pair.result.at or messages[pair.result_at].created_at
    meta = pair.result.meta or pair.call.meta
    return {**recorded_at(when, "observed_at"), **({"provenance": meta.model_dump(mode="json")} if meta else {})}


def split_turns(
    conversation_id: str,
    messages: Sequence[NeutralMessage],
    system_prompt: str | None = None,
    *,
    model: str | None = None,
    agent: str | None = None,
    marks_failure: bool = False,
    errors: Sequence[ImportIssue] = (),
    warnings: Sequence[ImportIssue] = (),
    metadata: dict[str, Any] | None = None,
) -> ImportResult:
    """One stored turn per assistant reply of a conversation, and one for calls after the last reply (see the
    module docstring for the rule).

    ``system_prompt`` is the conversation's own instructions layer (a snapshot, so the turns are
    flagged versioned); ``system`` messages and ``instructions`` in the messages add to it as they
    appear. ``marks_failure``: the format marks failed returns, so each turn with calls also carries its current
    calls as pydantic-ai model messages, with failed returns as ``outcome: "failed"`` (a turn with a failed call
    always does, whatever the format). Failed calls are never among the flat ``response_payload.tool_calls``
    (what ``turn_key`` reads), and their returns are history with ``is_error: true``.
    ``errors`` and ``warnings`` are the format's own issues, passed through to the result; ``metadata`` is what
    the format recorded about the run besides its messages, kept on every turn (``StoredTurn.metadata``)."""
    issues = list(errors)
    cautions = list(warnings)
    calls, answers = _pair(conversation_id, messages, cautions)
    turns: list[StoredTurn] = []
    history: list[dict[str, Any]] = []
    system_parts = [system_prompt] if system_prompt and system_prompt.strip() else []
    instructions: str | None = None
    query_at, history_at_query = -1, 0

    def turn(end: int, reply: NeutralMessage | None) -> StoredTurn:
        """The turn from the current query to message ``end``: ``reply`` answers it, or None (unfinished)."""
        query = messages[query_at] if query_at >= 0 else None
        segment = range(query_at + 1, end + 1)
        flat = [
            {
                "name": p.call.name,
                "arguments": p.call.arguments,
                "response": p.result.content if p.result is not None and p.result_at <= end else None,
                **recorded_at(p.call.at or messages[i].created_at, "made_at"),
                **(_observed(p, messages) if p.result is not None and p.result_at <= end else {}),
            }
            for i in segment
            for p in calls[i]
            if p.failure_by(end) is None
        ]
        has_calls = any(calls[i] for i in segment)
        has_failure = any(p.failure_by(end) is not None for i in segment for p in calls[i])
        interim = any(
            messages[i].role == "assistant" and messages[i].text.strip() for i in segment if messages[i] is not reply
        )
        last = reply or next((messages[i] for i in reversed(segment) if messages[i].role == "assistant"), None)
        prompt = "\n\n".join([*system_parts, *([instructions] if instructions else [])])
        return StoredTurn.model_validate(
            {
                "turn_id": f"{conversation_id}:{len(turns)}",  # replaced by its content id below
                "model": (last.model if last is not None else None) or model,
                "agent": agent,
                "response": reply.text if reply is not None else "",
                "query": query_text(query) if query is not None else None,
                "created_at": last.created_at if last is not None else None,
                "system_prompt": prompt or None,
                "system_prompt_versioned": bool(prompt),
                "attachments": list(query.attachments) if query is not None else [],
                "model_messages": _native(query, reply, segment, messages, calls, answers)
                if (marks_failure and has_calls) or has_failure or interim
                else [],
                "response_payload": {"tool_calls": flat},
                "request_payload": {"messages": history[:history_at_query]},
                "metadata": metadata or {},
            }
        )

    for index, message in enumerate(messages):
        if message.instructions is not None:
            instructions = message.instructions
        if message.role == "system":
            if message.text.strip():
                system_parts.append(message.text)
            continue
        if is_query(message):
            query_at = index
        if is_reply(message):
            turns.append(turn(index, message))
        history.extend(_chat(message, calls[index], answers[index]))
        if index == query_at:
            history_at_query = len(history)
    last_reply = max((i for i, m in enumerate(messages) if is_reply(m)), default=-1)
    if any(calls[i] for i in range(max(last_reply, query_at) + 1, len(messages))):
        turns.append(turn(len(messages) - 1, None))  # unfinished: the calls after the last reply, no answer yet
    return ImportResult(turns=content_ids(conversation_id, turns), errors=issues, warnings=cautions)
