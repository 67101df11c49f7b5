"""Algorithm 1 — BuildLayeredCorpus (seed §7.1), with three corrections real data needs.

(a) A reused ``tool_call_id`` never overwrites an earlier call: each return pairs with
    the most recent still-unanswered call of that id.
(b) Tool results of *earlier* turns that the stored history carries are part of the
    conversation the model saw: they become history units, within the history cap.
(c) A failed or denied call is evidence too: its error text ("the 12:00 slot is already taken") is what the
    agent read next, so it is a tools-layer unit of kind ``tool_error`` (labelled ``name(…) — failed``, with its
    ``returned_at``: it can have caused the sentences and actions after it), and an earlier turn's failed return
    is a history item labelled ``tool error``. Failures are told by the stored marks: a return's ``outcome``
    other than success (``failed``, ``denied``, ``retried``, ``interrupted``), a retry prompt naming a tool, an MCP
    ``CallToolResult`` with ``isError: true`` (as an object or a JSON string of one), and in chat history a
    tool message with ``is_error: true`` or ``status: "error"``. A failed call with no text stays excluded
    and disclosed.

``Params.failed_calls_as_sources = False`` is the seed's Algorithm 1 for (c): every failed call is excluded and
disclosed ("failure is not evidence") and failed returns are no history. Where it must hold: the seed's failures
fixture (``fixtures/failures_turn.json``, tests/method/test_corpus.py) is read under it; the paper's figures this
project reproduces — §8.2's 8 sources and 31 calls, §8.3's 39 (``fixtures/eo_worldview_turn.json``,
``fixtures/ndvi_parametric_turn.json``; tests/method/test_cost.py, test_recorded_outcomes.py) — come from turns
with no failed call, so they hold under either value (tests/method/test_failed_call_sources.py checks that the
corpora are the same). A quote or trace that must rebuild the seed's corpus of a turn with failed calls sets
``params.failed_calls_as_sources`` to false.

A tool's media (an image, audio, a binary resource) are named in its text, never inlined, and listed in
``Corpus.tool_media`` and ``Corpus.unscorable``: nothing drawn from them can be scored.

Beyond the seed, the instructions layer is the system prompt split into its rules (``rules``): one unit per
section, labelled ``instructions §5 "Cancel flight" · prompt lines 54–62``, each with its own
line span in the prompt (``Unit.prompt_lines``) and digest. ``Params.instructions_as_rules = False`` is the seed's
Algorithm 1, the prompt whole — where that is required is in ``rules``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from estimator.corpus.envelope import Custody, custody_of, make_envelope
from estimator.corpus.redacted import redaction_warnings
from estimator.corpus.rules import Rule, max_rules, rules_with_sizes
from estimator.corpus.tool_content import bare_blocks, flatten, mcp_is_error, tool_media
from estimator.corpus.turn import (
    TOOL_CALL_KINDS,
    TOOL_RETURN_KINDS,
    ChatMessage,
    ModelMessage,
    SourceMeta,
    StoredTurn,
    content_text,
    recorded_time,
)
from estimator.corpus.units import (
    TOOL_ERROR,
    Corpus,
    Evidence,
    ExcludedCall,
    Layer,
    Unit,
    sha256_hex,
)
from estimator.params import DEFAULT_PARAMS, Params
from estimator.tokens import ApproxTokenizer, Tokenizer

ARTIFACT_READ_TOOLS = frozenset({"read_file", "ls", "glob", "grep"})
LABEL_KEYS = ("path", "file_path", "url", "query", "q")
INSTRUCTIONS_LABEL = "agent instructions (system prompt)"
_ROLE_LABELS = {"user": "user said", "assistant": "agent replied", "tool": "tool result", "tool_error": "tool error"}
TOOL_ERROR_ROLE = "tool_error"
"""The role of a history item that is an earlier turn's failed return (``history_messages``)."""
_LABEL_VALUE_CHARS = 80
_APPROX = ApproxTokenizer()  # one instance: what it has split of a prompt is remembered (``rules``)


