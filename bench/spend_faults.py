"""Spend counted from what the provider was sent: requests received vs calls made and billed, USD billed vs
the counted estimate, under HTTP 500s, a provider that omits usage, and a SIGKILL mid-trace.

The service runs as in production (``provenance serve`` in a child process, its own ``LiteLLMClient``, the
database budget and call log); the provider is the tests' ``FakeOpenAI`` on loopback, whose judgement is
scripted and whose faults are injected (``FaultInjector``, HTTP 500 at the given rate).

    python bench/spend_faults.py [--traces 4] [--rates 0,0.25,1]

Prints, per fault rate: traces, requests the provider received, calls made, billed and failed, and whether
made = received; for a provider without usage: the USD billed (the result, the call log, the budget) against
the cost counted from the requests and answers at the model's price; after a SIGKILL: received, made and
billed after the restart, and the calls listed. Target (the verdict line): made = received under every rate,
billed = received requests answered, USD billed = the counted estimate, and after the SIGKILL made = billed =
received with every request listed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.api_server import (
    SMALL_CLAIM,
    TEST_PRICES,
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

MODEL = "openai/fake-judge"
KEY = "sk-bench-spend-faults-0001"
PRICE_IN = TEST_PRICES[MODEL]["input_per_mtok"] / 1e6
PRICE_OUT = TEST_PRICES[MODEL]["output_per_mtok"] / 1e6
WINDOW = 3600
CALL_BUDGET = 10_000


def env_for(provider: FakeOpenAI) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": KEY,
        "OPENAI_API_BASE": provider.base_url,
        "PROVENANCE_BUDGET_USD_PER_USER": "100",
        "PROVENANCE_PARAMS": json.dumps({"rate_max_calls": CALL_BUDGET, "rate_window_seconds": WINDOW}),
        "PROVENANCE_WARM_UP": "false",
        "PROVENANCE_JUDGE_TIMEOUT_SECONDS": "10",
    }


def budget_kept(data: Path, user: str) -> tuple[int, float]:
    async def read() -> tuple[int, float]:
        db = Database(Settings(data_dir=data).effective_database_url)
        try:
            state = await DatabaseLimiter(db, CALL_BUDGET, WINDOW, max_usd_per_user=100.0).state(user)
            return CALL_BUDGET - state.remaining, state.usd_spent
        finally:
            await db.dispose()

    return asyncio.run(read())


def counted_cost(bodies: list[dict[str, Any]], judge: KeyedJudge) -> float:
    tok = TiktokenTokenizer()
    total = 0.0
    for body in bodies:
        request = LLMRequest(messages=tuple(Message(m["role"], m["content"]) for m in body["messages"]))
        total += request_tokens(request, tok) * PRICE_IN + tok.count(judge.openai(body)) * PRICE_OUT
    return total


def trace(api: httpx.Client, turn_id: str) -> dict[str, Any]:
    stored = api.post("/v1/turns", json=small_turn(turn_id))
    assert stored.status_code == 201, stored.text
    q = api.post("/v1/quotes", json={"turn_id": turn_id, "sentence": SMALL_CLAIM, "model": MODEL}).json()
    location = api.post("/v1/traces", json={"quote_id": q["quote_id"]}).headers["location"]
    state: dict[str, Any] = api.get(location, params={"wait": "true", "timeout": 120}).json()
    while state["status"] in ("queued", "running"):
        state = api.get(location, params={"wait": "true", "timeout": 120}).json()
    return state


def faults(rate: float, traces: int, root: Path) -> bool:
    judge = KeyedJudge()
    injector = FaultInjector(FaultRates(rate_500=rate), lambda body, tag: judge.openai(body), seed=7)
    pct = round(rate * 100)
    data = root / f"faults-{pct}"
    with FakeOpenAI(fault_fn=injector, api_key=KEY) as provider:
        data.mkdir(parents=True)
        key = make_key(data, "bench", f"u{pct}")  # before the service opens the database
        server = ServerProcess(data, env=env_for(provider)).start()
        try:
            with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=180) as api:
                states = [trace(api, f"t-{pct}-{i}") for i in range(traces)]
        finally:
            server.stop()
        received = len(provider.requests)
        answered = provider.answered
    made = sum(s["calls"]["made"] for s in states)
    billed = sum(s["calls"]["billed"] for s in states)
    failed = sum(s["calls"]["failed"] for s in states)
    planned = sum(s["calls"]["planned"] for s in states)
    kept_calls, _ = budget_kept(data, f"bench/u{pct}")
    ok: bool = made == received == kept_calls and billed == answered and made <= planned
    outcomes = ",".join(sorted({s["status"] for s in states}))
    print(
        f"HTTP 500 at {rate:>4.0%}: {traces} traces ({outcomes}) · provider received {received} · made {made} "
        f"(planned {planned}) · billed {billed} (provider answered {answered}) · failed {failed} · "
        f"budget kept {kept_calls} calls · made = received: {'yes' if made == received else 'NO'}"
    )
    return ok


def no_usage(traces: int, root: Path) -> bool:
    judge = KeyedJudge()
    data = root / "no-usage"
    with FakeOpenAI(judge.openai, faults=lambda i, r: FakeReply(include_usage=False), api_key=KEY) as provider:
        data.mkdir(parents=True)
        key = make_key(data, "bench", "nousage")  # before the service opens the database
        server = ServerProcess(data, env=env_for(provider)).start()
        try:
            with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=180) as api:
                states = [trace(api, f"t-nousage-{i}") for i in range(traces)]
                logged = sum(
                    c["cost_usd"] or 0.0
                    for s in states
                    for c in api.get(f"/v1/traces/{s['trace_id']}/calls").json()["calls"]
                )
        finally:
            server.stop()
        expected = counted_cost(provider.requests, judge)
        received = len(provider.requests)
    result_usd = sum((s["result"] or {}).get("cost_usd") or 0.0 for s in states)
    billed = sum(s["calls"]["billed"] for s in states)
    estimated = all((s["result"] or {}).get("usage", {}).get("estimated") for s in states)
    _, kept_usd = budget_kept(data, "bench/nousage")
    ok = all(abs(x - expected) <= 1e-9 + 1e-6 * expected for x in (result_usd, logged, kept_usd)) and expected > 0
    print(
        f"no usage reported: {traces} traces · provider received {received} · billed {billed} · USD billed: "
        f"results ${result_usd:.6f}, call log ${logged:.6f}, budget ${kept_usd:.6f} · counted estimate "
        f"${expected:.6f} · marked estimated: {'yes' if estimated else 'NO'}"
    )
    return ok and estimated and billed == received


def sigkill(root: Path) -> bool:
    judge = KeyedJudge()
    data = root / "sigkill"
    slow_after_two = lambda index, request: None if index < 2 else FakeReply(delay=30)  # noqa: E731
    with FakeOpenAI(judge.openai, faults=slow_after_two, api_key=KEY) as provider:
        env = env_for(provider)
        data.mkdir(parents=True)
        key = make_key(data, "bench", "killed")  # before the service opens the database
        server = ServerProcess(data, env=env).start()
        try:
            api = httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
            assert api.post("/v1/turns", json=small_turn()).status_code == 201
            q = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "model": MODEL})
            location = api.post("/v1/traces", json={"quote_id": q.json()["quote_id"]}).headers["location"]
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (
                api.get(location).json()["calls"]["billed"] >= 2 and provider.in_flight
            ):
                time.sleep(0.05)
            time.sleep(0.3)
            server.kill()
            api.close()
        finally:
            server.stop()
        received, answered = len(provider.requests), provider.answered
    restarted = ServerProcess(data, env={**env, "OPENAI_API_BASE": "http://127.0.0.1:9"}).start()
    try:
        with httpx.Client(base_url=restarted.base_url, headers={"Authorization": f"Bearer {key}"}) as api:
            job = api.get(location).json()
            calls = api.get(f"{location}/calls").json()
    finally:
        restarted.stop()
    kept_calls, kept_usd = budget_kept(data, "bench/killed")
    logged = sum(c["cost_usd"] or 0.0 for c in calls["calls"])
    made, billed = job["calls"]["made"], job["calls"]["billed"]
    print(
        f"SIGKILL mid-trace: provider received {received} (answered {answered}, {received - answered} in flight) · "
        f"after the restart: {job['status']}, made {made}, billed {billed}, /calls lists {calls['kept']} · "
        f"budget kept {kept_calls} calls, ${kept_usd:.6f} (call log ${logged:.6f})"
    )
    return made == billed == received == calls["kept"] == kept_calls and abs(kept_usd - logged) <= 1e-9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=4, help="traces per fault rate")
    parser.add_argument("--rates", default="0,0.25,1", help="HTTP 500 rates, comma-separated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ok = all([faults(float(rate), args.traces, root) for rate in args.rates.split(",")])
        ok = no_usage(args.traces, root) and ok
        ok = sigkill(root) and ok
    print(f"verdict: {'PASS' if ok else 'FAIL'}: billed = provider-received requests under faults and SIGKILL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
