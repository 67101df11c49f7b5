"""OpenTelemetry GenAI semantic conventions (spans, events and log records) → stored turns.

Accepted inputs: the attributes of one chat span; a span (``attributes``, ``events``, ``status``, times);
a list of spans, ``{"spans": [...]}`` or an OTLP JSON export (``resourceSpans``, attributes as
``[{key, value: {stringValue…}}]``); a bare list of the older per-message events; and log records — what
the OpenTelemetry SDK's log exporters write (``LogRecord.to_json()``: ``event_name``, ``body``, ``attributes``,
``span_id``, ``timestamp``; a list of them, as the console exporter writes them one after another) or an OTLP
JSON logs export (``resourceLogs`` → ``scopeLogs`` → ``logRecords`` with ``eventName``), alone or beside the
spans. Instrumentations emit the GenAI events as log records (``gen_ai.user.message``, ``gen_ai.tool.message``,
``gen_ai.choice``, ``gen_ai.client.inference.operation.details`` …); the records of one chat span (the same
``span_id``; without span ids, each run of messages up to its choices) are that span's events.

Messages come from a chat span's ``gen_ai.system_instructions`` / ``gen_ai.input.messages`` /
``gen_ai.output.messages`` (JSON strings accepted), or its ``gen_ai.client.inference.operation.details``
event, or — older traces (≤ v1.36) — its per-message events ``gen_ai.system.message``,
``gen_ai.user.message``, ``gen_ai.assistant.message{content, tool_calls}``, ``gen_ai.tool.message{content,
id | tool_call_id}`` and ``gen_ai.choice{message}``, their fields given directly or (older
instrumentations) as one ``gen_ai.event.content`` JSON string. Role ``developer`` is the instructions.
Each chat span holds the whole conversation so far, so the span that saw the most messages is the
conversation; every span's output tells its reply's model and time.
Parts are matched on type, not role: ``text``, ``tool_call``, ``tool_call_response`` (``response`` or
``result``; an MCP ``CallToolResult`` in it, object or JSON string, is read with its ``isError``), media
parts (named). Failure is marked on ``execute_tool`` spans (``error.type`` or status ERROR), matched to calls by
``gen_ai.tool.call.id``: the call's return in the conversation is kept as its error text (what the agent read);
a failed call with no return there takes the span's own error text — its ``gen_ai.tool.call.result``, else its
``exception`` event's type and message, else the status description, else ``error.type``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from estimator.corpus.turn import SourceMeta
from provenance_api.importers.common import (
    ImportIssue,
    ImportResult,
    NeutralMessage,
    NeutralToolCall,
    NeutralToolResult,
    Role,
    as_dict,
    opt_str,
    parse_arguments,
    parse_time,
    placed,
    split_turns,
)
from provenance_api.importers.mcp import flatten_content, media_name, observed, return_text

FORMAT = "otel"
INPUT, OUTPUT, SYSTEM = "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_LEGACY_ROLES: dict[str, Role] = {
    "gen_ai.system.message": "system",
    "gen_ai.developer.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
EVENT_CONTENT = "gen_ai.event.content"  # older instrumentations: the event's fields as one JSON string
_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
_MEDIA_PARTS = frozenset({"blob", "uri", "file", "image", "audio", "video"})
_ERROR_CODES = ("ERROR", "STATUS_CODE_ERROR", 2)
_NO_SPAN = frozenset({"", "0" * 16})


@dataclass
class _Inference:
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    system: str | None = None
    model: str | None = None
    at: datetime | None = None


@dataclass(frozen=True)
class _Execution:
    """What an ``execute_tool`` span recorded of one execution: when it ended (the return came back) and the
    attributes naming where it ran and for whom."""

    ended: datetime | None
    meta: SourceMeta | None


_SPAN_META = {
    "server": ("mcp.server.name", "server.address"),
    "resource": ("mcp.resource.uri",),
    "principal": ("enduser.id", "user.id"),
    "tenant": ("tenant.id",),
    "scope": ("enduser.scope",),
}
"""The ``execute_tool`` span attributes read into a source's envelope (OTel semantic conventions: MCP's
``mcp.*`` and ``server.address``, ``enduser.*``, ``user.id``; ``tenant.id`` where an instrumentation sets it)."""


@dataclass
class _Trace:
    inferences: list[_Inference] = field(default_factory=list)
    failures: dict[str, list[str | None]] = field(default_factory=dict)  # call id → per execution
    executions: dict[str, list[_Execution]] = field(default_factory=dict)  # call id → per execution


def looks_like(obj: Any) -> bool:
    try:
        spans = spans_of(obj)
    except ValueError:
        return False
    return any(_is_tool_span(s) or _inference(s) is not None for s in spans)


def import_otel(obj: Any, conversation_id: str) -> ImportResult:
    warnings: list[ImportIssue] = []
    trace = _read(spans_of(obj), conversation_id, warnings)
    if not trace.inferences:
        raise ValueError("no chat span or GenAI message events found")
    chosen = max(enumerate(trace.inferences), key=lambda e: (len(e[1].inputs) + len(e[1].outputs), e[0]))[1]
    conversation = [*chosen.inputs, *chosen.outputs]
    seen: dict[int, tuple[str | None, datetime | None]] = {}
    for inference in trace.inferences:  # a span on this conversation tells its replies' model and time
        start = len(inference.inputs)
        if _same(conversation[: start + len(inference.outputs)], [*inference.inputs, *inference.outputs]):
            for j in range(len(inference.outputs)):
                seen[start + j] = (inference.model, inference.at)
    neutral: list[NeutralMessage] = []
    for position, message in enumerate(conversation):
        read = _message(message)
        if read is None:
            warnings.append(ImportIssue(f"{conversation_id}: message {position}", "not a GenAI message; skipped"))
            continue
        if read.role == "assistant" and position in seen:
            read.model, read.created_at = seen[position]
        neutral.append(placed(read, position))
    _mark_failures(neutral, trace.failures)
    _mark_executions(neutral, trace.executions)
    return split_turns(
        conversation_id, neutral, chosen.system, model=chosen.model, marks_failure=True, warnings=warnings
    )


def spans_of(obj: Any) -> list[dict[str, Any]]:
    """Spans of any accepted input shape, in start-time order where times are known; log records become the
    events of the span they were emitted in (or of a span of their own)."""
    records = _records_of(obj)
    if isinstance(obj, list) and records:
        obj = [item for item in obj if not _is_record(item)]
    if isinstance(obj, dict) and (isinstance(obj.get("resourceSpans"), list) or "resourceLogs" in obj):
        spans = [
            s
            for rs in obj.get("resourceSpans") or []
            if isinstance(rs, dict)
            for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
            if isinstance(ss, dict)
            for s in ss.get("spans") or []
        ]
    elif _is_record(obj):
        spans = []
    elif isinstance(obj, dict) and isinstance(obj.get("spans"), list):
        spans = obj["spans"]
    elif isinstance(obj, dict) and any(k in obj for k in (INPUT, OUTPUT, SYSTEM)):
        spans = [{"attributes": obj}]
    elif isinstance(obj, dict) and ("attributes" in obj or "events" in obj):
        spans = [obj]
    elif (
        isinstance(obj, list)
        and obj
        and all(isinstance(e, dict) and str(e.get("name", "")) in (*_LEGACY_ROLES, "gen_ai.choice") for e in obj)
    ):
        spans = [{"events": obj}]
    elif isinstance(obj, list):
        spans = obj
    else:
        raise ValueError("expected GenAI span attributes, a span, a list of spans, log records or an OTLP export")
    spans = _with_records([s for s in spans if isinstance(s, dict)], records)
    if spans and all(_time(s, "start") is not None for s in spans):
        spans.sort(key=lambda s: _time(s, "start") or datetime.min)
    return spans


def _is_record(item: Any) -> bool:
    """A log record as the SDK writes it (``event_name``, ``body``) or as OTLP JSON has it (``eventName``)."""
    return isinstance(item, dict) and _event_name(item) is not None and "parts" not in item


def _event_name(record: dict[str, Any]) -> str | None:
    name = record.get("event_name", record.get("eventName"))
    if not name:
        name = _attrs(record.get("attributes")).get("event.name")  # the older Events API put it here
    return name if isinstance(name, str) and name else None


def _records_of(obj: Any) -> list[dict[str, Any]]:
    """The log records of any accepted shape: one, a list (beside spans or alone), an OTLP logs export."""
    if _is_record(obj):
        return [obj]
    if isinstance(obj, list):
        return [item for item in obj if _is_record(item)]
    if isinstance(obj, dict) and isinstance(obj.get("resourceLogs"), list):
        return [
            r
            for rl in obj["resourceLogs"]
            if isinstance(rl, dict)
            for sl in rl.get("scopeLogs") or rl.get("instrumentationLibraryLogs") or []
            if isinstance(sl, dict)
            for r in sl.get("logRecords") or []
            if isinstance(r, dict)
        ]
    return []


def _span_id(value: Any) -> str:
    text = value.lower().removeprefix("0x") if isinstance(value, str) else ""
    return "" if text in _NO_SPAN else text


def _with_records(spans: list[dict[str, Any]], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans, each with the GenAI log records emitted in it added to its events; records of no span given
    are spans of their own: one per span id, else one per run of messages ended by its choices."""
    if not records:
        return spans
    by_id = {
        sid: span
        for span in spans
        if (sid := _span_id(as_dict(span.get("context")).get("span_id") or span.get("spanId") or span.get("span_id")))
    }
    added: dict[int, list[dict[str, Any]]] = {}
    own: dict[str, list[dict[str, Any]]] = {}
    runs: list[list[dict[str, Any]]] = []
    for record in records:
        name = _event_name(record)
        if name != DETAILS_EVENT and name not in _LEGACY_ROLES and name != "gen_ai.choice":
            continue
        event = {"name": name, "body": record.get("body"), "attributes": record.get("attributes"), "at": record}
        sid = _span_id(record.get("span_id", record.get("spanId")))
        if sid in by_id:
            added.setdefault(id(by_id[sid]), []).append(event)
        elif sid:
            own.setdefault(sid, []).append(event)
        else:
            if not runs or (runs[-1][-1]["name"] == "gen_ai.choice" and name != "gen_ai.choice"):
                runs.append([])
            runs[-1].append(event)
    out = [{**s, "events": [*(s.get("events") or []), *added[id(s)]]} if id(s) in added else s for s in spans]
    for events in [*own.values(), *runs]:
        first = events[0]["at"]
        times = ("timestamp", "timeUnixNano", "observed_timestamp", "observedTimeUnixNano")
        start = next((first[k] for k in times if first.get(k) and first.get(k) != "0"), None)
        details = next((e for e in events if e["name"] == DETAILS_EVENT), None)
        attributes = {**_attrs(details["attributes"]), **_attrs(details["body"])} if details else {}
        out.append({"name": "chat (log records)", "start_time": start, "attributes": attributes, "events": events})
    return out