@dataclass
class _RawCall:
    name: str
    args: dict[str, Any]
    text: str = ""  # the return, or a failed call's error text
    answered: bool = False
    failed: str | None = None  # why it counts as failed (``outcome=denied``, ``MCP isError``, …)
    call_id: str | None = None
    returned_at: int | None = None  # the position of the part that answered it (see ``Unit.returned_at``)
    observed_at: datetime | None = None  # when its return came back, as the history recorded it
    meta: SourceMeta | None = None  # where its return came from, as the history recorded it


def classify_tool(name: str) -> str:
    """ClassifyTool: a kind the interface can name to a user."""
    lowered = name.lower()
    if lowered in ARTIFACT_READ_TOOLS:
        return "artifact_read"
    if "fetch" in lowered:
        return "web_fetch"
    if "web_search" in lowered or lowered in {"search", "google_search", "bing_search"}:
        return "web_search"
    if "." in name:
        return "mcp_tool"
    return "user_tool"


def as_dict(args: Any) -> dict[str, Any]:
    """AsDict: arguments as an object; a JSON string is parsed, other text is kept raw."""
    if args is None:
        return {}
    if isinstance(args, dict):
        return args
    if isinstance(args, str):
        stripped = args.strip()
        if not stripped:
            return {}
        try:
            parsed = json.loads(stripped)
        except ValueError:
            return {"input": args}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {"input": args}


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _LABEL_VALUE_CHARS else text[: _LABEL_VALUE_CHARS - 1] + "…"


def label_for(name: str, args: dict[str, Any]) -> str:
    """Label: the identity a user recognises — never a raw JSON dump."""
    for key in LABEL_KEYS:
        value = args.get(key)
        if isinstance(value, (str, int, float)) and str(value).strip():
            return f"{name}: {_short(value)}"
    scalars = [(k, v) for k, v in args.items() if isinstance(v, (str, int, float, bool)) and v != ""]
    if scalars:
        return f"{name}(" + ", ".join(f"{k}={_short(v)}" for k, v in scalars[:4]) + ")"
    if args:
        return f"{name}(" + ", ".join(list(args)[:6]) + ")"
    return f"{name}()"


def _chat_tool_failed(message: ChatMessage) -> bool:
    """A chat-history tool message that says its call failed: MCP ``isError``, ``is_error: true`` (what this
    project's importers write, as Anthropic does) or LangChain's ``status: "error"``."""
    extra = message.model_extra or {}
    return mcp_is_error(message.content) or extra.get("is_error") is True or extra.get("status") == "error"


def _header(name: str, args: dict[str, Any]) -> str:
    return name + "(" + json.dumps(args, ensure_ascii=False, default=str) + ")"


