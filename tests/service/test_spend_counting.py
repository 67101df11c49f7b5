"""Spend is counted from what the provider was sent, over real HTTP against the service.

The provider is ``FakeOpenAI`` on loopback (only the model's judgement is scripted); the service runs its own
``LiteLLMClient`` (retries, fallbacks), ledger, database budget and call log.

* A provider that omits ``usage`` is still billed: each answer at the request's and the answer's counted
  tokens at the model's price, marked ``estimated`` on the call and the result, and the USD budget settles
  to that estimate.
* Every HTTP attempt is a made call: under 0 %, 25 % and 100 % HTTP 500s the requests the provider
  received equal ``calls.made``, never more than planned, and the call budget keeps exactly them.
* After a SIGKILL mid-trace, the restart settles the trace from its persisted call log: billed and made
  equal the requests the provider received, and ``/calls`` shows every request as sent.
* An operator-priced model (``PROVENANCE_MODEL_PRICES``) is priced everywhere: the result, every call,
  the metrics and the budget show the same USD.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_server import (
    SMALL_CLAIM,
    TEST_PRICES,
    InProcessApi,
    KeyedJudge,
    ServerProcess,
    make_key,
    small_turn,
)
from support.fake_openai import FakeOpenAI, FakeReply
from support.fault_provider import FaultInjector, FaultRates

from estimator.cost import request_tokens
from estimator.seams.llm import LLMRequest, Message
from provenance_api.core.settings import Settings
from provenance_api.providers.tokenizer import TiktokenTokenizer
from provenance_api.storage.db_limits import DatabaseLimiter
from provenance_api.storage.session import Database

pytestmark = [pytest.mark.timeout(300)]

MODEL = "openai/fake-judge"
PROVIDER_KEY = "sk-spend-counting-key-0001"
PRICE_IN = TEST_PRICES[MODEL]["input_per_mtok"] / 1e6
PRICE_OUT = TEST_PRICES[MODEL]["output_per_mtok"] / 1e6
WINDOW = 3600
CALL_BUDGET = 1000


def _request(body: dict[str, Any]) -> LLMRequest:
    return LLMRequest(messages=tuple(Message(m["role"], m["content"]) for m in body["messages"]))


def counted_cost(bodies: list[dict[str, Any]], judge: KeyedJudge) -> float:
    """What the provider's answers cost at the operator's price, counted from the requests as sent and the
    judge's answers (cl100k_base, each message with its overhead)."""
    tok = TiktokenTokenizer()
    total = 0.0
    for body in bodies:
        total += request_tokens(_request(body), tok) * PRICE_IN + tok.count(judge.openai(body)) * PRICE_OUT
    return total


def usd_spent(data_dir: Path, budget_key: str, **settings: Any) -> tuple[int, float]:
    """(calls kept, USD kept) of ``budget_key``'s window in the service's database budget."""

    async def read() -> tuple[int, float]:
        db = Database(Settings(data_dir=data_dir, **settings).effective_database_url)
        try:
            state = await DatabaseLimiter(db, CALL_BUDGET, WINDOW, max_usd_per_user=100.0).state(budget_key)
            return CALL_BUDGET - state.remaining, state.usd_spent
        finally:
            await db.dispose()

    return asyncio.run(read())


def run_trace(api: httpx.Client, turn_id: str = "t-small-1") -> dict[str, Any]:
    q = api.post("/v1/quotes", json={"turn_id": turn_id, "sentence": SMALL_CLAIM, "model": MODEL})
    assert q.status_code == 201, q.text
    t = api.post("/v1/traces", json={"quote_id": q.json()["quote_id"]})
    assert t.status_code == 202, t.text
    state: dict[str, Any] = api.get(t.headers["location"], params={"wait": "true", "timeout": 20}).json()
    while state["status"] in ("queued", "running"):
        state = api.get(t.headers["location"], params={"wait": "true", "timeout": 20}).json()
    return state


def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: FakeOpenAI, **settings: Any) -> InProcessApi:
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    monkeypatch.setenv("OPENAI_API_BASE", provider.base_url)
    return InProcessApi(
        tmp_path,
        warm_up=False,
        judge_timeout_seconds=5.0,
        params={"rate_max_calls": CALL_BUDGET, "rate_window_seconds": WINDOW},
        budget_usd_per_user=100.0,
        **settings,
    )


