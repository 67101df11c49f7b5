"""When each message of a LangGraph thread was first written: the ``ts`` of the checkpoint it first appears in.

A LangGraph checkpoint records ``ts`` (ISO 8601, UTC, microseconds: when the checkpointer wrote it) and the
whole ``messages`` channel as it stood then, so a message's time is the ``ts`` of the first checkpoint of the
thread's lineage holding it: for a tool message, when its return was written to the state (its observed time);
for an AI message, when the model's answer — a call or the reply — was (its produced time). The lineage is the
latest checkpoint's chain of ``parent_checkpoint_id`` back to the thread's first, so a branch the graph was
forked away from lends no time. Nothing is inferred: a message first seen in a checkpoint whose ``ts`` is
missing, right after a checkpoint that could not be read, or at the start of a lineage whose earlier checkpoints
are gone (pruned) may have been written earlier, so it has no time — ``not recorded``.

Messages are matched by their ``id`` (LangGraph's ``add_messages`` gives every message one), else by their whole
content; the n-th of several equal messages matches the n-th. The time is written beside the message as
``created_at`` (beside ``type`` / ``data``, or ``lc`` / ``kwargs``), the message-level key the LangChain importer
reads like the chat importers' ``created_at`` / ``timestamp``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from provenance_api.importers.common import parse_time
from provenance_api.operations.connectors.checkpoint_serde import Packed, UnreadableValue, unpacked

TIME_KEY = "created_at"


@dataclass(frozen=True)
class Link:
    """One checkpoint of a thread as stored: its id and its parent's (None: the thread's first)."""

    checkpoint_id: str
    parent_id: str | None


def lineage(links: Mapping[str, Link], latest: str) -> tuple[list[str], bool]:
    """The ids from the oldest checkpoint still stored on ``latest``'s chain to ``latest``, oldest first, and
    whether that chain is whole (it reaches the thread's first checkpoint, which has no parent)."""
    chain: list[str] = []
    visited: set[str] = set()
    at: str | None = latest
    while at is not None and at in links and at not in visited:  # a cycle (a damaged store) ends it, not whole
        chain.append(at)
        visited.add(at)
        at = links[at].parent_id
    return chain[::-1], at is None


def identity(message: Any) -> str:
    """A message's identity: its id, else its whole content."""
    if isinstance(message, dict):
        fields = message.get("kwargs") if message.get("lc") == 1 else message.get("data")
        ident = fields.get("id") if isinstance(fields, dict) else None
        if isinstance(ident, str) and ident:
            return f"id:{ident}"
    return "content:" + json.dumps(message, sort_keys=True, default=str, ensure_ascii=False)


def numbered(identities: Iterable[str]) -> list[str]:
    """Each identity numbered among the equal ones before it in the list: the n-th of equal messages is n."""
    counts: dict[str, int] = {}
    keys: list[str] = []
    for base in identities:
        counts[base] = counts.get(base, 0) + 1
        keys.append(f"{base}#{counts[base]}")
    return keys


class Identities:
    """The identities of the messages of a checkpoint read by :func:`.checkpoint_serde.shallow`: a message still
    packed is decoded once, the first time its bytes are met; later checkpoints holding the same bytes cost a
    lookup, so reading a lineage decodes each message once rather than once per checkpoint."""

    def __init__(self) -> None:
        self._known: dict[bytes, str] = {}

    def of(self, messages: list[Any]) -> list[str]:
        """Raises ``UnreadableValue`` for a packed message that does not decode."""
        out: list[str] = []
        for message in messages:
            if isinstance(message, Packed):
                if message.data not in self._known:
                    self._known[message.data] = identity(unpacked(message))
                out.append(self._known[message.data])
            else:
                out.append(identity(message))
        return out


class FirstSeen:
    """The first-seen time of each message, fed the lineage's checkpoints oldest first (one at a time, so a long
    thread is never held in memory whole); ``whole``: the lineage starts at the thread's first checkpoint."""

    def __init__(self, whole: bool) -> None:
        self.seen: dict[str, str | None] = {}
        self.gap = not whole
        self.identities = Identities()

    def add(self, ts: Any, messages: list[Any] | None) -> None:
        """One checkpoint: its ``ts`` and its messages (packed or decoded), None when it could not be read."""
        try:
            found = None if messages is None else self.identities.of(messages)
        except UnreadableValue:
            found = None
        self.add_identities(ts, found)

    def add_identities(self, ts: Any, identities: list[str] | None) -> None:
        """One checkpoint by its messages' identities (None: it could not be read)."""
        if identities is None:
            self.gap = True
            return
        when = parse_time(ts)
        shown = None if self.gap or when is None else when.isoformat()
        for key in numbered(identities):
            self.seen.setdefault(key, shown)
        self.gap = False

    def stamp(self, messages: list[Any]) -> list[Any]:
        """The messages (the latest checkpoint's), each with the time it was first written beside it where one is
        known (a time the message carries itself is kept)."""
        out: list[Any] = []
        for message, key in zip(messages, numbered(identity(m) for m in messages), strict=True):
            when = self.seen.get(key)
            if when is not None and isinstance(message, dict) and TIME_KEY not in message:
                message = {**message, TIME_KEY: when}
            out.append(message)
        return out
