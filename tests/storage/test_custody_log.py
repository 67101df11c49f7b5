"""The custody log: each tenant's stored turns, trace results and deletions chained by hash, in the transaction
that stores or deletes them, and ``GET /v1/admin/audit/verify`` naming the first record a later edit, deletion
or reordering broke. Each test works in its own tenant of one service (the chains are per tenant), on SQLite
and on PostgreSQL; the tampering is raw SQL, as an operator with database access would do it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from support.api_server import SMALL_CLAIM, InProcessApi, scripted_factory, small_turn
from support.services import DbBackend

from estimator.corpus.turn import StoredTurn
from provenance_api.storage import crud_turns
from provenance_api.storage.session import Database


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, db_backend: DbBackend) -> Iterator[InProcessApi]:
    with InProcessApi(
        tmp_path_factory.mktemp(f"custody-{db_backend.name}"),
        llm_factory=scripted_factory(),
        warm_up=False,
        database_url=db_backend.fresh_url(),
    ) as srv:
        yield srv


def sql(server: InProcessApi, statement: str, **params: Any) -> list[Any]:
    """Run one raw SQL statement on the service's database (committed) and return its rows, if any."""

    async def work() -> list[Any]:
        db = Database(server.settings.effective_database_url)
        try:
            async with db.transaction() as session:
                found = await session.execute(text(statement), params)
                return list(found.all()) if statement.lstrip().upper().startswith("SELECT") else []
        finally:
            await db.dispose()

    return asyncio.run(work())


def verify(server: InProcessApi, tenant: str) -> dict[str, Any]:
    with server.client(server.admin_key) as admin:
        answer = admin.get("/v1/admin/audit/verify", params={"tenant": tenant})
    assert answer.status_code == 200, answer.text
    report: dict[str, Any] = answer.json()
    return report


def records(server: InProcessApi, tenant: str) -> list[tuple[int, str, str]]:
    rows = sql(server, "SELECT seq, kind, subject FROM custody_log WHERE tenant = :t ORDER BY seq", t=tenant)
    return [(int(seq), str(kind), str(subject)) for seq, kind, subject in rows]


def traced(server: InProcessApi, tenant: str, turn_id: str) -> str:
    """Store a small turn as ``turn_id`` in ``tenant`` and trace its claim; the trace id."""
    with server.client(server.key(tenant, "ann")) as api:
        assert api.post("/v1/turns", json=small_turn(turn_id)).status_code == 201
        started = api.post("/v1/traces", json={"turn_id": turn_id, "sentence": SMALL_CLAIM, "max_cost_usd": 1.0})
        assert started.status_code == 202, started.text
        done = api.get(started.headers["location"], params={"wait": "true"}).json()
    assert done["status"] == "succeeded", done
    trace_id: str = done["trace_id"]
    return trace_id


def test_turns_results_and_a_deletion_by_the_api_are_chained_and_verify_intact(server: InProcessApi) -> None:
    first = traced(server, "intact", "t-1")
    traced(server, "intact", "t-2")
    with server.client(server.key("intact", "ann")) as api:
        assert api.delete("/v1/turns/t-1").status_code == 204
    assert records(server, "intact") == [
        (1, "log_started", "intact"),
        (2, "turn_stored", "t-1"),
        (3, "result_stored", first),
        (4, "turn_stored", "t-2"),
        (5, "result_stored", records(server, "intact")[4][2]),
        (6, "turn_deleted", "t-1"),
    ]
    deleted = sql(server, "SELECT attested FROM custody_log WHERE tenant = 'intact' AND seq = 6")[0][0]
    assert (json.loads(deleted) if isinstance(deleted, str) else deleted)["results"] == [first]
    report = verify(server, "intact")
    assert report["intact"] is True and report["broken"] is None and report["problems"] == 0
    assert report["records"] == 6 and report["checked"] == {"turns": 1, "results": 1}
    head = sql(server, "SELECT hash FROM custody_log WHERE tenant = 'intact' AND seq = 6")[0][0]
    assert report["head"] == {"seq": 6, "hash": head}


