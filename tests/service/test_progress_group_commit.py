"""The job row's call counts are group-committed.

The finding: a trace wrote its job row once per ledger event (a call leaving, a call answered), one
write after another under the trace's lock, so six calls leaving together waited for six commits before
the last of them was sent, and again when they were answered; with a second worker on the same database
each of those commits got slower, and the traces with them. Now the first call to get the lock writes the
latest counts, which hold every event so far, and the calls queued behind it return without a write —
while each call is still sent only once a committed write holds it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import event
from support.api_server import InProcessApi, KeyedJudge, small_turn

from estimator.seams.llm import LLMRequest, LLMResponse


def test_calls_sent_together_share_one_write_of_the_job_row_and_each_is_stored_before_it_is_sent(
    tmp_path: Path,
) -> None:
    judge = KeyedJudge()
    seen: list[tuple[int, int]] = []  # (calls sent so far, this one included; calls_made on the stored row)

    class RowReadingJudge:
        """Answers like the scripted judge; first reads what the job row says was made."""

        model = "openai/fake-judge"

        def __init__(self, database: Path) -> None:
            self.database = database

        async def complete(self, request: LLMRequest) -> LLMResponse:
            with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True) as conn:
                stored = conn.execute("SELECT calls_made FROM trace_jobs").fetchone()[0]
            seen.append((len(seen) + 1, stored))
            await asyncio.sleep(0.05)  # the calls of a round leave, and are answered, together
            return judge.scripted(request)

    database = tmp_path / "provenance.db"  # the service's SQLite file in its data directory
    with (
        InProcessApi(
            tmp_path,
            llm_factory=lambda model, base: RowReadingJudge(database),
            params={"concurrency": 6},
            warm_up=False,
            judgement_cache=False,
        ) as srv,
        srv.client(srv.admin_key) as client,
    ):
        writes: list[str] = []

        def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if statement.lstrip().upper().startswith("UPDATE TRACE_JOBS"):
                writes.append(statement)

        engine = srv.app.state.services.db.engine.sync_engine
        event.listen(engine, "before_cursor_execute", count)
        assert client.post("/v1/turns", json=small_turn()).status_code == 201
        quoted = client.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0"})
        assert quoted.status_code == 201, quoted.text
        started = client.post("/v1/traces", json={"quote_id": quoted.json()["quote_id"]})
        assert started.status_code == 202, started.text
        done = client.get(started.headers["location"], params={"wait": "true"}).json()
        for _ in range(30):
            if done["status"] in ("succeeded", "failed", "interrupted"):
                break
            done = client.get(started.headers["location"], params={"wait": "true"}).json()
        event.remove(engine, "before_cursor_execute", count)

    assert done["status"] == "succeeded", done
    made = done["calls"]["made"]
    assert made == len(seen) >= 6
    # every call was on the stored row before it left (no write skipped that a call needed)
    assert all(stored >= sent for sent, stored in seen), seen
    # two events per call (leaving, answered); one write per event was 2 * made row writes and more
    assert len(writes) < 2 * made, (len(writes), made)
