"""Watching JSON-RPC go by: the ``tools/call`` requests an agent sends and the responses that answer them.

The gateway forwards every message first and hands a copy here afterwards, so nothing here can delay or change
what the agent and the server exchange. ``Observer`` pairs a ``tools/call`` request with its response by
JSON-RPC id (per connection: the stdio pipe, or one HTTP request), and makes an ``EvidenceRecord`` of each
response that carries a result. A response that carries an ``error`` (the call was refused, not answered), a
message that is not JSON and a ``result`` that is not a ``CallToolResult`` (no ``content`` list of typed blocks:
the agent's client rejects it) are passed over: the agent received no tool result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeGuard

from provenance_api.core.evidence import EvidenceRecord, arguments_digest, result_digest

__all__ = ["Identity", "Observer", "PendingCall", "messages_of", "readable_result"]

MAX_PENDING = 10_000
"""Calls awaiting their response per observer; beyond it the oldest is forgotten (an agent that never reads its
answers must not grow the gateway without bound)."""


@dataclass(frozen=True)
class Identity:
    """Who records: from the gateway's own configuration, never from the model or the server."""

    tenant: str
    principal: str
    server: str
    transport: Literal["stdio", "http"]


@dataclass(frozen=True)
class PendingCall:
    tool: str
    arguments_digest: str


def messages_of(payload: bytes | str) -> list[dict[str, Any]]:
    """The JSON-RPC messages in one line or body (a message or a batch); [] for anything that is not JSON."""
    try:
        value = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return []
    items = value if isinstance(value, list) else [value]
    return [m for m in items if isinstance(m, dict)]


def readable_result(result: Any) -> TypeGuard[dict[str, Any]]:
    """Whether a ``result`` has the shape of a ``CallToolResult``: a ``content`` list of blocks with a ``type``."""
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return False
    return all(isinstance(block, dict) and isinstance(block.get("type"), str) for block in result["content"])


def _id_key(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    return json.dumps(value)


@dataclass
class Observer:
    """Pairs ``tools/call`` requests with their responses, by connection and JSON-RPC id."""

    identity: Identity
    pending: dict[tuple[str, str], PendingCall] = field(default_factory=dict)

    def request(self, payload: bytes | str, connection: str = "") -> int:
        """Note the ``tools/call`` requests in a client message; returns how many."""
        noted = 0
        for message in messages_of(payload):
            key = _id_key(message.get("id"))
            params = message.get("params")
            if message.get("method") != "tools/call" or key is None or not isinstance(params, dict):
                continue
            if len(self.pending) >= MAX_PENDING:
                self.pending.pop(next(iter(self.pending)))
            self.pending[(connection, key)] = PendingCall(
                tool=str(params.get("name", "")), arguments_digest=arguments_digest(params.get("arguments"))
            )
            noted += 1
        return noted

    def response(self, payload: bytes | str, observed_at: datetime, connection: str = "") -> list[EvidenceRecord]:
        """The records of the ``tools/call`` results in a server message (responses to other requests: none)."""
        if not self.pending:
            return []
        records: list[EvidenceRecord] = []
        for message in messages_of(payload):
            key = _id_key(message.get("id"))
            if key is None or "method" in message:
                continue
            call = self.pending.pop((connection, key), None)
            result = message.get("result")
            if call is None or not readable_result(result):
                continue
            records.append(
                EvidenceRecord(
                    tenant=self.identity.tenant,
                    principal=self.identity.principal,
                    server=self.identity.server,
                    transport=self.identity.transport,
                    tool=call.tool,
                    request_id=key,
                    arguments_digest=call.arguments_digest,
                    digest=result_digest(result),
                    is_error=result.get("isError") is True,
                    observed_at=observed_at,
                )
            )
        return records

    def forget(self, connection: str) -> None:
        """Drop the pending calls of a connection that ended."""
        for key in [k for k in self.pending if k[0] == connection]:
            del self.pending[key]
