"""LangGraph checkpointers (``SqliteSaver``, ``PostgresSaver``), read in place without LangGraph.

A thread's state after each step is one row of ``checkpoints(thread_id, checkpoint_ns, checkpoint_id,
parent_checkpoint_id, type, checkpoint, metadata)``; ids are time-ordered (UUIDv6), so the position is
the highest ``checkpoint_id`` of the root namespace (``checkpoint_ns = ''``; subgraphs keep theirs
apart) and a thread changed when it has a checkpoint above it. Its conversation is the ``messages``
channel of its latest checkpoint, as LangChain messages. SQLite keeps channel values inside the
checkpoint (msgpack); Postgres keeps the checkpoint as JSONB and each non-primitive channel value in
``checkpoint_blobs(thread_id, checkpoint_ns, channel, version, type, blob)`` under the version the
checkpoint's ``channel_versions`` names. The system prompt lives in the graph's code unless a node puts
a ``SystemMessage`` into the state. Each message carries the ``ts`` of the checkpoint it first appears in
(:mod:`.checkpoint_times`): a tool return's observed time, a call's or the answer's produced time. For that every
checkpoint of the thread's lineage is read, :data:`BATCH` at a time, with its messages left packed and each decoded
once; since a checkpointer keeps the whole state in every checkpoint, the bytes read grow with the square of a
thread's length (a 100-turn ReAct thread, 500 checkpoints and 23 MB in SQLite, reads in a few tenths of a second).
"""

from __future__ import annotations

import json
from typing import Any

from provenance_api.operations.connectors.checkpoint_serde import UnreadableValue, decode, shallow
from provenance_api.operations.connectors.checkpoint_times import FirstSeen, Link, lineage
from provenance_api.operations.connectors.source import Changes, Conversation, Source, SourceUnavailable
from provenance_api.operations.connectors.sqlite_store import SqliteStore

CHANNEL = "messages"
BATCH = 64
"""Checkpoints read per query when timing a thread's messages: a long thread is never held in memory whole."""


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


def _ts(checkpoint: Any) -> Any:
    return checkpoint.get("ts") if isinstance(checkpoint, dict) else None


def _stamped(conversation: Conversation, seen: FirstSeen) -> Conversation:
    """The conversation with each of its messages' first-seen time written beside it."""
    stamped = {**conversation.obj, CHANNEL: seen.stamp(conversation.obj[CHANNEL])}
    return Conversation(conversation.ident, conversation.where, stamped, conversation.issues)


def _links(rows: list[Any]) -> dict[str, Link]:
    return {str(row[0]): Link(str(row[0]), str(row[1]) if row[1] else None) for row in rows}


def _batches(chain: list[str]) -> list[list[str]]:
    return [chain[i : i + BATCH] for i in range(0, len(chain), BATCH)]