def _read(spans: list[dict[str, Any]], conversation_id: str, warnings: list[ImportIssue]) -> _Trace:
    trace = _Trace()
    for span in spans:
        attrs = _attrs(span.get("attributes"))
        if _is_tool_span(span):
            failed = _failure(span, attrs)
            call_id = opt_str(attrs.get("gen_ai.tool.call.id"))
            if call_id is not None:
                trace.failures.setdefault(call_id, []).append(failed)
                trace.executions.setdefault(call_id, []).append(_execution(span, attrs))
            elif failed:
                warnings.append(
                    ImportIssue(
                        f"{conversation_id}: span {span.get('name', '?')}",
                        "failed execute_tool span has no gen_ai.tool.call.id; it cannot be matched to a call",
                    )
                )
            continue
        inference = _inference(span)
        if inference is not None:
            trace.inferences.append(inference)
    return trace


def _is_tool_span(span: dict[str, Any]) -> bool:
    attrs = _attrs(span.get("attributes"))
    return attrs.get("gen_ai.operation.name") == "execute_tool" or str(span.get("name", "")).startswith("execute_tool")


def _failure(span: dict[str, Any], attrs: dict[str, Any]) -> str | None:
    """The error text of a failed ``execute_tool`` span (None: it did not fail): the tool's own words where the
    span recorded them (``gen_ai.tool.call.result``, the ``exception`` event, the status description)."""
    status = as_dict(span.get("status"))
    code = status.get("code", status.get("status_code"))
    error_type = attrs.get("error.type")
    if error_type is None and code not in _ERROR_CODES:
        return None
    if "gen_ai.tool.call.result" in attrs:
        text = return_text(_json(attrs["gen_ai.tool.call.result"]))[0]
        if text.strip():
            return text
    events = [e for e in span.get("events") or [] if isinstance(e, dict)]
    exception = next((_attrs(e.get("attributes")) for e in events if e.get("name") == "exception"), {})
    kind, message = opt_str(exception.get("exception.type")), opt_str(exception.get("exception.message"))
    if message is None:
        message = opt_str(status.get("description")) or opt_str(status.get("message"))
        kind = kind or opt_str(error_type)
    if message is not None:
        return f"{kind}: {message}" if kind and kind not in message else message
    return opt_str(error_type) or str(error_type or "status ERROR")


