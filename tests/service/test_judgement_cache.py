"""The judgement cache: deterministic judge/support calls answered from Redis or SQLite, sampled calls
and the probe never; a repeated trace of the same sentence costs no model call and gives the same result."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from support.api_server import SMALL_CLAIM, InProcessApi, KeyedJudge, small_turn
from support.fake_openai import FakeOpenAI, FakeReply
from support.judgement_stores import open_store

from estimator.ledger import CallEvent, CallLedger
from estimator.seams.llm import LLMRequest, Message, ScriptedLLM
from provenance_api.providers.llm_cache import CachingLLM, JudgementCache, cache_key
from provenance_api.storage.judgement_cache import RedisJudgementCache, SqliteJudgementCache

JUDGE = LLMRequest(messages=(Message("system", "judge"), Message("user", "claim + sources")), purpose="judge")


class Clock:
    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[JudgementCache]:
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    async with open_store(request.param, tmp_path, redis_url) as opened:
        yield opened


def numbered() -> ScriptedLLM:
    """Answers with a running number, so a cached answer is told apart from a fresh one."""
    count = [0]

    def script(request: LLMRequest) -> str:
        count[0] += 1
        return f"answer {count[0]}"

    return ScriptedLLM(script, model="openai/judge")


async def test_a_repeated_deterministic_call_is_answered_from_the_cache(store: JudgementCache) -> None:
    inner = numbered()
    llm = CachingLLM(inner, store)
    first = await llm.complete(JUDGE)
    again = await llm.complete(JUDGE)
    assert (first.text, first.cached) == ("answer 1", False) and first.usage.input_tokens > 0
    assert (again.text, again.cached) == ("answer 1", True)
    assert again.usage.input_tokens == 0 and again.usage.cost_usd == 0.0
    assert len(inner.calls) == 1
    # another client on the same store (another process) sees the same entry
    other = CachingLLM(numbered(), store)
    assert (await other.complete(JUDGE)).text == "answer 1"


async def test_sampled_calls_and_the_probe_are_never_cached(store: JudgementCache) -> None:
    inner = numbered()
    llm = CachingLLM(inner, store)
    sampled = LLMRequest(messages=JUDGE.messages, purpose="judge", temperature=None)
    probe = LLMRequest(messages=JUDGE.messages, purpose="probe", temperature=0.0)
    texts = [(await llm.complete(r)).text for r in (sampled, sampled, probe, probe)]
    expected_digit = LLMRequest(messages=JUDGE.messages, purpose="judge", temperature=0.0, top_logprobs=20)
    texts += [(await llm.complete(expected_digit)).text for _ in range(2)]
    assert texts == ["answer 1", "answer 2", "answer 3", "answer 4", "answer 5", "answer 6"]


async def test_every_parameter_sent_is_part_of_the_key(store: JudgementCache) -> None:
    variants = [
        JUDGE,
        LLMRequest(messages=JUDGE.messages, purpose="support", max_tokens=50),
        LLMRequest(messages=JUDGE.messages, json_schema={"type": "object"}),
        LLMRequest(messages=JUDGE.messages, json_schema={"type": "object"}, schema_name="other"),
        LLMRequest(messages=(Message("system", "judge"), Message("user", "claim + other sources"))),
        LLMRequest(messages=(Message("user", "judge"), Message("user", "claim + sources"))),
    ]
    keys = {cache_key("openai/judge", None, r) for r in variants}
    keys |= {cache_key("openai/other", None, JUDGE), cache_key("openai/judge", "http://elsewhere/v1", JUDGE)}
    assert len(keys) == len(variants) + 2
    # purpose is not sent to the provider: a judge and an "other" call with the same prompt share an entry
    assert cache_key("m", None, JUDGE) == cache_key("m", None, LLMRequest(messages=JUDGE.messages))
    inner = numbered()
    llm = CachingLLM(inner, store)
    for request in variants:
        await llm.complete(request)
    assert len(inner.calls) == len(variants)


async def test_a_cache_hit_is_counted_by_the_ledger_as_cached_not_made(store: JudgementCache) -> None:
    inner = numbered()
    llm = CachingLLM(inner, store)
    seen: list[str] = []

    async def hook(ledger: CallLedger, event: CallEvent) -> None:
        seen.append(event.outcome)

    ledger = CallLedger(planned=2, concurrency=2, on_call=hook)
    await ledger.call(llm, JUDGE)
    await ledger.call(llm, JUDGE)  # a hit: answered without a model call
    await ledger.call(llm, JUDGE)  # still within the plan of 2: hits do not spend it
    assert seen == ["sending", "answered", "sending", "cached", "sending", "cached"] and len(inner.calls) == 1
    assert (ledger.made, ledger.cached, ledger.billed, ledger.refused) == (1, 2, 1, 0)


async def test_sqlite_entries_expire_after_their_ttl(tmp_path: Path) -> None:
    clock = Clock()
    llm = CachingLLM(numbered(), SqliteJudgementCache(tmp_path / "c.db", 60, clock=clock))
    await llm.complete(JUDGE)
    clock.now += 59
    assert (await llm.complete(JUDGE)).cached
    clock.now += 2
    assert not (await llm.complete(JUDGE)).cached


async def test_redis_entries_carry_the_ttl(redis_url: str) -> None:
    client = Redis.from_url(redis_url)
    prefix = f"test-{secrets.token_hex(4)}"
    try:
        await CachingLLM(numbered(), RedisJudgementCache(client, 300, prefix=prefix)).complete(JUDGE)
        keys = [k async for k in client.scan_iter(match=f"{prefix}:judgement:*")]
        assert len(keys) == 1 and 0 < await client.ttl(keys[0]) <= 300
        await client.delete(*keys)
    finally:
        await client.aclose()


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    """The result without its accounting (calls, usage, cost), which a cached run changes."""
    return {k: v for k, v in result.items() if k not in ("calls", "usage", "cost_usd")}


def test_a_repeated_trace_costs_no_model_call_and_gives_the_same_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = KeyedJudge()
    with FakeOpenAI(lambda req: FakeReply(text=judge.openai(req)), api_key="sk-cache") as provider:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-cache")
        monkeypatch.setenv("OPENAI_API_BASE", provider.base_url)
        with InProcessApi(tmp_path, warm_up=False) as srv, srv.client(srv.admin_key, timeout=60) as api:
            api.post("/v1/turns", json=small_turn())
            done = []
            for _ in range(2):
                quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM})
                started = api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
                done.append(api.get(started.headers["location"], params={"wait": "true"}).json())
                if len(done) == 1:
                    answered = provider.answered
    first, second = done
    assert first["status"] == second["status"] == "succeeded"
    assert first["calls"]["billed"] == first["calls"]["made"] == answered > 0
    assert first["result"]["calls"]["cached"] == 0
    assert second["calls"]["billed"] == second["calls"]["made"] == 0 and provider.answered == answered
    # a cache hit is cached, not made: the result's account and the job's agree (one meter)
    assert second["result"]["calls"]["cached"] == answered and second["result"]["calls"]["made"] == 0
    assert comparable(second["result"]) == comparable(first["result"])
    assert (tmp_path / "judgements.db").exists()