def _last_user_prompt_index(messages: list[ModelMessage]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if any(p.part_kind == "user-prompt" for p in messages[i].parts):
            return i
    return -1


def current_messages(turn: StoredTurn) -> list[ModelMessage]:
    """The native messages of the current turn: from the last user prompt on (all of them when none has one).
    Tool calls and returns among them are the turn's own; positions count their parts in order."""
    cut = _last_user_prompt_index(turn.model_messages)
    return turn.model_messages[max(cut, 0) :]


def _pair_native(messages: Iterable[ModelMessage]) -> list[_RawCall]:
    """Primary path: pair tool calls with returns by id (most recent unanswered call wins)."""
    order: list[_RawCall] = []
    pending: dict[str, list[_RawCall]] = {}
    position = -1
    for message in messages:
        for part in message.parts:
            position += 1
            if part.part_kind in TOOL_CALL_KINDS:
                call = _RawCall(
                    name=part.tool_name or "tool",
                    args=as_dict(part.args),
                    call_id=part.tool_call_id,
                    meta=part.provenance,
                )
                key = part.tool_call_id or f"_anon{len(order)}"
                order.append(call)
                pending.setdefault(key, []).append(call)
            elif part.part_kind in TOOL_RETURN_KINDS and part.tool_call_id in pending:
                stack = pending[part.tool_call_id]
                if not stack:
                    continue
                call = stack.pop()
                call.answered = True
                call.returned_at = position
                call.observed_at = part.recorded_at or message.recorded_at
                call.meta = part.provenance or call.meta
                if part.outcome not in (None, "success"):
                    call.failed = f"outcome={part.outcome}"
                elif mcp_is_error(part.content):
                    call.failed = "MCP isError"
                call.text = flatten(part.content)  # a failed call's is its error text
            elif part.part_kind == "retry-prompt" and part.tool_call_id in pending:
                stack = pending[part.tool_call_id]
                if stack:
                    call = stack.pop()
                    call.answered = True
                    call.returned_at = position
                    call.observed_at = part.recorded_at or message.recorded_at
                    call.failed = "retry-prompt (tool call rejected)"
                    call.text = flatten(part.content)  # what the agent was told: the rejection
    return order


def _evidence(source: str, full_text: str, tokens: int, transformations: list[str]) -> Evidence:
    return Evidence(digest=sha256_hex(full_text), source=source, tokens=tokens, transformations=tuple(transformations))


def _tier_notes(tokens: int, params: Params) -> list[str]:
    notes = []
    if tokens > params.source_token_cap:
        notes.append(f"truncated to {params.source_token_cap} tokens for ablation")
    if tokens > params.support_token_cap:
        notes.append(f"truncated to {params.support_token_cap} tokens for the span check")
    return notes


def cap_warnings(unit: Unit, tokens: int, params: Params) -> list[str]:
    """The per-source token caps this unit exceeds, in plain words naming it (``tokens``: its shown size)."""
    out: list[str] = []
    if tokens > params.source_token_cap:
        out.append(
            f"{unit.id} ({unit.label}) is {tokens:,} tokens, larger than the {params.source_token_cap:,}-token "
            "scoring window (SOURCE_TOKEN_CAP): the judge, probe and scorer see only its first part, so a "
            "claim grounded later in it reads as ungrounded."
        )
    if tokens > params.support_token_cap:
        out.append(
            f"{unit.id} ({unit.label}) is {tokens:,} tokens, cut to {params.support_token_cap:,} for the span "
            "check (SUPPORT_TOKEN_CAP): a span later in it cannot be quoted."
        )
    return out


def history_messages(turn: StoredTurn, failed_calls: bool = True) -> list[tuple[str, str, str | None]]:
    """Chronological (role, text, tool call header) items of the conversation before the current query, whole:
    the history layer is the newest of them, each cut to its budget. Roles: ``user``, ``assistant``, ``tool``,
    and ``tool_error`` — an earlier call's error text, left out when ``failed_calls`` is False (the seed)."""
    return [(role, text, header) for role, text, header, _ in timed_history(turn, failed_calls)]


def timed_history(turn: StoredTurn, failed_calls: bool = True) -> list[tuple[str, str, str | None, datetime | None]]:
    """``history_messages`` with each item's time as the history recorded it (None: not recorded)."""
    msgs = turn.request_payload.messages
    if msgs:
        return _history_from_chat(msgs, failed_calls)
    return _history_from_native(turn.model_messages, failed_calls)


_Item = tuple[str, str, str | None, datetime | None]


def _history_from_chat(msgs: list[ChatMessage], failed_calls: bool = True) -> list[_Item]:
    cut = len(msgs)
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].role == "user" and content_text(msgs[i].content).strip():
            cut = i
            break
    items: list[_Item] = []
    pending: dict[str, list[str]] = {}
    for m in msgs[:cut]:
        if m.role == "assistant" and m.tool_calls:
            for tc in m.tool_calls:
                raw_fn = tc.get("function")
                fn: dict[str, Any] = raw_fn if isinstance(raw_fn, dict) else {}
                name = str(fn.get("name") or tc.get("name") or "tool")
                args = as_dict(fn.get("arguments", tc.get("args")))
                pending.setdefault(str(tc.get("id")), []).append(_header(name, args))
        text = content_text(m.content)
        if m.role in ("user", "assistant") and text.strip():
            items.append((m.role, text, None, m.recorded_at))
        elif m.role == "tool":
            stack = pending.get(str(m.tool_call_id), [])
            header = stack.pop() if stack else (m.name or "tool")
            failed = _chat_tool_failed(m)
            if failed and not failed_calls:
                continue  # the seed: failure is not evidence
            structured = isinstance(m.content, list) and not bare_blocks(m.content)
            body = content_text(m.content) if structured else flatten(m.content)
            if not body.strip():
                body = flatten(m.content)
            if body.strip():
                items.append((TOOL_ERROR_ROLE if failed else "tool", body, header, m.recorded_at))
    return items