def test_a_provider_that_omits_usage_is_billed_at_the_counted_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = KeyedJudge()
    no_usage = lambda index, request: FakeReply(include_usage=False)  # noqa: E731
    with FakeOpenAI(judge.openai, faults=no_usage, api_key=PROVIDER_KEY) as provider:
        with service(tmp_path, monkeypatch, provider) as srv, srv.client(srv.key("acme", "alice")) as api:
            assert api.post("/v1/turns", json=small_turn()).status_code == 201
            done = run_trace(api)
            calls = api.get(f"/v1/traces/{done['trace_id']}/calls").json()
        sent = provider.requests
    assert provider.answered == 0 and sent  # the provider reported no usage at all
    assert done["status"] == "succeeded", done
    result = done["result"]
    expected = counted_cost(sent, judge)
    assert done["calls"]["billed"] == done["calls"]["made"] == len(sent)
    assert result["cost_usd"] == pytest.approx(expected, rel=1e-6, abs=1e-9) and expected > 0
    assert result["usage"]["estimated"] is True
    assert calls["total"] == len(sent) and all(c["estimated"] for c in calls["calls"])
    assert sum(c["cost_usd"] for c in calls["calls"]) == pytest.approx(expected, rel=1e-6)
    kept_calls, kept_usd = usd_spent(tmp_path, "acme/alice")
    assert kept_calls == len(sent) and kept_usd == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("rate", [0.0, 0.25, 1.0])
def test_every_http_attempt_is_a_made_call_and_the_budget_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rate: float
) -> None:
    judge = KeyedJudge()
    faults = FaultInjector(FaultRates(rate_500=rate), lambda body, tag: judge.openai(body), seed=11)
    turns = 1 if rate == 1.0 else 3
    with FakeOpenAI(fault_fn=faults, api_key=PROVIDER_KEY) as provider:
        with service(tmp_path, monkeypatch, provider) as srv, srv.client(srv.key("acme", "bob")) as api:
            states = []
            for i in range(turns):
                assert api.post("/v1/turns", json=small_turn(f"t-fault-{i}")).status_code == 201
                before = len(provider.requests)
                state = run_trace(api, f"t-fault-{i}")
                states.append((state, len(provider.requests) - before))
            metrics = api.get("/metrics").text
        received = len(provider.requests)
    for state, requests in states:
        calls = state["calls"]
        assert calls["made"] == requests, (rate, calls, requests)  # every HTTP request is a made call
        assert calls["made"] <= calls["planned"]
        assert calls["billed"] == calls["made"] - calls["failed"]
        if state["result"] is not None:
            assert state["result"]["calls"]["made"] == calls["made"]
    if rate == 1.0:
        assert states[0][0]["status"] == "failed" and states[0][0]["calls"]["billed"] == 0
    made = sum(s["calls"]["made"] for s, _ in states)
    assert made == received
    kept_calls, _ = usd_spent(tmp_path, "acme/bob")
    assert kept_calls == received  # the call budget binds on every request sent
    failed_metric = re.search(r'provenance_model_calls_total\{outcome="failed"\} ([0-9.]+)', metrics)
    assert failed_metric is not None
    assert float(failed_metric.group(1)) == sum(s["calls"]["failed"] for s, _ in states)


@pytest.mark.parametrize("attempts", [1, 2])
def test_the_operator_sets_how_many_http_attempts_a_failing_call_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempts: int
) -> None:
    overloaded = lambda index, request: FakeReply.error(503, "overloaded")  # noqa: E731
    with FakeOpenAI(KeyedJudge().openai, faults=overloaded, api_key=PROVIDER_KEY) as provider:
        with (
            service(tmp_path, monkeypatch, provider, provider_max_attempts=attempts) as srv,
            srv.client(srv.key("acme", "carol")) as api,
        ):
            assert api.post("/v1/turns", json=small_turn()).status_code == 201
            state = run_trace(api)
            calls = api.get(f"/v1/traces/{state['trace_id']}/calls").json()
        sent = len(provider.requests)
    assert state["status"] == "failed" and state["calls"]["made"] == sent, state
    taken = [c["attempts"] for c in calls["calls"]]
    print(f"provider_max_attempts={attempts}: {sent} HTTP requests for {len(taken)} failed calls, attempts {taken}")
    assert sum(taken) == sent and max(taken) == attempts  # a call stops at the limit (or when the trace ends)


