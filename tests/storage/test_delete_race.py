"""Deleting a turn and starting traces of it, at once: the finding, and the check that it stays fixed.

The finding: ``DELETE /v1/turns/{id}`` answered 204 while 12 concurrent ``POST /v1/traces`` (of quotes of that
turn) were accepted; some ran on the deleted turn (their model-call rows kept), the others failed, and all 12 stayed
readable. A delete and a trace start are now serialised on the turn: a start that wins is seen by the delete (409
naming the job; once it ends, the delete takes it with the turn), and a start that loses is a 404 problem. After the
204 nothing of the turn is left: no readable trace, no job, result, quote or model-call row, no cached judgement,
and no model call sent.

Each run stores a small turn, quotes it, then sends the DELETE (a few milliseconds before or after the starts,
varying between runs, so it lands before, among and after them) together with 12 starts — 10 by quote, 2 quoting
inline. The service is real (HTTP, the in-process job runner) and so is its judge: the litellm client talking to a
slowish OpenAI-compatible server on loopback. Runs on SQLite (WAL) and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from sqlalchemy import func, or_, select
from support.api_server import SMALL_CLAIM, ApiServer, KeyedJudge, small_turn
from support.fake_openai import FakeOpenAI, FakeReply
from support.services import DbBackend

from provenance_api.jobs.runner import InProcessJobRunner
from provenance_api.storage import crud_traces
from provenance_api.storage.judgement_cache import turn_scope
from provenance_api.storage.models import ModelCallRow, QuoteRow, StoredTurnRow, TraceJobRow, TraceResultRow
from provenance_api.storage.session import Database

RUNS = 50
STARTS = 12
INLINE = 2  # of the starts, those that quote inline (turn_id + sentence) instead of naming a quote
TENANT = "race"
PROBLEM = "application/problem+json"
JUDGE_DELAY = 0.02  # seconds per judge answer: a trace of the small turn takes a few tenths of a second
OFFSETS = [-0.02, -0.005, 0.0, 0.005, 0.01, 0.02, 0.05, 0.15, 0.4, 1.0]
"""When the DELETE is sent after the starts (s; negative: before them), by run."""


ZOMBIE = "(abandoned job)"


def marker(run: int) -> str:
    return f"(race run {run:03d})"


@pytest.fixture(scope="module")
def judge() -> Iterator[FakeOpenAI]:
    script = KeyedJudge()

    def answer(request: dict[str, Any]) -> FakeReply:
        slow = ZOMBIE in json.dumps(request)  # the abandoned job's turn: slow enough to be caught mid-run
        return FakeReply(text=script.openai(request), delay=0.4 if slow else JUDGE_DELAY)

    with FakeOpenAI(answer) as provider:
        yield provider


@pytest.fixture(scope="module")
def server(db_backend: DbBackend, judge: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with ApiServer(
        tmp_path_factory.mktemp(f"delete-race-{db_backend.name}"),
        database_url=db_backend.fresh_url(),
        judge_api_base=judge.base_url,
        judge_api_key="sk-delete-race",
        max_running_traces=STARTS,
        params={"rate_max_calls": 1_000_000},
    ) as srv:
        with srv.client(srv.key("warm", "ann"), timeout=300) as api:  # litellm loaded before any race
            assert api.post("/v1/turns", json=small_turn(turn_id="warm-1")).status_code == 201
            started = api.post("/v1/traces", json={"turn_id": "warm-1", "sentence": SMALL_CLAIM, "max_cost_usd": 1.0})
            assert started.status_code == 202, started.text
            deadline = time.monotonic() + 300
            while api.get(started.headers["location"], params={"wait": "true"}).json()["status"] in (
                "queued",
                "running",
            ):
                assert time.monotonic() < deadline, "the warm-up trace did not end"
        yield srv


@dataclass
class Run:
    """One race: what the DELETE and the starts were answered, and when the last DELETE (the 204) came back."""

    turn_id: str
    deletes: list[int] = field(default_factory=list)
    starts: list[httpx.Response] = field(default_factory=list)
    deleted_at: float = 0.0  # time.monotonic() when the 204 was received

    @property
    def accepted(self) -> list[str]:
        return [str(r.json()["trace_id"]) for r in self.starts if r.status_code == 202]


def db_run(server: ApiServer, work: Any) -> Any:
    """``work(db)`` on the server's database through an engine of its own (as another process would)."""

    async def run() -> Any:
        db = Database(server.settings.effective_database_url)
        try:
            return await work(db)
        finally:
            await db.dispose()

    return asyncio.run(run())


