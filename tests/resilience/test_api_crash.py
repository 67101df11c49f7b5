"""SIGKILL the service (a real `provenance serve` process) while a trace runs and while turns are
being stored. After a restart every acknowledged turn is there, intact; the trace reads
`interrupted` with the calls it had billed, and no result is served for it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from support.api_server import SMALL_CLAIM, KeyedJudge, ServerProcess, small_turn
from support.fake_openai import FakeOpenAI, FakeReply

from estimator.corpus.turn import StoredTurn

PROVIDER_KEY = "sk-crash-test-provider-key-42"


def bulk_turn(i: int) -> dict[str, Any]:
    return small_turn(f"bulk-{i:05d}", response=f"Order A-{i} shipped on 2025-03-03 with DHL. " * 20)


def _store_turns_until(
    stop: threading.Event,
    base_url: str,
    key: str,
    acked: dict[str, str],
    attempted: dict[str, dict[str, Any]],
) -> None:
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=5) as client:
        i = 0
        while not stop.is_set():
            turn = bulk_turn(i)
            attempted[turn["turn_id"]] = turn
            try:
                r = client.post("/v1/turns", json=turn)
            except httpx.HTTPError:
                return  # the server is gone
            if r.status_code == 201:
                acked[turn["turn_id"]] = r.json()["digest"]
            i += 1


def test_sigkill_mid_trace_and_mid_writes_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    judge = KeyedJudge()
    # the first two judge calls answer at once, the rest hang: the trace is surely mid-run when killed
    slow_after_two = lambda index, request: None if index < 2 else FakeReply(delay=30)  # noqa: E731
    with FakeOpenAI(judge.openai, faults=slow_after_two, api_key=PROVIDER_KEY) as provider:
        env = {
            "OPENAI_API_KEY": PROVIDER_KEY,
            "OPENAI_API_BASE": provider.base_url,
            "PROVENANCE_LOG_LEVEL": "INFO",
        }
        server = ServerProcess(tmp_path / "data", env=env).start()
        try:
            key = (tmp_path / "data" / "admin.key").read_text().strip()
            api = httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
            assert api.post("/v1/turns", json=small_turn()).status_code == 201
            quote = api.post(
                "/v1/quotes",
                json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "model": "openai/fake-judge"},
            ).json()
            trace = api.post("/v1/traces", json={"quote_id": quote["quote_id"]})
            assert trace.status_code == 202
            location = trace.headers["location"]

            acked: dict[str, str] = {}
            attempted: dict[str, dict[str, Any]] = {}
            stop = threading.Event()
            writer = threading.Thread(target=_store_turns_until, args=(stop, server.base_url, key, acked, attempted))
            writer.start()
            billed_seen = 0
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                state: dict[str, Any] = api.get(location).json()
                billed_seen = state["calls"]["billed"]
                if billed_seen >= 2 and len(acked) >= 5:
                    break
                time.sleep(0.05)
            assert state["status"] == "running" and billed_seen == 2, state
            server.kill()  # SIGKILL: no shutdown code runs
            stop.set()
            writer.join(10)
            api.close()
            answered_by_provider = provider.answered
            received_by_provider = len(provider.requests)
        finally:
            server.stop()

    restarted = ServerProcess(tmp_path / "data", env={"PROVENANCE_WARM_UP": "false"}).start()
    try:
        with httpx.Client(base_url=restarted.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as api:
            # every acknowledged turn is there, byte for byte the content that was acknowledged
            for turn_id, digest in acked.items():
                got = api.get(f"/v1/turns/{turn_id}")
                assert got.status_code == 200 and got.json()["digest"] == digest
            # a write that was in flight is either entirely there or not there at all
            for turn_id in set(attempted) - set(acked):
                got = api.get(f"/v1/turns/{turn_id}")
                assert got.status_code in (200, 404)
                if got.status_code == 200:
                    sent = StoredTurn.model_validate(attempted[turn_id])
                    assert StoredTurn.model_validate(got.json()["turn"]) == sent
            listed = api.get("/v1/turns", params={"limit": 500}).json()["items"]
            assert {t["turn_id"] for t in listed} >= set(acked) | {"t-small-1"}

            job = api.get(location).json()
            assert job["status"] == "interrupted" and job["result"] is None
            assert "stopped" in job["reason"]
            # the calls in flight at the kill count as billed (the provider may have answered them)
            assert answered_by_provider == billed_seen == 2
            assert job["calls"]["billed"] == job["calls"]["made"] == received_by_provider > 2
            waited = api.get(location, params={"wait": "true"}).json()
            assert waited["status"] == "interrupted"
            with api.stream("GET", f"{location}/events") as stream:
                lines = [line for line in stream.iter_lines() if line.startswith("event: ")]
            assert lines == ["event: progress", "event: end"]
    finally:
        restarted.stop()

    # the service's logs: one JSON object per line, request and trace ids, no secret, no traceback
    log = (tmp_path / "data" / "serve.err").read_text()
    entries = [json.loads(line) for line in log.splitlines()]
    assert any(e["logger"] == "provenance_api.access" and e.get("request_id") for e in entries)
    assert any(e.get("trace_id") == location.rsplit("/", 1)[1] for e in entries)
    assert any("interrupted by a restart" in e["msg"] for e in entries)
    assert PROVIDER_KEY not in log and key not in log and "Traceback" not in log
