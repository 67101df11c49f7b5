"""LangGraph checkpointers (``SqliteSaver``, ``PostgresSaver``), read in place without LangGraph.

A thread's state after each step is one row of ``checkpoints(thread_id, checkpoint_ns, checkpoint_id,
parent_checkpoint_id, type, checkpoint, metadata)``; ids are time-ordered (UUIDv6), so the position is
the highest ``checkpoint_id`` of the root namespace (``checkpoint_ns = ''``; subgraphs keep theirs
apart) and a thread changed when it has a checkpoint above it. Its conversation is the ``messages``
channel of its latest checkpoint, as LangChain messages. SQLite keeps channel values inside the
checkpoint (msgpack); Postgres keeps the checkpoint as JSONB and each non-primitive channel value in
``checkpoint_blobs(thread_id, checkpoint_ns, channel, version, type, blob)`` under the version the
checkpoint's ``channel_versions`` names. The system prompt lives in the graph's code unless a node puts
a ``SystemMessage`` into the state.
"""

from __future__ import annotations

import json
from typing import Any

from provenance_api.operations.connectors.checkpoint_serde import UnreadableValue, decode
from provenance_api.operations.connectors.source import Changes, Conversation, Source, SourceUnavailable
from provenance_api.operations.connectors.sqlite_store import SqliteStore

CHANNEL = "messages"


def _messages(where: str, thread: str, checkpoint: Any, blob: Any = None) -> Conversation:
    """The conversation of one decoded checkpoint (``blob``: the messages channel kept apart)."""
    values = checkpoint.get("channel_values") if isinstance(checkpoint, dict) else None
    messages = blob if blob is not None else (values or {}).get(CHANNEL) if isinstance(values, dict) else None
    if not isinstance(messages, list):
        channels = sorted((values or {}) if isinstance(values, dict) else {})
        reason = (
            f"its latest checkpoint has no {CHANNEL!r} list (channels: {', '.join(channels) or 'none'}); "
            "only graphs whose state keeps LangChain messages under 'messages' are read"
        )
        return Conversation(thread, where, None, [(where, reason)])
    return Conversation(thread, where, {"conversation_id": thread, "messages": messages})


def _unreadable(where: str, thread: str, exc: UnreadableValue) -> Conversation:
    return Conversation(thread, where, None, [(where, f"latest checkpoint unreadable: {exc}")])


class LangGraphSqliteReader:
    importer = "langchain"
    noun = "threads"

    def __init__(self, source: Source) -> None:
        self.store = SqliteStore(source, "checkpoints")

    @property
    def caveats(self) -> list[str]:
        return self.store.caveats

    async def changes(self, since: str | None) -> Changes:
        top = (
            await self.store.rows(
                "SELECT MAX(checkpoint_id), COUNT(DISTINCT thread_id) FROM checkpoints WHERE checkpoint_ns = ''"
            )
        )[0]
        if top[0] is None:
            return Changes(None, [], 0)
        restarted = bool(since) and str(top[0]) < str(since)
        changed = await self.store.rows(
            "SELECT thread_id FROM checkpoints WHERE checkpoint_ns = '' AND checkpoint_id > ? AND checkpoint_id <= ? "
            "GROUP BY thread_id ORDER BY MIN(checkpoint_id)",
            ("" if restarted else since or "", top[0]),
        )
        return Changes(str(top[0]), [str(row[0]) for row in changed], int(top[1]), restarted)

    async def conversation(self, ident: str, upto: str) -> Conversation:
        where = f"{self.store.source.name} thread {ident}"
        rows = await self.store.rows(
            "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
            "AND checkpoint_id <= ? ORDER BY checkpoint_id DESC LIMIT 1",
            (ident, upto),
        )
        if not rows:
            return Conversation(ident, where, None, [(where, "the thread's checkpoints are gone (deleted?)")])
        try:
            return _messages(where, ident, decode(rows[0][0], rows[0][1]))
        except UnreadableValue as exc:
            return _unreadable(where, ident, exc)

    async def close(self) -> None:
        await self.store.close()


