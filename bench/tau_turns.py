"""Minimal tau-bench importer: every assistant reply with text becomes one StoredTurn.

Each conversation's ``traj`` is an OpenAI Chat Completions message list: system, user,
assistant (with ``tool_calls`` and null content), and tool messages answering a
``tool_call_id`` (ids are sometimes reused). For every assistant message with text:

* the system prompt is the system message (a snapshot: it is stored with the trajectory);
* ``request_payload.messages`` is every message before the reply;
* ``response_payload.tool_calls`` are the calls made between the last user message and the
  reply, as {name, arguments, response}; a tool message answers the most recent still-unanswered
  call with its id, so a reused id never overwrites an earlier call.

A fuller importer (metadata, rewards, multi-trial handling) belongs elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from estimator.corpus.turn import StoredTurn

MODEL = "gpt-4o"
AGENT = "tau-bench airline agent"


def _current_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool calls of the current turn, each paired with its return (or None)."""
    calls: list[dict[str, Any]] = []
    pending: dict[str, list[int]] = {}
    for message in messages:
        if message.get("role") == "assistant":
            for tc in message.get("tool_calls") or []:
                fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                calls.append(
                    {
                        "name": str(fn.get("name") or tc.get("name") or "tool"),
                        "arguments": fn.get("arguments", tc.get("arguments")),
                        "response": None,
                    }
                )
                pending.setdefault(str(tc.get("id")), []).append(len(calls) - 1)
        elif message.get("role") == "tool":
            stack = pending.get(str(message.get("tool_call_id")), [])
            if stack:
                calls[stack.pop()]["response"] = message.get("content")
    return calls


def _last_user_index(messages: list[dict[str, Any]]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return -1


def conversation_turns(traj: list[dict[str, Any]], turn_prefix: str) -> list[StoredTurn]:
    """The StoredTurns of one trajectory, one per assistant reply with text."""
    system = next((m.get("content") for m in traj if m.get("role") == "system"), None)
    turns: list[StoredTurn] = []
    for i, message in enumerate(traj):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, str) or not content.strip():
            continue
        before = traj[:i]
        calls = _current_calls(before[_last_user_index(before) + 1 :])
        turns.append(
            StoredTurn.model_validate(
                {
                    "turn_id": f"{turn_prefix}-m{i}",
                    "model": MODEL,
                    "agent": AGENT,
                    "response": content,
                    "system_prompt": system if isinstance(system, str) else None,
                    "system_prompt_versioned": True,
                    "request_payload": {"messages": before},
                    "response_payload": {"tool_calls": calls},
                }
            )
        )
    return turns


def tau_turns(path: str | Path) -> list[StoredTurn]:
    """Every assistant reply with text in a tau-bench results file, as a StoredTurn."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    turns: list[StoredTurn] = []
    for n, conversation in enumerate(data):
        prefix = f"tau-{conversation.get('task_id', n)}-t{conversation.get('trial', 0)}-c{n}"
        turns.extend(conversation_turns(conversation["traj"], prefix))
    return turns