def test_sigkill_mid_trace_settles_from_the_persisted_call_log(tmp_path: Path) -> None:
    judge = KeyedJudge()
    # the first two calls answer at once, the rest hang: the trace is surely mid-run when killed
    slow_after_two = lambda index, request: None if index < 2 else FakeReply(delay=30)  # noqa: E731
    data = tmp_path / "data"
    with FakeOpenAI(judge.openai, faults=slow_after_two, api_key=PROVIDER_KEY) as provider:
        env = {
            "OPENAI_API_KEY": PROVIDER_KEY,
            "OPENAI_API_BASE": provider.base_url,
            "PROVENANCE_BUDGET_USD_PER_USER": "100",
            "PROVENANCE_PARAMS": json.dumps({"rate_max_calls": CALL_BUDGET, "rate_window_seconds": WINDOW}),
            "PROVENANCE_WARM_UP": "false",
        }
        data.mkdir(parents=True)
        key = make_key(data, "acme", "carol")  # before the service opens the database
        server = ServerProcess(data, env=env).start()
        try:
            api = httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
            assert api.post("/v1/turns", json=small_turn()).status_code == 201
            quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "model": MODEL})
            location = api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]}).headers["location"]
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                state = api.get(location).json()
                if state["calls"]["billed"] >= 2 and provider.in_flight >= 1:
                    break
                time.sleep(0.05)
            time.sleep(0.3)  # every call the trace could send is in flight
            server.kill()
            api.close()
            sent = provider.requests
            answered = provider.answered
        finally:
            server.stop()

    restarted = ServerProcess(data, env={**env, "OPENAI_API_BASE": "http://127.0.0.1:9"}).start()
    try:
        with httpx.Client(base_url=restarted.base_url, headers={"Authorization": f"Bearer {key}"}) as api:
            job = api.get(location).json()
            calls = api.get(f"{location}/calls").json()
    finally:
        restarted.stop()
    assert answered == 2 and len(sent) > answered
    assert job["status"] == "interrupted" and job["result"] is None
    # every request the provider received is made and billed: an answer in flight at the kill may be charged
    assert job["calls"]["made"] == job["calls"]["billed"] == len(sent), (job["calls"], len(sent))
    assert calls["total"] == calls["kept"] == len(sent)
    shown = sorted(json.dumps([[m["role"], m["content"]] for m in c["prompt"]]) for c in calls["calls"])
    assert shown == sorted(json.dumps([[m["role"], m["content"]] for m in body["messages"]]) for body in sent)
    in_flight = [c for c in calls["calls"] if c["outcome"] != "answered"]
    assert len(in_flight) == len(sent) - answered
    assert all(c["outcome"] == "failed_billed" and c["estimated"] and c["cost_usd"] > 0 for c in in_flight)
    logged = sum(c["cost_usd"] for c in calls["calls"])
    kept_calls, kept_usd = usd_spent(data, "acme/carol")
    assert kept_calls == len(sent) and kept_usd == pytest.approx(logged, rel=1e-6)


def test_an_operator_priced_model_is_priced_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    judge = KeyedJudge()
    with FakeOpenAI(judge.openai, api_key=PROVIDER_KEY) as provider:
        with service(tmp_path, monkeypatch, provider) as srv, srv.client(srv.key("acme", "dave")) as api:
            assert api.post("/v1/turns", json=small_turn()).status_code == 201
            quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "model": MODEL})
            done = run_trace(api)
            calls = api.get(f"/v1/traces/{done['trace_id']}/calls").json()
            metrics = api.get("/metrics").text
            markdown = api.get(f"/v1/traces/{done['trace_id']}/export", params={"format": "markdown"}).text
        sent = provider.requests
    assert done["status"] == "succeeded"
    assert quote.json()["cost_usd"] is not None
    usage = done["result"]["usage"]
    priced = usage["input_tokens"] * PRICE_IN + usage["output_tokens"] * PRICE_OUT
    assert priced > 0 and done["result"]["cost_usd"] == pytest.approx(priced, rel=1e-6)
    assert usage["estimated"] is False
    assert len(calls["calls"]) == len(sent) and not any(c["estimated"] for c in calls["calls"])
    for call in calls["calls"]:
        assert call["cost_usd"] == pytest.approx(call["input_tokens"] * PRICE_IN + call["output_tokens"] * PRICE_OUT)
    found = re.search(r"^provenance_model_cost_usd_total ([0-9.e+-]+)$", metrics, re.MULTILINE)
    assert found is not None and math.isclose(float(found.group(1)), priced, rel_tol=1e-6)
    assert "not priced" not in markdown
    _, kept_usd = usd_spent(tmp_path, "acme/dave")
    assert kept_usd == pytest.approx(priced, rel=1e-6)
