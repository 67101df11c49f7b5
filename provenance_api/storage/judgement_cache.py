"""Where the judgement cache keeps its answers: Redis (shared by every process) or a SQLite file of its own
(the embedded mode). ``provenance_api.providers.llm_cache.CachingLLM`` decides what is cached and under
which key; these stores only keep entries for ``ttl_seconds``."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
from redis.asyncio import Redis


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    model: str


class RedisJudgementCache:
    """Entries as Redis strings with an expiry: ``<prefix>:judgement:<sha256>``."""

    def __init__(self, redis: Redis, ttl_seconds: int, *, prefix: str = "provenance") -> None:
        self.redis = redis
        self.ttl = ttl_seconds
        self.prefix = prefix

    def _key(self, key: str) -> str:
        return f"{self.prefix}:judgement:{key}"

    async def get(self, key: str) -> CachedAnswer | None:
        raw = await self.redis.get(self._key(key))
        if raw is None:
            return None
        data = json.loads(raw)
        return CachedAnswer(str(data["text"]), str(data["model"]))

    async def put(self, key: str, answer: CachedAnswer) -> None:
        value = json.dumps({"text": answer.text, "model": answer.model})
        await self.redis.set(self._key(key), value, ex=self.ttl)


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
            conn.execute(
                "CREATE TABLE IF NOT EXISTS judgements "
                "(key TEXT PRIMARY KEY, text TEXT NOT NULL, model TEXT NOT NULL, expires_at REAL NOT NULL)"
            )
            conn.commit()
            self._ready = True
        return conn

    def _get(self, key: str) -> CachedAnswer | None:
        conn = self._connect()
        try:
            row: Any = conn.execute(
                "SELECT text, model, expires_at FROM judgements WHERE key = ?", (key,)
            ).fetchone()
            if row is None:
                return None
            if row[2] <= self._clock():
                conn.execute("DELETE FROM judgements WHERE key = ? AND expires_at <= ?", (key, self._clock()))
                conn.commit()
                return None
            return CachedAnswer(str(row[0]), str(row[1]))
        finally:
            conn.close()

    def _put(self, key: str, answer: CachedAnswer) -> None:
        conn = self._connect()
        try:
            now = self._clock()
            conn.execute(
                "INSERT OR REPLACE INTO judgements (key, text, model, expires_at) VALUES (?, ?, ?, ?)",
                (key, answer.text, answer.model, now + self.ttl),
            )
            conn.execute("DELETE FROM judgements WHERE expires_at <= ?", (now,))
            conn.commit()
        finally:
            conn.close()

    async def get(self, key: str) -> CachedAnswer | None:
        return await anyio.to_thread.run_sync(self._get, key)

    async def put(self, key: str, answer: CachedAnswer) -> None:
        await anyio.to_thread.run_sync(self._put, key, answer)
