"""Load: 50 concurrent trace submissions from 5 users against one service (a real ``provenance serve``
process) on loopback, three times over.

* per-user budgets hold exactly: every submission is 202 or 429 with Retry-After; the calls a user's
  traces made never exceed the budget, and the budget left afterwards is the budget minus exactly
  those calls (read from the service's ``X-RateLimit-Remaining``);
* per-trace concurrency never exceeds the cap: the provider measures calls in flight per trace (each
  trace has its own claim, which every prompt carries);
* billed calls per trace == the calls the provider answered for it;
* health and segments endpoints answer throughout;
* memory stays flat: the server's resident set after run 3 is not much above run 2's.

Bounded in count (3 × 55 traces) and in time (pytest-timeout); nothing here asserts a duration.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_server import ServerProcess, make_key, small_turn
from support.fake_openai import FakeOpenAI, FakeReply
from support.fault_provider import FencedJudge

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the server's RSS from /proc"),
]

USERS = 5
TRACES_PER_USER = 10
PLANNED = 14  # the small turn's quote: (2+2) + (2+2) + 2 redundancy + 2·2
BUDGET = 100  # per user: 10 quotes of 12 do not all fit at once, so the budget binds
CAP = 3  # per-trace concurrency
RUNS = 3
MODEL = "openai/fake-judge"
PROVIDER_KEY = "sk-load-test-provider-key"
KEY_PHRASE = "with carrier DHL"
CLAIM_LINE = re.compile(r"CLAIM:\n(?:<<<DATA-[0-9a-f]{16}>>>\n)?(.*)")  # the claim's data region, if fenced


def claim_tag(headers: Any, payload: dict[str, Any] | None) -> str | None:
    for message in (payload or {}).get("messages") or []:
        found = CLAIM_LINE.search(str(message.get("content", "")))
        if found:
            return found.group(1).strip()
    return None


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@dataclass
class Poller:
    """Hits /healthz and a turn's /segments in a loop until stopped; keeps every status seen."""

    base_url: str
    key: str
    turn_id: str
    statuses: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(base_url=self.base_url, headers={"Authorization": f"Bearer {self.key}"}, timeout=30) as api:
            while not self.stop.is_set():
                for name, path in (("health", "/healthz"), ("segments", f"/v1/turns/{self.turn_id}/segments")):
                    try:
                        self.statuses[name].append(api.get(path).status_code)
                    except httpx.HTTPError as exc:
                        self.errors.append(f"{name}: {exc!r}")
                self.stop.wait(0.05)


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeOpenAI]:
    judge = FencedJudge([KEY_PHRASE])
    with FakeOpenAI(
        lambda req: FakeReply(text=judge.openai(req), delay=0.05), api_key=PROVIDER_KEY, tagger=claim_tag
    ) as srv:
        yield srv


@dataclass
class Submission:
    user: str
    claim: str
    status: int
    location: str | None = None
    retry_after: str | None = None
    final: dict[str, Any] | None = None