def leftover_rows(server: ApiServer, turn_id: str, trace_ids: list[str]) -> dict[str, int]:
    """The rows the database still holds for ``turn_id`` (and, by id, for the traces started on it)."""

    async def work(db: Database) -> dict[str, int]:
        async with db.session() as session:

            async def count(model: Any, *where: Any) -> int:
                return int((await session.execute(select(func.count()).select_from(model).where(*where))).scalar_one())

            return {
                "turns": await count(StoredTurnRow, StoredTurnRow.tenant == TENANT, StoredTurnRow.turn_id == turn_id),
                "quotes": await count(QuoteRow, QuoteRow.tenant == TENANT, QuoteRow.turn_id == turn_id),
                "jobs": await count(TraceJobRow, or_(TraceJobRow.turn_id == turn_id, TraceJobRow.id.in_(trace_ids))),
                "results": await count(
                    TraceResultRow, or_(TraceResultRow.turn_id == turn_id, TraceResultRow.job_id.in_(trace_ids))
                ),
                "model_calls": await count(
                    ModelCallRow, or_(ModelCallRow.turn_id == turn_id, ModelCallRow.trace_id.in_(trace_ids))
                ),
            }

    rows: dict[str, int] = db_run(server, work)
    return rows


def cached_judgements(server: ApiServer, turn_id: str) -> int:
    """Entries the judgement cache (SQLite, in the data directory) still holds in the turn's scope."""
    path = server.data_dir / "judgements.db"
    if not path.exists():
        return 0
    conn = sqlite3.connect(path, timeout=15)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "judgement_entries" not in tables:
            return 0
        found = conn.execute(
            "SELECT count(*) FROM judgement_entries WHERE scope = ?", (turn_scope(TENANT, turn_id),)
        ).fetchone()
        return int(found[0])
    finally:
        conn.close()


def wait_idle(server: ApiServer, timeout: float = 60.0) -> None:
    """Until the in-process runner has no job left (queued or running), so whatever a job would still
    write after the delete has been written before the run is checked."""
    runner = server.app.state.services.runner
    assert isinstance(runner, InProcessJobRunner)
    deadline = time.monotonic() + timeout
    while runner._tasks:
        assert time.monotonic() < deadline, f"jobs still running after {timeout:.0f} s: {list(runner._tasks)}"
        time.sleep(0.01)


def calls_after(judge: FakeOpenAI, run: int, since: float) -> int:
    """Model calls of run ``run``'s turn that reached the judge after ``since`` (the 204)."""
    mark = marker(run)
    return sum(
        1
        for r in judge.records
        if r.path.endswith("/chat/completions") and r.arrived > since and mark in json.dumps(r.json)
    )


async def race(server: ApiServer, key: str, run: int, offset: float) -> Run:
    """Store run ``run``'s turn and quote it (10 quotes, at once), then send the DELETE and the 12 starts
    concurrently: the DELETE ``offset`` seconds after the starts (before them when negative)."""
    out = Run(f"race-{run:03d}")
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=STARTS + 2)
    async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=60, limits=limits) as api:
        turn = small_turn(turn_id=out.turn_id, query=f"Where is my order A-1? {marker(run)}")
        stored = await api.post("/v1/turns", json=turn)
        assert stored.status_code == 201, stored.text
        asked = {"turn_id": out.turn_id, "sentence": SMALL_CLAIM}
        quotes = await asyncio.gather(*(api.post("/v1/quotes", json=asked) for _ in range(STARTS - INLINE)))
        assert all(q.status_code == 201 for q in quotes), [q.text for q in quotes if q.status_code != 201]
        bodies = [{"quote_id": q.json()["quote_id"]} for q in quotes] + [{**asked, "max_cost_usd": 1.0}] * INLINE

        async def delete() -> None:
            await asyncio.sleep(max(0.0, offset))
            answer = await api.delete(f"/v1/turns/{out.turn_id}")
            out.deletes.append(answer.status_code)
            if answer.status_code == 204:
                out.deleted_at = time.monotonic()

        async def start(body: dict[str, Any]) -> httpx.Response:
            await asyncio.sleep(max(0.0, -offset))
            return await api.post("/v1/traces", json=body)

        done = await asyncio.gather(delete(), *(start(body) for body in bodies))
    out.starts = [r for r in done if isinstance(r, httpx.Response)]
    return out