def _history_from_native(messages: list[ModelMessage], failed_calls: bool = True) -> list[_Item]:
    cut = _last_user_prompt_index(messages)
    if cut < 0:
        return []
    items: list[_Item] = []
    pending: dict[str, list[str]] = {}
    for message in messages[:cut]:
        for part in message.parts:
            if part.part_kind == "user-prompt":
                text = content_text(part.content)
                if text.strip():
                    items.append(("user", text, None, part.recorded_at or message.recorded_at))
            elif part.part_kind == "text" and isinstance(part.content, str) and part.content.strip():
                items.append(("assistant", part.content, None, part.recorded_at or message.recorded_at))
            elif part.part_kind in TOOL_CALL_KINDS:
                header = _header(part.tool_name or "tool", as_dict(part.args))
                pending.setdefault(part.tool_call_id or "", []).append(header)
            elif part.part_kind in TOOL_RETURN_KINDS or (part.part_kind == "retry-prompt" and part.tool_name):
                stack = pending.get(part.tool_call_id or "", [])
                header = stack.pop() if stack else (part.tool_name or "tool")
                failed = (
                    part.part_kind == "retry-prompt"
                    or part.outcome not in (None, "success")
                    or mcp_is_error(part.content)
                )
                if failed and not failed_calls:
                    continue  # the seed: failure is not evidence
                body = flatten(part.content)
                if body.strip():
                    items.append(
                        (TOOL_ERROR_ROLE if failed else "tool", body, header, part.recorded_at or message.recorded_at)
                    )
    return items


def _system_prompt(turn: StoredTurn) -> tuple[str, bool]:
    """The instructions text and whether it is a snapshot taken with the turn.

    An explicit ``system_prompt`` wins; otherwise system messages stored with the conversation
    (request payload, then native messages) are the text the model saw, hence versioned."""
    if turn.system_prompt and turn.system_prompt.strip():
        return turn.system_prompt, turn.system_prompt_versioned
    chat_system = [
        content_text(m.content)
        for m in turn.request_payload.messages
        if m.role in ("system", "developer") and content_text(m.content).strip()
    ]
    if chat_system:
        return "\n\n".join(chat_system), True
    pieces: list[str] = []
    for message in turn.model_messages:
        for part in message.parts:
            if part.part_kind == "system-prompt" and isinstance(part.content, str):
                pieces.append(part.content)
    last_instructions = next((m.instructions for m in reversed(turn.model_messages) if m.instructions), None)
    if last_instructions:
        pieces.append(last_instructions)
    # Carried inside the stored messages, so it is the text the model saw: a snapshot.
    return "\n\n".join(pieces), True


