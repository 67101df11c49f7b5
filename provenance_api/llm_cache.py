"""The judgement cache: deterministic model calls answered from a shared store.

``CachingLLM`` wraps any ``estimator.llm.LLM`` (the service wraps ``LiteLLMClient``), so the
estimator is untouched. Only deterministic calls are cached — ``temperature == 0`` and not the
probe (judge and support calls); sampled calls (temperature None) and every ``probe`` call always
go to the provider. The key is a SHA-256 of the model, the provider base URL, the rendered
messages and every parameter sent (temperature, max_tokens, json_schema, schema_name). A hit is an
``LLMResponse`` with ``cached=True`` and zero usage and cost: it was not a model call and is not
billed. Entries live ``ttl_seconds``.

Stores: ``RedisJudgementCache`` (shared by every process when ``PROVENANCE_REDIS_URL`` is set) and
``SqliteJudgementCache`` (a file in the data directory: the embedded mode). A store that fails is
logged and the call goes to the provider — the cache never fails a trace.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio.to_thread
from redis.asyncio import Redis

from estimator.llm import LLM, LLMRequest, LLMResponse, Usage

log = logging.getLogger("provenance_api.llm_cache")

KEY_VERSION = 1


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    model: str


class JudgementCache(Protocol):
    async def get(self, key: str) -> CachedAnswer | None: ...

    async def put(self, key: str, answer: CachedAnswer) -> None: ...


def cacheable(request: LLMRequest) -> bool:
    """Deterministic judge/support calls only: never a sampled call, never the probe, never a call asking
    for top log-probabilities (the cache keeps the answer's text, not its distribution)."""
    return request.temperature == 0.0 and request.purpose != "probe" and not request.top_logprobs


def cache_key(model: str, api_base: str | None, request: LLMRequest) -> str:
    material = {
        "v": KEY_VERSION,
        "model": model,
        "api_base": api_base or "",
        "messages": [[m.role, m.content] for m in request.messages],
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "json_schema": request.json_schema,
        "schema_name": request.schema_name if request.json_schema is not None else None,
    }
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachingLLM:
    """An ``LLM`` that answers repeated deterministic calls from a ``JudgementCache``."""

    def __init__(self, inner: LLM, cache: JudgementCache, *, api_base: str | None = None) -> None:
        self.inner = inner
        self.cache = cache
        self.api_base = api_base

    @property
    def model(self) -> str:
        return self.inner.model

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if not cacheable(request):
            return await self.inner.complete(request)
        key = cache_key(self.inner.model, self.api_base, request)
        try:
            found = await self.cache.get(key)
        except Exception as exc:  # a broken cache must not fail the trace
            log.warning("judgement cache read failed (%s); calling the model", type(exc).__name__)
            found = None
        if found is not None:  # the trace's ledger counts it as cached: not a call, not billed
            return LLMResponse(text=found.text, usage=Usage(cost_usd=0.0), model=found.model, cached=True)
        response = await self.inner.complete(request)
        if not response.cached:
            try:
                await self.cache.put(key, CachedAnswer(response.text, response.model or self.inner.model))
            except Exception as exc:
                log.warning("judgement cache write failed (%s)", type(exc).__name__)
        return response


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