def _inference(span: dict[str, Any]) -> _Inference | None:
    attrs = _attrs(span.get("attributes"))
    events = [e for e in span.get("events") or [] if isinstance(e, dict)]
    details = [_attrs(e.get("attributes")) or _attrs(e.get("body")) for e in events if e.get("name") == DETAILS_EVENT]
    source = attrs if any(k in attrs for k in (INPUT, OUTPUT)) else next(iter(details), None)
    model = opt_str(attrs.get("gen_ai.response.model")) or opt_str(attrs.get("gen_ai.request.model"))
    at = _time(span, "end") or _time(span, "start")
    if source is not None:
        system = _json(source.get(SYSTEM))
        return _Inference(
            _list(source.get(INPUT)), _list(source.get(OUTPUT)), _parts_text(system) if system else None, model, at
        )
    legacy = [e for e in events if e.get("name") in _LEGACY_ROLES or e.get("name") == "gen_ai.choice"]
    if not legacy:
        return None
    inputs, outputs = [], []
    for event in legacy:
        payload = _event_payload(event)
        if event.get("name") == "gen_ai.choice":
            body = _json(payload.get("message"))
            outputs.append(_legacy_message("assistant", body if isinstance(body, dict) else {}))
        else:
            inputs.append(_legacy_message(_LEGACY_ROLES[str(event["name"])], payload))
    return _Inference(inputs, outputs, None, model, at)