def build_corpus(turn: StoredTurn, params: Params = DEFAULT_PARAMS, tokenizer: Tokenizer | None = None) -> Corpus:
    """Algorithm 1: rebuild the three-layer corpus of a stored turn."""
    tok = tokenizer or _APPROX
    path = "none"
    raw: list[_RawCall] = []
    if turn.model_messages:
        raw = _pair_native(current_messages(turn))
        path = "primary" if raw else path
    if not raw and turn.response_payload.tool_calls:
        path = "fallback"
        raw = []
        for i, e in enumerate(turn.response_payload.tool_calls):
            # flat calls ran one after another: call i's return came back before call i + 1 was made
            call = _RawCall(name=e.name, args=as_dict(e.arguments), answered=e.response is not None, returned_at=i)
            call.observed_at, call.meta = recorded_time(e.observed_at), e.provenance
            if mcp_is_error(e.response):
                call.failed = "MCP isError"
            call.text = flatten(e.response)  # a failed call's is its error text
            raw.append(call)

    units: list[Unit] = []
    excluded: list[ExcludedCall] = []
    warnings: list[str] = []
    custody = custody_of(turn)
    for call in raw:
        label = label_for(call.name, call.args)
        if call.failed and not params.failed_calls_as_sources:
            excluded.append(ExcludedCall(call.name, label, f"failed: {call.failed} (failure is not evidence)"))
            continue
        if call.failed and not call.text.strip():
            reason = f"failed: {call.failed}, no error text recorded (a failure with no text grounds nothing)"
            excluded.append(ExcludedCall(call.name, label, reason))
            continue
        if not call.text.strip():
            reason = "empty return" if call.answered else "no return recorded"
            excluded.append(ExcludedCall(call.name, label, f"{reason} (a call with no result grounds nothing)"))
            continue
        header = _header(call.name, call.args)
        kind = classify_tool(call.name)
        notes = ["call header name(json(args)) shown above the text"]
        if call.failed:
            word = "denied" if call.failed == "outcome=denied" else "failed"
            kind, label = TOOL_ERROR, f"{label} — {word}"
            header += (
                "\n[the call was denied; the denial follows]"
                if word == "denied"
                else "\n[the call failed; its error text follows]"
            )
            notes = [
                "call header name(json(args)) and the failure shown above the text",
                f"error text of a failed call ({call.failed})",
            ]
        shown = header + "\n" + call.text
        tokens = tok.count(shown)
        evidence = _evidence(f"tool:{call.name}", shown, tokens, [*notes, *_tier_notes(tokens, params)])
        units.append(
            Unit(
                id=f"s{len(units)}",
                kind=kind,
                tool=call.name,
                label=label,
                text=call.text,
                ordinal=len(units),
                layer=Layer.TOOLS,
                header=header,
                call_id=call.call_id,
                returned_at=call.returned_at,
                evidence=evidence,
                recorded=make_envelope(
                    tool=call.name,
                    digest=evidence.digest,
                    transformations=evidence.transformations,
                    custody=custody,
                    observed_at=call.observed_at,
                    meta=call.meta,
                ),
            )
        )
        warnings.extend(cap_warnings(units[-1], tokens, params))

    prompt, versioned = _system_prompt(turn)
    if prompt.strip():
        instructions = _instruction_units(prompt, versioned, params, tok, first=len(units), custody=custody)
        units.extend(instructions)
        warnings.extend(w for u in instructions for w in cap_warnings(u, u.evidence.tokens, params))

    history, history_warnings = _history_units(turn, params, tok, first=len(units), custody=custody)
    units.extend(history)
    warnings.extend(history_warnings)
    warnings.extend(redaction_warnings(units))  # a value the service replaced before storing: said, never shown
    media = tool_media(units)
    return Corpus(
        units=tuple(units),
        unscorable=(*turn.attachments, *(m.name for m in media)),
        excluded=tuple(excluded),
        path=path,
        warnings=warnings,
        tool_media=media,
        failed_calls_as_sources=params.failed_calls_as_sources,
    )


def _instruction_units(
    prompt: str, versioned: bool, params: Params, tok: Tokenizer, first: int, custody: Custody = "history"
) -> list[Unit]:
    """The instructions layer: the prompt whole (the seed), or one unit per rule (``rules``) when
    ``params.instructions_as_rules`` and the prompt has sections to split at; a rule's envelope names the whole
    prompt it was derived from (``system_prompt:<sha256>``)."""
    whole = f"system_prompt:{sha256_hex(prompt)}"
    rules: tuple[tuple[Rule, int], ...] = ()
    if params.instructions_as_rules:
        rules = rules_with_sizes(prompt, tok, params.source_token_cap, max_rules(params))
    pieces: list[tuple[str, str, str, Rule | None, int]] = [(r.label, r.text, r.heading, r, n) for r, n in rules]
    pieces = pieces or [(INSTRUCTIONS_LABEL, prompt, "", None, tok.count(prompt))]
    units: list[Unit] = []
    for label, text, header, rule, tokens in pieces:
        shown = header + "\n" + text if header else text
        notes = [] if rule is None else [f"{rule.label.split(' · ')[0]} of the system prompt, prompt {rule.lines}"]
        if header:
            notes.append("its section's heading shown above the text")
        notes += _tier_notes(tokens, params)
        if not versioned:
            notes.append("current text, not a snapshot: an edit since this turn cannot be detected")
        evidence = _evidence("system_prompt", shown, tokens, notes)
        units.append(
            Unit(
                id=f"s{first + len(units)}",
                kind="instructions",
                tool="system_prompt",
                label=label,
                text=text,
                ordinal=first + len(units),
                layer=Layer.INSTRUCTIONS,
                header=header,
                evidence=evidence,
                unversioned=not versioned,
                prompt_lines=None if rule is None else (rule.line_start, rule.line_end),
                recorded=make_envelope(
                    tool="system_prompt",
                    digest=evidence.digest,
                    transformations=evidence.transformations,
                    custody=custody,
                    derived_from=() if rule is None else (whole,),
                ),
            )
        )
    return units