def finish_delete(api: httpx.Client, run: Run) -> None:
    """A DELETE the starts won (409 naming a job) is repeated once the accepted traces ended: then it is a 204."""
    if run.deletes[-1] == 204:
        return
    assert run.deletes[-1] == 409, run.deletes
    for trace_id in run.accepted:
        deadline = time.monotonic() + 60
        while api.get(f"/v1/traces/{trace_id}", params={"wait": "true"}).json()["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, f"{trace_id} did not end"
    answer = api.delete(f"/v1/turns/{run.turn_id}")
    run.deletes.append(answer.status_code)
    assert answer.status_code == 204, answer.text
    run.deleted_at = time.monotonic()


def readable(api: httpx.Client, run: Run) -> list[str]:
    """What of the deleted turn the API still serves: each trace by id, its calls, events and export, and the
    trace list filtered on the turn."""
    found = []
    for trace_id in run.accepted:
        for suffix in ("", "/calls", "/events", "/export"):
            answer = api.get(f"/v1/traces/{trace_id}{suffix}")
            if answer.status_code != 404:
                found.append(f"GET /v1/traces/{trace_id}{suffix} answered {answer.status_code}")
    listed = api.get("/v1/traces", params={"turn_id": run.turn_id})
    assert listed.status_code == 200, listed.text
    found += [f"GET /v1/traces lists {item['trace_id']}" for item in listed.json()["items"]]
    return found


def test_a_delete_racing_trace_starts_leaves_no_orphans(server: ApiServer, judge: FakeOpenAI) -> None:
    key = server.key(TENANT, "ann")
    orphans: list[str] = []
    refused = accepted = delete_first = start_first = 0
    started = time.monotonic()
    with server.client(key, timeout=60) as api:
        for number in range(RUNS):
            run = asyncio.run(race(server, key, number, OFFSETS[number % len(OFFSETS)]))
            turn_id = run.turn_id
            assert run.deletes and run.deletes[0] in (204, 409), run.deletes
            for answer in run.starts:  # every start is accepted, or refused with a clear problem
                if answer.status_code != 202:
                    assert answer.status_code in (404, 409), answer.text
                    assert answer.headers["content-type"].startswith(PROBLEM)
                    assert answer.json()["detail"], answer.text
                    refused += 1
            accepted += len(run.accepted)
            delete_first += run.deletes[0] == 204
            start_first += run.deletes[0] == 409
            finish_delete(api, run)
            wait_idle(server)

            left = leftover_rows(server, turn_id, run.accepted)
            orphans += [f"run {number}: {n} {kind} row(s) left" for kind, n in left.items() if n]
            orphans += [f"run {number}: {line}" for line in readable(api, run)]
            if cached := cached_judgements(server, turn_id):
                orphans.append(f"run {number}: {cached} cached judgement(s) left")
            if late := calls_after(judge, number, run.deleted_at):
                orphans.append(f"run {number}: {late} model call(s) sent after the 204")
            assert_problem_404(api.get(f"/v1/turns/{turn_id}"))

    seconds = time.monotonic() - started
    print(
        f"\ndelete/trace race: {len(orphans)} orphans in {RUNS} runs "
        f"({delete_first} deletes answered 204 at once, {start_first} refused 409 until the traces ended; "
        f"{accepted} starts accepted, {refused} refused; {seconds:.1f} s)"
    )
    assert not orphans, "\n".join(orphans[:40])
    # the race really ran both ways: deletes that won over starts in flight, and starts that won
    assert delete_first and start_first, (delete_first, start_first)
    assert refused and accepted, (refused, accepted)


def assert_problem_404(answer: httpx.Response) -> None:
    assert answer.status_code == 404, answer.text
    assert answer.headers["content-type"].startswith(PROBLEM)


def test_a_job_still_running_when_its_turn_is_deleted_stops_and_leaves_nothing(
    server: ApiServer, judge: FakeOpenAI
) -> None:
    """A job the service stopped counting as running (a worker's lease lost: the reaper marks it interrupted)
    while its task still runs: its turn can then be deleted (204). The job must stop before any further model
    call and keep nothing — no job, result or model-call row, nothing readable."""
    key = server.key(TENANT, "bo")
    turn_id = "abandoned-1"
    with server.client(key, timeout=60) as api:
        turn = small_turn(turn_id=turn_id, query=f"Where is my order A-1? {ZOMBIE}")
        assert api.post("/v1/turns", json=turn).status_code == 201
        started = api.post("/v1/traces", json={"turn_id": turn_id, "sentence": SMALL_CLAIM, "max_cost_usd": 1.0})
        assert started.status_code == 202, started.text
        trace_id = started.json()["trace_id"]
        deadline = time.monotonic() + 60
        while not any(ZOMBIE in json.dumps(r.json) for r in judge.records if r.path.endswith("/chat/completions")):
            assert time.monotonic() < deadline, "the trace sent no model call"
            time.sleep(0.01)

        async def abandon(db: Database) -> bool:
            return await crud_traces.interrupt_running(db, trace_id, "the worker running this trace stopped")

        assert db_run(server, abandon)  # as the reaper does when a worker's lease expires
        deleted = api.delete(f"/v1/turns/{turn_id}")
        assert deleted.status_code == 204, deleted.text
        deleted_at = time.monotonic()
        wait_idle(server)

        sent = [r for r in judge.records if r.path.endswith("/chat/completions") and ZOMBIE in json.dumps(r.json)]
        late = [r for r in sent if r.arrived > deleted_at]
        assert leftover_rows(server, turn_id, [trace_id]) == {
            "turns": 0,
            "quotes": 0,
            "jobs": 0,
            "results": 0,
            "model_calls": 0,
        }
        for suffix in ("", "/calls", "/events", "/export"):
            assert_problem_404(api.get(f"/v1/traces/{trace_id}{suffix}"))
        assert api.get("/v1/traces", params={"turn_id": turn_id}).json()["items"] == []
        # it stopped: the calls in flight when the delete landed may be answered, but none is sent after it
        assert sent and not late, f"{len(late)} of {len(sent)} model call(s) sent after the delete"
