"""The judgement cache's two stores, opened the same way for every test that needs one: the SQLite file in
a temporary directory, or a real Redis under a prefix of its own that is cleared afterwards."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from redis.asyncio import Redis

from provenance_api.storage.judgement_cache import RedisJudgementCache, SqliteJudgementCache


@asynccontextmanager
async def open_store(
    backend: str, tmp_path: Path, redis_url: str | None
) -> AsyncIterator[SqliteJudgementCache | RedisJudgementCache]:
    if backend == "sqlite":
        yield SqliteJudgementCache(tmp_path / "judgements.db", 60)
        return
    assert redis_url, "the Redis store needs the test Redis"
    client = Redis.from_url(redis_url)
    prefix = f"test-{secrets.token_hex(4)}"
    try:
        yield RedisJudgementCache(client, 60, prefix=prefix)
    finally:
        keys = [k async for k in client.scan_iter(match=f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