def _history_units(
    turn: StoredTurn, params: Params, tok: Tokenizer, first: int, custody: Custody = "history"
) -> tuple[list[Unit], list[str]]:
    """The history layer (newest HISTORY_MAX_MESSAGES items, each cut to HISTORY_TOKENS_PER_MESSAGE) and a
    warning for every cut and for the items the count cap leaves out."""
    every = timed_history(turn, params.failed_calls_as_sources)
    prior = [] if params.history_max_messages == 0 else every[-params.history_max_messages :]
    units: list[Unit] = []
    warnings: list[str] = []
    for offset, (role, text, call, when) in enumerate(prior):
        turns_ago = len(prior) - offset
        role_label = _ROLE_LABELS.get(role, role)
        failed = role == TOOL_ERROR_ROLE
        full = text.strip()
        # A tool return keeps its leading lines, so its line numbers are the return's own.
        content = text.rstrip() if call is not None else full
        tokens = tok.count(full)
        history_notes: list[str] = []
        cut = tokens > params.history_tokens_per_message
        if cut:
            content = tok.truncate(content, params.history_tokens_per_message).rstrip()
            history_notes.append(f"truncated to {params.history_tokens_per_message} tokens (history budget)")
        label = f"{role_label} · {turns_ago} turn(s) ago"
        header = f"[{role_label}, {turns_ago} turn(s) ago]"
        if call is not None:
            header = header + "\n" + call
            history_notes.append("call header shown above the text")
            label = f"{role_label} · {call.split('(', 1)[0]} · {turns_ago} turn(s) ago"
        if failed:
            history_notes.append("error text of a failed call (an earlier turn's return marked failed)")
        evidence = _evidence(f"role:{role}", full, tokens, history_notes)
        unit = Unit(
            id=f"s{first + len(units)}",
            kind=TOOL_ERROR if failed else "history",
            tool="tool" if failed else role,  # a tool's words either way (the audits read tool returns by it)
            label=label,
            text=content,
            ordinal=first + len(units),
            layer=Layer.HISTORY,
            header=header,
            evidence=evidence,
            turns_ago=turns_ago,
            recorded=make_envelope(
                tool=call.split("(", 1)[0] if call is not None else f"role:{role}",
                digest=evidence.digest,
                transformations=evidence.transformations,
                custody=custody,
                observed_at=when,
            ),
        )
        units.append(unit)
        if cut:
            warnings.append(
                f"{unit.id} ({label}) is a {tokens:,}-token message cut to its first "
                f"{params.history_tokens_per_message:,} tokens (HISTORY_TOKENS_PER_MESSAGE): the rest "
                "was shown to no tier, so a claim grounded past the cut reads as ungrounded."
            )
        warnings.extend(cap_warnings(unit, tok.count(unit.shown), params))
    dropped = len(every) - len(prior)
    if dropped:
        kept = f"the newest {len(prior)} are kept as {units[0].id}–{units[-1].id}" if units else "none is kept"
        warnings.append(
            f"history: {len(every)} earlier messages, capped to {len(prior)} "
            f"(HISTORY_MAX_MESSAGES = {params.history_max_messages}): {kept}; the {dropped} oldest are "
            "in no source, so a claim grounded only there reads as ungrounded."
        )
    return units, warnings