def _event_payload(event: dict[str, Any]) -> dict[str, Any]:
    """An older event's fields: its body or attributes, with a ``gen_ai.event.content`` JSON string read
    into them (an object's fields; anything else is the content)."""
    payload = dict(_attrs(event.get("body")) or _attrs(event.get("attributes")))
    if EVENT_CONTENT in payload:
        inner = _json(payload.pop(EVENT_CONTENT))
        if isinstance(inner, dict):
            payload.update(inner)
        else:
            payload["content"] = inner
    return payload


def _legacy_message(role: Role, payload: dict[str, Any]) -> dict[str, Any]:
    """An older per-message event as a current-convention message."""
    parts: list[dict[str, Any]] = []
    content = payload.get("content")
    if role == "tool":
        call_id = payload.get("id", payload.get("tool_call_id"))
        parts.append(
            {"type": "tool_call_response", "id": call_id, **({"response": content} if "content" in payload else {})}
        )
    elif content not in (None, ""):
        parts.append({"type": "text", "content": flatten_content(content)})
    for tc in _list(payload.get("tool_calls")):
        function = as_dict(tc.get("function"))
        parts.append(
            {
                "type": "tool_call",
                "id": tc.get("id"),
                "name": function.get("name", tc.get("name")),
                "arguments": function.get("arguments", tc.get("arguments")),
            }
        )
    return {"role": role, "parts": parts}


def _message(message: dict[str, Any]) -> NeutralMessage | None:
    role = _ROLES.get(str(message.get("role"))) if isinstance(message, dict) else None
    parts = message.get("parts") if isinstance(message, dict) else None
    if role is None or not isinstance(parts, list):
        return None
    out = NeutralMessage(role)
    texts: list[str] = []
    for part in (p for p in parts if isinstance(p, dict)):
        kind = str(part.get("type", ""))
        if kind == "text":
            texts.append(flatten_content(part.get("content")))
        elif kind.endswith("tool_call"):
            arguments = part.get("arguments", part.get(kind))
            out.tool_calls.append(
                NeutralToolCall(opt_str(part.get("id")), str(part.get("name") or "tool"), parse_arguments(arguments))
            )
        elif kind.endswith("tool_call_response"):
            given = any(k in part for k in ("response", "result", kind))  # absent: content not captured
            text, mcp_error = return_text(_pick(part, "response", "result", kind)) if given else ("", False)
            result = NeutralToolResult(opt_str(part.get("id")), text, "failed" if mcp_error else "success")
            out.tool_results.append(observed(result, _pick(part, "response", "result", kind)) if given else result)
        elif kind in _MEDIA_PARTS:
            out.attachments.append(media_name(part))
    out.text = "\n".join(t for t in texts if t)
    if role != "user":
        out.attachments = []
    return out


