"""Scale-out over real processes: two API processes and two ``provenance worker`` processes on one
Redis and one Postgres database, the judge being the fake OpenAI server (scripted, a small delay).

* the per-user budget holds exactly across both APIs under concurrent submissions;
* 20 traces submitted through both APIs complete exactly once each, and either API serves any trace
  and its event stream;
* a repeated trace is answered from the shared judgement cache: zero billed calls, the same result;
* SIGKILLing a worker mid-run leaves its job ``interrupted`` with its billed calls, the others complete.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from redis import Redis
from sqlalchemy import func, select
from support.api_server import REPO, SMALL_CLAIM, KeyedJudge, ServerProcess, make_key, small_turn
from support.fake_openai import FakeOpenAI, FakeReply
from support.services import create_database

from provenance_api.storage.models import TraceJobRow, TraceResultRow
from provenance_api.storage.session import Database

PLANNED = 14  # the small turn's quote: (2+2) + (2+2) + 2 redundancy + 2·2
BUDGET = 3 * PLANNED  # three traces in flight per user
LEASE_SECONDS = 3.0
TERMINAL = {"succeeded", "failed", "interrupted"}


@dataclass
class Cluster:
    root: Path
    env: dict[str, str]
    database_url: str
    redis: Redis
    prefix: str
    provider: FakeOpenAI
    delay: dict[str, Any]
    apis: list[ServerProcess] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start_worker(self, n: int) -> subprocess.Popen[bytes]:
        log = (self.root / f"worker{n}.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "provenance_api.cli.main", "worker", "--max-jobs", "2"],
            env={**self.env, "PROVENANCE_DATA_DIR": str(self.root / f"worker{n}")},
            stdout=log,
            stderr=log,
            cwd=REPO,
        )
        self.workers.append(proc)
        return proc

    def check_workers(self) -> None:
        """Fail at once (with the worker's log) if a worker died that the test did not kill."""
        for n, proc in enumerate(self.workers):
            if proc.poll() is not None and proc.returncode != -signal.SIGKILL:
                log = (self.root / f"worker{n}.log").read_text()[-3000:]
                raise AssertionError(f"worker {n} exited with {proc.returncode}:\n{log}")

    def key(self, user: str) -> str:
        return make_key(self.root / "keys", "acme", user, database_url=self.database_url)

    def client(self, api: int, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.apis[api].base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)

    def jobs(self) -> list[tuple[str, str, int, int]]:
        async def read() -> list[tuple[str, str, int, int]]:
            db = Database(self.database_url)
            try:
                async with db.session() as session:
                    rows = await session.execute(
                        select(TraceJobRow.id, TraceJobRow.status, TraceJobRow.calls_made, TraceJobRow.calls_billed)
                    )
                    return [(r[0], r[1], r[2], r[3]) for r in rows.all()]
            finally:
                await db.dispose()

        return asyncio.run(read())

    def results_per_job(self) -> dict[str, int]:
        async def read() -> dict[str, int]:
            db = Database(self.database_url)
            try:
                async with db.session() as session:
                    rows = await session.execute(
                        select(TraceResultRow.job_id, func.count()).group_by(TraceResultRow.job_id)
                    )
                    return {r[0]: int(r[1]) for r in rows.all()}
            finally:
                await db.dispose()

        return asyncio.run(read())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, redis_url: str, postgres_url: str) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("scale")
    judge = KeyedJudge()
    delay: dict[str, Any] = {"kill": False, "seen": set()}

    def answer(request: dict[str, Any]) -> FakeReply:
        """Fast, except in the kill phase: a kill trace's first call answers at once, later ones take 3 s
        (so every such trace has billed a call and is mid-run for a while)."""
        seconds = 0.02
        if delay["kill"]:
            found = re.search(r"\(kill (\d+)\)", json.dumps(request.get("messages")))
            if found and found.group(1) in delay["seen"]:
                seconds = 3.0
            elif found:
                delay["seen"].add(found.group(1))
        return FakeReply(text=judge.openai(request), delay=seconds)

    database_url = create_database(postgres_url, "scale")
    prefix = f"scale-{os.getpid()}-{int(time.time())}"
    with FakeOpenAI(answer) as provider:
        env = {
            **os.environ,
            "OPENAI_API_KEY": "sk-scale-test",
            "OPENAI_API_BASE": provider.base_url,
            "PROVENANCE_DATABASE_URL": database_url,
            "PROVENANCE_REDIS_URL": redis_url,
            "PROVENANCE_REDIS_PREFIX": prefix,
            "PROVENANCE_PARAMS": json.dumps({"rate_max_calls": BUDGET, "rate_window_seconds": 3600}),
            "PROVENANCE_WORKER_LEASE_SECONDS": str(LEASE_SECONDS),
            "PROVENANCE_WARM_UP": "false",
            "PROVENANCE_LOG_LEVEL": "WARNING",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        redis = Redis.from_url(redis_url)
        c = Cluster(root, env, database_url, redis, prefix, provider, delay)
        try:
            for n in range(2):  # one after the other: the first migrates the database
                c.apis.append(ServerProcess(root / f"api{n}", env).start())
            yield c
        finally:
            for proc in c.workers:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in c.workers:
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            for api in c.apis:
                api.stop()
            for key in redis.scan_iter(match=f"{prefix}:*"):
                redis.delete(key)
            redis.close()


def quote(api: httpx.Client, turn_id: str) -> str:
    r = api.post("/v1/quotes", json={"turn_id": turn_id, "sentence": SMALL_CLAIM})
    assert r.status_code == 201 and r.json()["planned_calls"] == PLANNED, r.text
    quote_id: str = r.json()["quote_id"]
    return quote_id


def wait_done(cluster: Cluster, api: httpx.Client, trace_id: str, limit: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + limit
    while True:
        job: dict[str, Any] = api.get(f"/v1/traces/{trace_id}", params={"wait": "true", "timeout": 5}).json()
        if job["status"] in TERMINAL or time.monotonic() > deadline:
            return job
        cluster.check_workers()


def test_the_budget_holds_exactly_across_api_processes(cluster: Cluster) -> None:
    """No worker runs yet, so nothing is given back while the submissions race."""
    key = cluster.key("bob")
    clients = [cluster.client(0, key), cluster.client(1, key)]
    try:
        assert clients[0].post("/v1/turns", json=small_turn("bob-turn")).status_code == 201
        quotes = [quote(clients[i % 2], "bob-turn") for i in range(8)]
        with ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(lambda iq: clients[iq[0] % 2].post("/v1/traces", json={"quote_id": iq[1]}), enumerate(quotes))
            )
        codes = sorted(r.status_code for r in answers)
        assert codes == [202] * 3 + [429] * 5, [r.text for r in answers]
        assert {r.json()["status"] for r in answers if r.status_code == 202} == {"queued"}
        assert all(r.json()["remaining"] < PLANNED for r in answers if r.status_code == 429)
    finally:
        for client in clients:
            client.close()


def test_twenty_traces_through_both_apis_complete_exactly_once(cluster: Cluster) -> None:
    cluster.start_worker(0)
    cluster.start_worker(1)
    users = [f"user{i}" for i in range(10)]
    keys = {u: cluster.key(u) for u in users}
    submitted: list[tuple[int, str, str]] = []  # (api, user, trace id)
    for i in range(20):
        user, api = users[i % 10], i % 2
        with cluster.client(api, keys[user]) as client:
            turn_id = f"turn-{i}"
            turn = small_turn(turn_id, query=f"Where is my order A-1? (ticket {i})")
            assert client.post("/v1/turns", json=turn).status_code == 201
            started = client.post("/v1/traces", json={"quote_id": quote(client, turn_id)})
            assert started.status_code == 202, started.text
            submitted.append((api, user, started.json()["trace_id"]))

    done: dict[str, dict[str, Any]] = {}
    for api, user, trace_id in submitted:
        with cluster.client(1 - api, keys[user]) as other:  # the other replica serves it
            done[trace_id] = wait_done(cluster, other, trace_id)
    assert {job["status"] for job in done.values()} == {"succeeded"}, done
    assert all(job["calls"]["billed"] == job["calls"]["made"] > 0 for job in done.values())

    # the event stream of a finished trace, from the replica that did not start it
    api, user, trace_id = submitted[0]
    with cluster.client(1 - api, keys[user]) as other, other.stream("GET", f"/v1/traces/{trace_id}/events") as s:
        lines = [line for line in s.iter_lines() if line.startswith("data: ")]
    assert json.loads(lines[-1][6:])["status"] == "succeeded"

    # bob's three queued traces ran too; every job ran once: one result each, one provider call per call made
    jobs = cluster.jobs()
    deadline = time.monotonic() + 120
    while any(status not in TERMINAL for _, status, _, _ in jobs) and time.monotonic() < deadline:
        cluster.check_workers()
        time.sleep(0.2)
        jobs = cluster.jobs()
    assert len(jobs) == 23 and {status for _, status, _, _ in jobs} == {"succeeded"}
    results = cluster.results_per_job()
    assert set(results) == {job_id for job_id, _, _, _ in jobs} and set(results.values()) == {1}
    assert len(cluster.provider.requests) == sum(made for _, _, made, _ in jobs)

    # a repeated trace of an already traced sentence: all from the shared cache, the same result
    api, user, trace_id = submitted[3]
    with cluster.client(1 - api, keys[user]) as client:
        before = len(cluster.provider.requests)
        again = client.post("/v1/traces", json={"quote_id": quote(client, "turn-3")})
        repeated = wait_done(cluster, client, again.json()["trace_id"])
    assert repeated["status"] == "succeeded" and repeated["calls"]["billed"] == 0
    assert len(cluster.provider.requests) == before
    first = done[trace_id]["result"]
    # cache hits are cached, not made: everything the first trace measured (made or cached) is cached now
    assert repeated["result"]["calls"]["cached"] == first["calls"]["made"] + first["calls"]["cached"]
    drop = ("calls", "usage", "cost_usd")
    assert {k: v for k, v in repeated["result"].items() if k not in drop} == {
        k: v for k, v in first.items() if k not in drop
    }


def test_a_killed_worker_leaves_its_job_interrupted_and_the_others_complete(cluster: Cluster) -> None:
    if not cluster.workers:
        cluster.start_worker(0)
        cluster.start_worker(1)
    victim = cluster.workers[0]
    cluster.delay["kill"] = True  # slow calls after each trace's first: the kill lands mid-trace
    users = [f"killer{i}" for i in range(6)]
    submitted: list[tuple[str, str]] = []
    for i, user in enumerate(users):
        key = cluster.key(user)
        with cluster.client(i % 2, key) as client:
            turn_id = f"kill-turn-{i}"
            turn = small_turn(turn_id, query=f"Where is my order A-1? (kill {i})")
            assert client.post("/v1/turns", json=turn).status_code == 201
            started = client.post("/v1/traces", json={"quote_id": quote(client, turn_id)})
            assert started.status_code == 202
            submitted.append((key, started.json()["trace_id"]))
    ids = {trace_id for _, trace_id in submitted}

    # wait until the victim holds a running job that has billed a call, then SIGKILL it
    target: tuple[str, int] | None = None
    deadline = time.monotonic() + 120
    while target is None and time.monotonic() < deadline:
        for job_id, status, _, billed in cluster.jobs():
            # redis-py types its commands for the sync and async clients at once; this one is sync
            owner = cast("bytes | None", cluster.redis.get(f"{cluster.prefix}:lease:{job_id}"))
            mine = owner is not None and owner.decode().split(":")[1] == str(victim.pid)
            if job_id in ids and status == "running" and billed > 0 and mine:
                target = (job_id, billed)
                break
        time.sleep(0.05)
    assert target is not None, "the victim worker never ran a job with a billed call"
    victim_jobs = {
        job_id
        for job_id in ids
        if (owner := cast("bytes | None", cluster.redis.get(f"{cluster.prefix}:lease:{job_id}"))) is not None
        and owner.decode().split(":")[1] == str(victim.pid)
    }
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(10)
    cluster.delay["kill"] = False

    final = {}
    for key, trace_id in submitted:
        with cluster.client(0, key) as client:
            final[trace_id] = wait_done(cluster, client, trace_id)
    job_id, billed_at_kill = target
    killed = final[job_id]
    logs = [(cluster.root / f"worker{n}.log").read_text()[-2000:] for n in range(len(cluster.workers))]
    assert killed["status"] == "interrupted" and killed["result"] is None, (target, killed, logs)
    assert "worker" in killed["reason"] and killed["calls"]["billed"] >= billed_at_kill
    for trace_id, job in final.items():
        if trace_id in victim_jobs and job["status"] == "interrupted":
            assert job["calls"]["billed"] > 0  # interrupted only with billed calls; else retried
        else:
            assert job["status"] == "succeeded", job
    results = cluster.results_per_job()
    assert all(results.get(t, 0) == (1 if final[t]["status"] == "succeeded" else 0) for t in ids)