def test_a_record_attests_the_turn_digest_and_each_source_digest(server: InProcessApi) -> None:
    with server.client(server.key("digests", "ann")) as api:
        stored = api.post("/v1/turns", json=small_turn("d-1")).json()
    attested = sql(server, "SELECT attested FROM custody_log WHERE tenant = 'digests' AND seq = 2")[0][0]
    attested = json.loads(attested) if isinstance(attested, str) else attested
    assert attested["turn_digest"] == stored["digest"]
    tool = small_turn()["response_payload"]["tool_calls"][0]
    shown = f'lookup_order({{"order_id": "A-1"}})\n{tool["response"]}'
    assert attested["sources"][0] == {
        "id": "s0",
        "layer": "tools",
        "digest": hashlib.sha256(shown.encode()).hexdigest(),
    }, attested["sources"]


def test_an_edited_source_text_names_the_record_that_stored_it(server: InProcessApi) -> None:
    with server.client(server.key("edited", "ann")) as api:
        for turn_id in ("e-1", "e-2", "e-3"):
            assert api.post("/v1/turns", json=small_turn(turn_id)).status_code == 201
    sql(
        server,
        "UPDATE stored_turns SET body = REPLACE(body, 'carrier DHL', 'carrier UPS') WHERE tenant = 'edited' "
        "AND turn_id = 'e-2'",
    )
    report = verify(server, "edited")
    assert report["intact"] is False and report["problems"] == 1
    broken = report["broken"]
    assert (broken["seq"], broken["kind"], broken["subject"]) == (3, "turn_stored", "e-2")
    assert broken["problem"] == "content_differs" and broken["differs"] == ["s0 (tools)"], broken


def test_a_result_row_deleted_by_sql_names_its_record(server: InProcessApi) -> None:
    trace_id = traced(server, "noresult", "r-1")
    sql(server, "DELETE FROM trace_results WHERE job_id = :j", j=trace_id)
    broken = verify(server, "noresult")["broken"]
    assert (broken["seq"], broken["kind"], broken["subject"], broken["problem"]) == (
        3,
        "result_stored",
        trace_id,
        "row_missing",
    )


def test_an_edited_result_names_the_field_that_differs(server: InProcessApi) -> None:
    trace_id = traced(server, "reresult", "q-1")
    sql(server, "UPDATE trace_results SET model = 'openai/other' WHERE job_id = :j", j=trace_id)
    broken = verify(server, "reresult")["broken"]
    assert (broken["seq"], broken["problem"], broken["differs"]) == (3, "content_differs", ["model"])


def test_two_swapped_records_are_named_at_the_first_of_them(server: InProcessApi) -> None:
    with server.client(server.key("swapped", "ann")) as api:
        for turn_id in ("w-1", "w-2", "w-3"):
            assert api.post("/v1/turns", json=small_turn(turn_id)).status_code == 201
    assert verify(server, "swapped")["intact"] is True
    for old, new in ((2, -2), (3, 2), (-2, 3)):
        sql(server, "UPDATE custody_log SET seq = :new WHERE tenant = 'swapped' AND seq = :old", old=old, new=new)
    broken = verify(server, "swapped")["broken"]
    assert (broken["seq"], broken["kind"], broken["subject"], broken["problem"]) == (
        2,
        "turn_stored",
        "w-2",
        "chain_broken",
    )


def test_a_removed_record_is_named(server: InProcessApi) -> None:
    with server.client(server.key("removed", "ann")) as api:
        for turn_id in ("m-1", "m-2", "m-3"):
            assert api.post("/v1/turns", json=small_turn(turn_id)).status_code == 201
    sql(server, "DELETE FROM custody_log WHERE tenant = 'removed' AND seq = 3")
    broken = verify(server, "removed")["broken"]
    assert (broken["seq"], broken["problem"]) == (4, "record_missing"), broken