class LangGraphPostgresReader:
    importer = "langchain"
    noun = "threads"

    def __init__(self, source: Source, conn: Any) -> None:
        self.source = source
        self.conn = conn

    @property
    def caveats(self) -> list[str]:
        return []

    @classmethod
    async def open(cls, source: Source) -> LangGraphPostgresReader:
        import asyncpg

        try:
            conn = await asyncpg.connect(source.url, timeout=15)
        except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
            raise SourceUnavailable(
                f"cannot connect to {source.shown_url}: {exc}",
                field="url",
                fix="check the host, port, database and credentials in the URL",
            ) from None
        reader = cls(source, conn)
        found = await reader._fetch(
            "SELECT to_regclass('checkpoints') IS NOT NULL, to_regclass('checkpoint_blobs') IS NOT NULL"
        )
        if not (found[0][0] and found[0][1]):
            await conn.close()
            from provenance_api.core.errors import InvalidInput

            raise InvalidInput(
                f"url: {source.shown_url} has no checkpoints/checkpoint_blobs tables, so it is not "
                "a LangGraph PostgresSaver database",
                field="url",
                fix="point at the database the PostgresSaver writes (run its setup() once)",
            )
        return reader

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        import asyncpg

        try:
            return list(await self.conn.fetch(sql, *args))
        except (OSError, asyncpg.PostgresError) as exc:
            raise SourceUnavailable(
                f"reading {self.source.shown_url} failed: {exc}",
                field="url",
                fix="check the database is up and the user may read the checkpoint tables",
            ) from None

    async def changes(self, since: str | None) -> Changes:
        top = (
            await self._fetch(
                "SELECT MAX(checkpoint_id), COUNT(DISTINCT thread_id) FROM checkpoints WHERE checkpoint_ns = ''"
            )
        )[0]
        if top[0] is None:
            return Changes(None, [], 0)
        restarted = bool(since) and str(top[0]) < str(since)
        changed = await self._fetch(
            "SELECT thread_id FROM checkpoints WHERE checkpoint_ns = '' AND checkpoint_id > $1 "
            "AND checkpoint_id <= $2 GROUP BY thread_id ORDER BY MIN(checkpoint_id)",
            "" if restarted else since or "",
            top[0],
        )
        return Changes(str(top[0]), [str(row[0]) for row in changed], int(top[1]), restarted)

    async def conversation(self, ident: str, upto: str) -> Conversation:
        where = f"{self.source.name} thread {ident}"
        rows = await self._fetch(
            "SELECT checkpoint::text FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '' "
            "AND checkpoint_id <= $2 ORDER BY checkpoint_id DESC LIMIT 1",
            ident,
            upto,
        )
        if not rows:
            return Conversation(ident, where, None, [(where, "the thread's checkpoints are gone (deleted?)")])
        try:
            checkpoint = json.loads(rows[0][0])
            version = (checkpoint.get("channel_versions") or {}).get(CHANNEL)
            values = checkpoint.get("channel_values") or {}
            if version is None or CHANNEL in values:
                return _messages(where, ident, checkpoint)
            blobs = await self._fetch(
                "SELECT type, blob FROM checkpoint_blobs WHERE thread_id = $1 AND checkpoint_ns = '' "
                "AND channel = $2 AND version = $3",
                ident,
                CHANNEL,
                str(version),
            )
            if not blobs:
                return Conversation(
                    ident,
                    where,
                    None,
                    [(where, f"the {CHANNEL!r} value of version {version} is missing from checkpoint_blobs")],
                )
            return _messages(where, ident, checkpoint, decode(blobs[0][0], blobs[0][1]))
        except UnreadableValue as exc:
            return _unreadable(where, ident, exc)
        except (ValueError, AttributeError) as exc:
            return _unreadable(where, ident, UnreadableValue(f"checkpoint is not a JSON object: {exc}"))

    async def close(self) -> None:
        await self.conn.close()