def _mark_failures(messages: list[NeutralMessage], failures: dict[str, list[str | None]]) -> None:
    """The k-th call of an id takes the k-th ``execute_tool`` span of that id (spans in time order). A failed
    call's k-th return in the conversation is marked failed and keeps its text, the error as the agent read it
    (the span's text only when the return's was not captured); a failed call with no return takes the span's."""
    returns: dict[str, list[tuple[NeutralMessage, int]]] = {}
    for message in messages:
        for j, result in enumerate(message.tool_results):
            if result.call_id is not None:
                returns.setdefault(result.call_id, []).append((message, j))
    used: dict[str, int] = {}
    for message in messages:
        for i, call in enumerate(message.tool_calls):
            if call.id is None or call.id not in failures:
                continue
            k = used.get(call.id, 0)
            used[call.id] = k + 1
            runs = failures[call.id]
            error = runs[k] if k < len(runs) else None
            if error is None:
                continue
            answered = returns.get(call.id, [])
            if k < len(answered):
                owner, j = answered[k]
                result = owner.tool_results[j]
                text = result.content if result.content and result.content.strip() else error
                owner.tool_results[j] = replace(result, content=text, outcome="failed")
            else:
                message.tool_calls[i] = replace(call, failure=error)


def _execution(span: dict[str, Any], attrs: dict[str, Any]) -> _Execution:
    found = {
        name: value
        for name, keys in _SPAN_META.items()
        if (value := next((str(attrs[k]) for k in keys if attrs.get(k) not in (None, "")), None)) is not None
    }
    return _Execution(_time(span, "end"), SourceMeta.model_validate(found) if found else None)


def _mark_executions(messages: list[NeutralMessage], executions: dict[str, list[_Execution]]) -> None:
    """The k-th call of an id and its k-th return take the k-th ``execute_tool`` span of that id (spans in time
    order): the return's time is the span's end, and the span's attributes say where it ran and for whom (the
    call's too: it was made for the same principal). A return whose own MCP ``_meta`` says more keeps that."""
    calls_seen: dict[str, int] = {}
    returns_seen: dict[str, int] = {}
    for message in messages:
        for i, call in enumerate(message.tool_calls):
            runs = executions.get(call.id or "", [])
            k = calls_seen[call.id or ""] = calls_seen.get(call.id or "", -1) + 1
            if k < len(runs) and runs[k].meta is not None:
                message.tool_calls[i] = replace(call, meta=runs[k].meta)
        for j, result in enumerate(message.tool_results):
            runs = executions.get(result.call_id or "", [])
            k = returns_seen[result.call_id or ""] = returns_seen.get(result.call_id or "", -1) + 1
            if k < len(runs):
                run = runs[k]
                meta = result.meta
                if run.meta is not None:
                    meta = run.meta.model_copy(update=meta.model_dump(exclude_none=True)) if meta else run.meta
                message.tool_results[j] = replace(result, at=result.at or run.ended, meta=meta)


def _same(left: list[dict[str, Any]], right: list[dict[str, Any]]) -> bool:
    """The same messages (role and parts; a ``finish_reason`` on an output message is ignored)."""
    return [(m.get("role"), m.get("parts")) for m in left] == [(m.get("role"), m.get("parts")) for m in right]


def _pick(part: dict[str, Any], *keys: str) -> Any:
    return next((part[k] for k in keys if k in part), None)


def _parts_text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(flatten_content(p.get("content")) if isinstance(p, dict) else str(p) for p in value)
    return flatten_content(value)


def _time(span: dict[str, Any], which: str) -> datetime | None:
    keys = (f"{which}_time", f"{which}TimeUnixNano", f"{which}_time_unix_nano", f"{which}Time")
    return next((t for t in (parse_time(span.get(k)) for k in keys) if t is not None), None)


def _json(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _list(value: Any) -> list[dict[str, Any]]:
    value = _json(value)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _attrs(value: Any) -> dict[str, Any]:
    """Attributes as a dict, from a dict or OTLP's ``[{key, value: {stringValue | intValue | …}}]``."""
    if isinstance(value, dict):
        nested = value.get("kvlistValue")
        return _attrs(nested.get("values")) if isinstance(nested, dict) else value
    if isinstance(value, list):
        return {str(kv.get("key")): _any_value(kv.get("value")) for kv in value if isinstance(kv, dict)}
    return {}


def _any_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    if isinstance(value.get("arrayValue"), dict):
        return [_any_value(v) for v in value["arrayValue"].get("values") or []]
    return _attrs(value) if isinstance(value.get("kvlistValue"), dict) else value