def test_a_turn_deleted_by_sql_without_a_record_is_named(server: InProcessApi) -> None:
    with server.client(server.key("vanished", "ann")) as api:
        for turn_id in ("v-1", "v-2"):
            assert api.post("/v1/turns", json=small_turn(turn_id)).status_code == 201
    sql(server, "DELETE FROM stored_turns WHERE tenant = 'vanished' AND turn_id = 'v-1'")
    broken = verify(server, "vanished")["broken"]
    assert (broken["seq"], broken["subject"], broken["problem"]) == (2, "v-1", "row_missing")


def test_rows_before_the_log_are_counted_and_a_row_after_it_without_a_record_is_named(
    server: InProcessApi,
) -> None:
    with server.client(server.key("older", "ann")) as api:
        assert api.post("/v1/turns", json=small_turn("o-1")).status_code == 201
        sql(server, "DELETE FROM custody_log WHERE tenant = 'older'")  # as if stored before the log existed
        assert verify(server, "older")["not_chained"] == {"turns": 1, "results": 0}
        assert api.post("/v1/turns", json=small_turn("o-2")).status_code == 201
    report = verify(server, "older")
    assert report["intact"] is True and report["not_chained"] == {"turns": 1, "results": 0}
    assert report["checked"] == {"turns": 1, "results": 0}
    sql(
        server,
        "INSERT INTO stored_turns (tenant, turn_id, digest, body, stored_at, stored_by) "
        "SELECT tenant, 'o-3', digest, body, stored_at, stored_by FROM stored_turns WHERE turn_id = 'o-2' "
        "AND tenant = 'older'",
    )
    broken = verify(server, "older")["broken"]
    assert (broken["seq"], broken["subject"], broken["problem"]) == (None, "o-3", "row_unrecorded")


def test_concurrent_imports_of_one_tenant_never_fork_its_chain(server: InProcessApi) -> None:
    writers, each = 6, 5

    async def work() -> None:
        db = Database(server.settings.effective_database_url)
        try:
            turns = [[StoredTurn.model_validate(small_turn(f"c-{w}-{i}")) for i in range(each)] for w in range(writers)]
            outcomes = await asyncio.gather(*(crud_turns.put_turns(db, "busy", "ann", batch) for batch in turns))
            assert all(o.created for batch in outcomes for o in batch)
            singles = [StoredTurn.model_validate(small_turn(f"s-{w}")) for w in range(writers)]
            await asyncio.gather(*(crud_turns.put_turn(db, "busy", "ann", turn) for turn in singles))
        finally:
            await db.dispose()

    asyncio.run(work())
    seqs = [seq for seq, _, _ in records(server, "busy")]
    assert seqs == list(range(1, 2 + writers * each + writers))
    report = verify(server, "busy")
    assert report["intact"] is True and report["checked"]["turns"] == writers * (each + 1), report


def test_only_the_admin_key_verifies(server: InProcessApi) -> None:
    with server.client(server.key("acme", "ann")) as api:
        refused = api.get("/v1/admin/audit/verify")
    assert refused.status_code == 403
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert refused.json()["type"].endswith("admin-only")
    with server.client() as anonymous:
        assert anonymous.get("/v1/admin/audit/verify").status_code == 401


def test_the_shipped_migration_of_the_log_round_trips(tmp_path: Path) -> None:
    from alembic import command

    from provenance_api.storage.session import alembic_config

    url = f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"

    def tables() -> set[str]:
        with sqlite3.connect(tmp_path / "m.db") as conn:
            return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    command.upgrade(alembic_config(url), "head")
    assert "custody_log" in tables()
    command.downgrade(alembic_config(url), "0015")
    assert "custody_log" not in tables() and "stored_turns" in tables()
    command.upgrade(alembic_config(url), "head")
    assert "custody_log" in tables()