def one_run(server: ServerProcess, data_dir: Path, run: int, poller_key: str) -> list[Submission]:
    users = [f"u{run}-{k}" for k in range(USERS)]
    keys = {u: make_key(data_dir, "load", u) for u in users}
    quotes: list[tuple[str, str, str]] = []  # (user, claim, quote id)
    for u in users:
        with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {keys[u]}"}, timeout=30) as api:
            for j in range(TRACES_PER_USER + 1):
                claim = f"Order A-{run}{u[-1]}{j:02d} shipped on 2025-03-03 with DHL."
                turn = small_turn(f"load-{u}-{j}", response=claim + " Would you like the tracking number?")
                turn["response_payload"]["tool_calls"][0]["response"] = (
                    f"Order A-{run}{u[-1]}{j:02d} shipped 2025-03-03 with carrier DHL, tracking 99812."
                )
                assert api.post("/v1/turns", json=turn).status_code == 201
                q = api.post("/v1/quotes", json={"turn_id": turn["turn_id"], "sentence": claim, "model": MODEL})
                assert q.status_code == 201 and q.json()["planned_calls"] == PLANNED, q.text
                quotes.append((u, claim, q.json()["quote_id"]))
    last = {u: [q for q in quotes if q[0] == u][-1] for u in users}  # one held back per user, sent after
    burst = [q for q in quotes if q not in last.values()]
    assert len(burst) == USERS * TRACES_PER_USER

    poller = Poller(server.base_url, poller_key, "load-probe")
    thread = threading.Thread(target=poller.run)
    thread.start()

    def submit(item: tuple[str, str, str]) -> Submission:
        user, claim, quote_id = item
        with httpx.Client(
            base_url=server.base_url, headers={"Authorization": f"Bearer {keys[user]}"}, timeout=60
        ) as api:
            r = api.post("/v1/traces", json={"quote_id": quote_id})
            sub = Submission(user, claim, r.status_code, r.headers.get("location"), r.headers.get("retry-after"))
            if r.status_code == 202:
                state = api.get(sub.location or "", params={"wait": "true", "timeout": 120}).json()
                while state["status"] in ("queued", "running"):
                    state = api.get(sub.location or "", params={"wait": "true", "timeout": 120}).json()
                sub.final = state
            return sub

    try:
        with ThreadPoolExecutor(max_workers=len(burst)) as pool:
            subs = list(pool.map(submit, burst))
    finally:
        poller.stop.set()
        thread.join(60)

    # health and segments answered throughout the burst
    assert not poller.errors, poller.errors[:3]
    assert poller.statuses["health"] and set(poller.statuses["health"]) == {200}
    assert poller.statuses["segments"] and set(poller.statuses["segments"]) == {200}

    # exactness: one more trace per user; the remaining budget it reports is the budget minus exactly the
    # calls already made and the new reservation
    for u in users:
        made = sum(s.final["calls"]["made"] for s in subs if s.user == u and s.final is not None)
        assert made <= BUDGET
        _, claim, quote_id = last[u]
        with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {keys[u]}"}, timeout=60) as api:
            r = api.post("/v1/traces", json={"quote_id": quote_id})
            if BUDGET - made >= PLANNED:
                assert r.status_code == 202, r.text
                assert int(r.headers["x-ratelimit-remaining"]) == BUDGET - made - PLANNED, (u, made, r.headers)
                state = api.get(r.headers["location"], params={"wait": "true", "timeout": 120}).json()
                while state["status"] in ("queued", "running"):
                    state = api.get(r.headers["location"], params={"wait": "true", "timeout": 120}).json()
                subs.append(Submission(u, claim, 202, r.headers["location"], None, state))
            else:
                assert r.status_code == 429 and r.json()["remaining"] == BUDGET - made, (u, made, r.text)
    return subs


def test_fifty_concurrent_traces_from_five_users(provider: FakeOpenAI, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    env = {
        "OPENAI_API_KEY": PROVIDER_KEY,
        "OPENAI_API_BASE": provider.base_url,
        "PROVENANCE_PARAMS": json.dumps({"rate_max_calls": BUDGET, "rate_window_seconds": 3600, "concurrency": CAP}),
        "PROVENANCE_MAX_RUNNING_TRACES": "8",
        "PROVENANCE_LOG_LEVEL": "WARNING",
    }
    server = ServerProcess(data_dir, env=env).start()
    try:
        assert server.proc is not None
        admin = (data_dir / "admin.key").read_text().strip()
        with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {admin}"}, timeout=30) as api:
            assert api.post("/v1/turns", json=small_turn("load-probe")).status_code == 201
        rss: list[int] = []
        accepted_total = refused_total = 0
        for run in range(RUNS):
            subs = one_run(server, data_dir, run, admin)
            rss.append(rss_kib(server.proc.pid))
            answered = provider.answered_by_tag
            in_flight = provider.max_in_flight_by_tag
            for s in subs:
                assert s.status in (202, 429), s
                if s.status == 429:
                    refused_total += 1
                    assert s.retry_after is not None and int(s.retry_after) > 0
                    continue
                accepted_total += 1
                assert s.final is not None and s.final["status"] == "succeeded", s.final
                calls = s.final["calls"]
                assert calls["made"] <= calls["planned"] == PLANNED
                assert calls["billed"] == calls["made"] == answered.get(s.claim, 0), (s.claim, calls)
                assert 1 <= in_flight.get(s.claim, 0) <= CAP, (s.claim, in_flight.get(s.claim))
            assert provider.max_in_flight > CAP  # traces really ran side by side
        # the cap was reached (so the measurement can see a breach), and the budget refused some
        assert max(provider.max_in_flight_by_tag.values()) == CAP
        assert refused_total > 0 and accepted_total > USERS * RUNS
        # memory: flat across repeated runs (generous: allocator noise, caches warming)
        assert rss[2] <= rss[1] * 1.25 + 16_384, rss
        print(f"\nload: accepted {accepted_total}, refused {refused_total}; RSS per run (KiB) {rss}")
    finally:
        server.stop()
