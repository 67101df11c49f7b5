"""Where the judgement cache keeps its answers: Redis (shared by every process) or a SQLite file of its own
(the embedded mode). ``provenance_api.providers.llm_cache.CachingLLM`` decides what is cached and under
which key; these stores only keep entries for ``ttl_seconds``.

Every entry lives in a *scope*: ``tenant_scope(tenant)`` (one tenant's entries, the default) or
``SHARED_SCOPE`` (all tenants, when the operator sets ``PROVENANCE_JUDGEMENT_CACHE_SHARED``). A lookup in
one scope never sees another's entries, and ``purge(scope)`` removes a scope's entries at once (e.g. when a
tenant's turns are deleted): ``await judgement_store(settings, redis).purge(tenant_scope(tenant))``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
from redis.asyncio import Redis

from provenance_api.core.settings import Settings

SHARED_SCOPE = "shared"
"""The scope of every tenant's entries when the operator shares the cache across tenants."""


def tenant_scope(tenant: str) -> str:
    """One tenant's scope: a digest of its name, so any tenant name is a safe Redis key part and glob."""
    return "t-" + hashlib.sha256(tenant.encode("utf-8")).hexdigest()[:32]


def turn_scope(tenant: str, turn_id: str) -> str:
    """The scope of one stored turn's judgements within its tenant: deleting the turn purges exactly these."""
    material = tenant.encode("utf-8") + b"\x1f" + turn_id.encode("utf-8")
    return "u-" + hashlib.sha256(material).hexdigest()[:32]


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    model: str


class RedisJudgementCache:
    """Entries as Redis strings with an expiry: ``<prefix>:judgement:<scope>:<sha256>``."""

    def __init__(self, redis: Redis, ttl_seconds: int, *, prefix: str = "provenance") -> None:
        self.redis = redis
        self.ttl = ttl_seconds
        self.prefix = prefix

    def _key(self, scope: str, key: str) -> str:
        return f"{self.prefix}:judgement:{scope}:{key}"

    async def get(self, scope: str, key: str) -> CachedAnswer | None:
        raw = await self.redis.get(self._key(scope, key))
        if raw is None:
            return None
        data = json.loads(raw)
        return CachedAnswer(str(data["text"]), str(data["model"]))

    async def put(self, scope: str, key: str, answer: CachedAnswer) -> None:
        value = json.dumps({"text": answer.text, "model": answer.model})
        await self.redis.set(self._key(scope, key), value, ex=self.ttl)

    async def purge(self, scope: str) -> int:
        removed = 0
        batch: list[Any] = []
        async for found in self.redis.scan_iter(match=self._key(scope, "*"), count=500):
            batch.append(found)
            if len(batch) >= 500:
                removed += int(await self.redis.delete(*batch))
                batch = []
        if batch:
            removed += int(await self.redis.delete(*batch))
        return removed


class SqliteJudgementCache:
    """Entries in a small SQLite file of their own (WAL), expired rows removed as they are met."""

    def __init__(self, path: Path, ttl_seconds: int, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.ttl = ttl_seconds
        self._clock = clock
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=15)
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("DROP TABLE IF EXISTS judgements")  # entries of the earlier, unscoped layout
            conn.execute(
                "CREATE TABLE IF NOT EXISTS judgement_entries (scope TEXT NOT NULL, key TEXT NOT NULL, "
                "text TEXT NOT NULL, model TEXT NOT NULL, expires_at REAL NOT NULL, PRIMARY KEY (scope, key))"
            )
            conn.commit()
            self._ready = True
        return conn

    def _get(self, scope: str, key: str) -> CachedAnswer | None:
        conn = self._connect()
        try:
            row: Any = conn.execute(
                "SELECT text, model, expires_at FROM judgement_entries WHERE scope = ? AND key = ?", (scope, key)
            ).fetchone()
            if row is None:
                return None
            if row[2] <= self._clock():
                conn.execute(
                    "DELETE FROM judgement_entries WHERE scope = ? AND key = ? AND expires_at <= ?",
                    (scope, key, self._clock()),
                )
                conn.commit()
                return None
            return CachedAnswer(str(row[0]), str(row[1]))
        finally:
            conn.close()

    def _put(self, scope: str, key: str, answer: CachedAnswer) -> None:
        conn = self._connect()
        try:
            now = self._clock()
            conn.execute(
                "INSERT OR REPLACE INTO judgement_entries (scope, key, text, model, expires_at) VALUES (?, ?, ?, ?, ?)",
                (scope, key, answer.text, answer.model, now + self.ttl),
            )
            conn.execute("DELETE FROM judgement_entries WHERE expires_at <= ?", (now,))
            conn.commit()
        finally:
            conn.close()

    def _purge(self, scope: str) -> int:
        conn = self._connect()
        try:
            removed = conn.execute("DELETE FROM judgement_entries WHERE scope = ?", (scope,)).rowcount
            conn.commit()
            return int(removed)
        finally:
            conn.close()

    async def get(self, scope: str, key: str) -> CachedAnswer | None:
        return await anyio.to_thread.run_sync(self._get, scope, key)

    async def put(self, scope: str, key: str, answer: CachedAnswer) -> None:
        await anyio.to_thread.run_sync(self._put, scope, key, answer)

    async def purge(self, scope: str) -> int:
        return await anyio.to_thread.run_sync(self._purge, scope)


def judgement_store(settings: Settings, redis: Redis | None) -> RedisJudgementCache | SqliteJudgementCache | None:
    """The service's store: Redis when configured (shared by every process), else a SQLite file in the data
    directory; None when the cache is disabled."""
    if not settings.judgement_cache:
        return None
    ttl = settings.judgement_cache_ttl_seconds
    if redis is not None:
        return RedisJudgementCache(redis, ttl, prefix=settings.redis_prefix)
    return SqliteJudgementCache(settings.owner_only_file("judgements.db"), ttl)