def _channel(checkpoint: Any, blob: Any = None) -> list[Any]:
    """The messages list of a decoded checkpoint (``blob``: kept apart); none yet (the input checkpoint): empty."""
    values = checkpoint.get("channel_values") if isinstance(checkpoint, dict) else None
    found = blob if blob is not None else values.get(CHANNEL) if isinstance(values, dict) else None
    return found if isinstance(found, list) else []


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
            "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
            "AND checkpoint_id <= ? ORDER BY checkpoint_id",
            (ident, upto),
        )
        latest = await self.store.rows(
            "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
            (ident, str(rows[-1][0]) if rows else ""),
        )
        if not latest:
            return Conversation(ident, where, None, [(where, "the thread's checkpoints are gone (deleted?)")])
        try:
            conversation = _messages(where, ident, decode(latest[0][0], latest[0][1]))
        except UnreadableValue as exc:
            return _unreadable(where, ident, exc)
        if conversation.obj is None:
            return conversation
        chain, whole = lineage(_links(rows), str(rows[-1][0]))
        seen = FirstSeen(whole)
        for batch in _batches(chain):
            marks = ", ".join("?" * len(batch))
            found = await self.store.rows(
                "SELECT checkpoint_id, type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
                f"AND checkpoint_id IN ({marks})",
                (ident, *batch),
            )
            stored = {str(row[0]): row for row in found}
            for checkpoint_id in batch:
                row = stored.get(checkpoint_id)  # gone since the ids were read: not readable
                try:
                    checkpoint = shallow(row[1], row[2]) if row is not None else None
                except UnreadableValue:
                    checkpoint = None
                seen.add(_ts(checkpoint), None if checkpoint is None else _channel(checkpoint))
        return _stamped(conversation, seen)

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
            "SELECT checkpoint_id, parent_checkpoint_id, checkpoint::text FROM checkpoints WHERE thread_id = $1 "
            "AND checkpoint_ns = '' AND checkpoint_id <= $2 ORDER BY checkpoint_id",
            ident,
            upto,
        )
        if not rows:
            return Conversation(ident, where, None, [(where, "the thread's checkpoints are gone (deleted?)")])
        try:
            checkpoint = json.loads(rows[-1][2])
            version = (checkpoint.get("channel_versions") or {}).get(CHANNEL)
            values = checkpoint.get("channel_values") or {}
            if version is None or CHANNEL in values:
                conversation = _messages(where, ident, checkpoint)
            else:
                blobs = await self._blobs(ident, [str(version)])
                if str(version) not in blobs:
                    missing = f"the {CHANNEL!r} value of version {version} is missing from checkpoint_blobs"
                    return Conversation(ident, where, None, [(where, missing)])
                conversation = _messages(where, ident, checkpoint, decode(*blobs[str(version)]))
        except UnreadableValue as exc:
            return _unreadable(where, ident, exc)
        except (ValueError, AttributeError) as exc:
            return _unreadable(where, ident, UnreadableValue(f"checkpoint is not a JSON object: {exc}"))
        if conversation.obj is None:
            return conversation
        return _stamped(conversation, await self._first_seen(ident, rows))

    async def _blobs(self, ident: str, versions: list[str]) -> dict[str, tuple[Any, Any]]:
        """The stored ``messages`` values of ``versions``: ``{version: (type, blob)}``."""
        found = await self._fetch(
            "SELECT version, type, blob FROM checkpoint_blobs WHERE thread_id = $1 AND checkpoint_ns = '' "
            "AND channel = $2 AND version = ANY($3::text[])",
            ident,
            CHANNEL,
            versions,
        )
        return {str(row[0]): (row[1], row[2]) for row in found}

    async def _first_seen(self, ident: str, rows: list[Any]) -> FirstSeen:
        """The lineage of the latest of ``rows`` read oldest first; each version's blob read once, in batches."""
        chain, whole = lineage(_links(rows), str(rows[-1][0]))
        stored = {str(row[0]): row[2] for row in rows}
        seen = FirstSeen(whole)
        versions: dict[str, list[str] | None] = {}  # a version's messages' identities (None: unreadable)
        for batch in _batches(chain):
            read: list[tuple[Any, Any, str | None]] = []  # (ts, inline messages, version)
            for checkpoint_id in batch:
                try:
                    checkpoint = json.loads(stored[checkpoint_id])
                    version = (checkpoint.get("channel_versions") or {}).get(CHANNEL)
                    inline = version is None or CHANNEL in (checkpoint.get("channel_values") or {})
                    read.append(
                        (_ts(checkpoint), _channel(checkpoint) if inline else None, None if inline else str(version))
                    )
                except (ValueError, AttributeError):
                    read.append((None, None, None))
            wanted = sorted({v for _, _, v in read if v is not None and v not in versions})
            blobs = await self._blobs(ident, wanted) if wanted else {}
            for version in wanted:  # a version missing from checkpoint_blobs is not readable
                try:
                    value = shallow(*blobs[version]) if version in blobs else None
                    versions[version] = seen.identities.of(_channel({}, value)) if version in blobs else None
                except UnreadableValue:
                    versions[version] = None
            for ts, inline, version in read:
                if version is not None:
                    seen.add_identities(ts, versions[version])
                else:
                    seen.add(ts, inline)
        return seen

    async def close(self) -> None:
        await self.conn.close()
