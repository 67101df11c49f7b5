"""The OpenAI Agents SDK's ``SQLiteSession`` file, read in place.

``agent_sessions(session_id, …)`` and ``agent_messages(id INTEGER PRIMARY KEY AUTOINCREMENT, session_id,
message_data TEXT, created_at)``: each row one Responses API input item as JSON, in order of ``id``.
The position is the highest ``id`` read; a session changed when it has a row above it. A session is
imported whole (its earlier turns are the history of its new ones), through the Responses importer.
The session keeps no instructions: the agent's instructions are code, not history.

Times: each row's ``created_at`` (SQLite's ``CURRENT_TIMESTAMP`` when the SDK stored the item: UTC without a zone,
whole seconds) is written onto its item as ``created_at`` in ISO 8601 with ``+00:00``, the item-level key the
Responses importer reads — a ``function_call_output``'s observed time, a ``function_call``'s or an assistant
message's produced time. It is when the session stored the item (the SDK saves a run's items as it goes), so
times a second apart or less cannot be ordered by it. A row without a readable time leaves its item without one
(not recorded); a time the item carries itself is kept.
"""

from __future__ import annotations

import json
from typing import Any

from provenance_api.importers.common import parse_time
from provenance_api.operations.connectors.source import Changes, Conversation, Source
from provenance_api.operations.connectors.sqlite_store import SqliteStore

MESSAGES_TABLE = "agent_messages"


class AgentsSessionReader:
    importer = "openai_responses"
    noun = "sessions"

    def __init__(self, source: Source) -> None:
        self.store = SqliteStore(source, MESSAGES_TABLE)

    @property
    def caveats(self) -> list[str]:
        return self.store.caveats

    async def changes(self, since: str | None) -> Changes:
        after = int(since) if since and since.isdigit() else 0
        top = (await self.store.rows(f"SELECT MAX(id), COUNT(DISTINCT session_id) FROM {MESSAGES_TABLE}"))[0]
        if top[0] is None:
            return Changes(None, [], 0)
        restarted = top[0] < after
        changed = await self.store.rows(
            f"SELECT session_id FROM {MESSAGES_TABLE} WHERE id > ? AND id <= ? GROUP BY session_id ORDER BY MIN(id)",
            (0 if restarted else after, top[0]),
        )
        return Changes(str(top[0]), [str(row[0]) for row in changed], int(top[1]), restarted)

    async def conversation(self, ident: str, upto: str) -> Conversation:
        rows = await self.store.rows(
            f"SELECT id, message_data, created_at FROM {MESSAGES_TABLE} WHERE session_id = ? AND id <= ? ORDER BY id",
            (ident, int(upto)),
        )
        where = f"{self.store.source.name} session {ident}"
        items: list[Any] = []
        issues: list[tuple[str, str]] = []
        for row_id, data, stored_at in rows:
            try:
                items.append(_stamped(json.loads(data), stored_at))
            except (ValueError, TypeError, RecursionError) as exc:
                issues.append((f"{where}: item id {row_id}", f"message_data is not JSON ({exc}); item skipped"))
        return Conversation(ident, where, {"conversation_id": ident, "input": items}, issues)

    async def close(self) -> None:
        await self.store.close()


def _stamped(item: Any, stored_at: Any) -> Any:
    """The item with its row's time as ``created_at`` (UTC), unless it has none or carries its own."""
    when = parse_time(stored_at)
    if when is None or not isinstance(item, dict) or "created_at" in item:
        return item
    return {**item, "created_at": when.isoformat()}
