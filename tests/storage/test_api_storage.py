"""Storage, keys, errors and logs of the service: migrations match the models, SQLite runs in WAL
mode, results are an append-only audit record, keys are hashed and printed once, a 500 never
leaks, and logs are JSON lines without secrets."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from fastapi import FastAPI
from sqlalchemy import Connection, select, text
from support.api_server import SMALL_CLAIM, ApiServer, InProcessApi, scripted_factory, small_turn
from support.services import DbBackend

from provenance_api.cli.main import main as cli_main
from provenance_api.core.observability import JsonFormatter, Metrics, RequestContextMiddleware
from provenance_api.http import problems
from provenance_api.storage.models import ApiKey, AppendOnlyViolation, Base, TraceResultRow
from provenance_api.storage.session import Database


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_the_shipped_migrations_build_exactly_the_models_schema(tmp_path: Path, db_backend: DbBackend) -> None:
    url = db_backend.fresh_url() or f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"

    async def diff() -> list[Any]:
        db = Database(url)
        await db.migrate()
        await db.migrate()  # idempotent

        def compare(conn: Connection) -> list[Any]:
            # the search index (migration 0004) is dialect-specific DDL outside the ORM on purpose: an FTS5
            # virtual table and its shadow tables on SQLite, a pg_trgm-indexed table on PostgreSQL
            def modelled(name: str | None, type_: str, parent: Any) -> bool:
                return not (type_ == "table" and (name or "").startswith("turn_search"))

            context = MigrationContext.configure(conn, opts={"include_name": modelled})
            return list(compare_metadata(context, Base.metadata))

        async with db.engine.connect() as conn:
            out: list[Any] = await conn.run_sync(compare)
        assert (await db.ready()) == (True, "ok")
        await db.dispose()
        return out

    assert run(diff()) == []


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApi]:
    with InProcessApi(tmp_path_factory.mktemp("storage"), llm_factory=scripted_factory(), warm_up=False) as srv:
        yield srv


def test_sqlite_runs_in_wal_mode_with_full_sync(sqlite_server: InProcessApi) -> None:
    async def pragmas() -> tuple[str, int]:
        db = Database(sqlite_server.settings.effective_database_url)
        async with db.engine.connect() as conn:
            mode = (await conn.execute(text("PRAGMA journal_mode"))).scalar_one()
            sync = (await conn.execute(text("PRAGMA synchronous"))).scalar_one()
        await db.dispose()
        return str(mode), int(sync)

    assert run(pragmas()) == ("wal", 2)
    assert (sqlite_server.data_dir / "provenance.db-wal").exists()


def test_a_result_is_an_append_only_audit_record(tmp_path: Path, db_backend: DbBackend) -> None:
    with (
        InProcessApi(
            tmp_path, llm_factory=scripted_factory(), warm_up=False, database_url=db_backend.fresh_url()
        ) as served,
        served.client(served.admin_key) as api,
    ):
        digest = api.post("/v1/turns", json=small_turn()).json()["digest"]
        quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM}).json()
        started = api.post("/v1/traces", json={"quote_id": quote["quote_id"]})
        done = api.get(started.headers["location"], params={"wait": "true"}).json()
    assert done["status"] == "succeeded"

    async def audit() -> None:
        db = Database(served.settings.effective_database_url)
        async with db.session() as session:
            row = (
                await session.execute(select(TraceResultRow).where(TraceResultRow.job_id == done["trace_id"]))
            ).scalar_one()
            assert row.turn_digest == digest and row.tenant == "local" and row.model == "openai/fake-judge"
            assert row.claim_digest == hashlib.sha256(SMALL_CLAIM.encode()).hexdigest()
            assert row.query_digest == hashlib.sha256(b"Where is my order A-1?").hexdigest()
            assert row.corpus_digest == done["result"]["corpus_digest"]
            assert row.prompt_versions == done["result"]["prompt_versions"] and row.prompt_versions
            assert row.params["max_calls"] == 48 and row.result == done["result"]
            assert (row.calls_planned, row.calls_made, row.calls_billed) == (
                14,  # (2+2) + (2+2) + 2 redundancy + 2·2
                done["calls"]["made"],
                done["calls"]["billed"],
            )
            # the operator prices the test judge (TEST_PRICES): the stored cost is the result's, at that price
            assert row.input_tokens > 0 and row.cost_usd is not None and row.cost_usd > 0
            assert row.cost_usd == done["result"]["cost_usd"], (row.cost_usd, done["result"]["cost_usd"])
            row.result = {"verdict": "tampered"}
            with pytest.raises(AppendOnlyViolation):
                await session.commit()
            await session.rollback()
            with pytest.raises(AppendOnlyViolation):
                await session.delete(row)
                await session.flush()
        await db.dispose()

    run(audit())


def test_keys_are_hashed_the_admin_key_is_printed_once_and_owner_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, db_backend: DbBackend
) -> None:
    url = db_backend.fresh_url()
    if url is not None:
        monkeypatch.setenv("PROVENANCE_DATABASE_URL", url)
    with InProcessApi(tmp_path, warm_up=False, database_url=url) as srv:
        admin = srv.admin_key
    first = capsys.readouterr().out
    assert admin in first and "shown once" in first
    assert stat.S_IMODE(os.stat(tmp_path / "admin.key").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path).st_mode) == 0o700

    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path))
    assert cli_main(["keys", "create", "--tenant", "acme", "--user", "alice"]) == 0
    alice = capsys.readouterr().out.strip()
    assert alice.startswith("pvk_") and alice != admin

    with InProcessApi(tmp_path, warm_up=False, database_url=url) as srv:
        with srv.client(alice) as api:
            assert api.post("/v1/turns", json=small_turn("alice-turn")).status_code == 201
        with srv.client(admin) as api:
            assert api.get("/v1/turns/alice-turn").status_code == 404  # admin is tenant "local"
            assert api.get("/v1/turns").json()["items"] == []
    assert admin not in capsys.readouterr().out  # not printed again

    async def stored() -> list[str]:
        db = Database(url or f"sqlite+aiosqlite:///{tmp_path / 'provenance.db'}")
        async with db.session() as session:
            hashes = list((await session.execute(select(ApiKey.key_hash))).scalars())
        await db.dispose()
        return hashes

    hashes = run(stored())
    assert hashlib.sha256(alice.encode()).hexdigest() in hashes
    if url is None:
        assert sqlite_bytes_lack(tmp_path, alice) and sqlite_bytes_lack(tmp_path, admin)
    assert cli_main(["keys", "list"]) == 0
    listing = capsys.readouterr().out
    assert "tenant=acme" in listing and alice not in listing


def sqlite_bytes_lack(data_dir: Path, secret: str) -> bool:
    blob = b"".join(p.read_bytes() for p in data_dir.glob("provenance.db*"))
    return secret.encode() not in blob


def test_database_url_setting_is_used(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "custom.db"
    with (
        InProcessApi(tmp_path / "data", warm_up=False, database_url=f"sqlite+aiosqlite:///{other}") as srv,
        srv.client(srv.admin_key) as api,
    ):
        assert api.post("/v1/turns", json=small_turn()).status_code == 201
        assert api.get("/readyz").json()["status"] == "ready"
    assert other.exists() and not (tmp_path / "data" / "provenance.db").exists()


SECRET = "sk-live-0123456789abcdefSECRET"


def test_an_unexpected_error_is_a_bare_500_and_its_log_has_no_secret_or_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    app = FastAPI()
    problems.install(app)

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError(f"db password=hunter2hunter2 and key {SECRET}")

    app.add_middleware(problems.UnexpectedErrorGuard)
    app.add_middleware(RequestContextMiddleware, metrics=Metrics())

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    ours = logging.getLogger("provenance_api")
    level = ours.level
    ours.setLevel(logging.INFO)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            thread.join(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        r = httpx.get(f"http://127.0.0.1:{port}/boom", headers={"X-Request-ID": "req-500"})
    finally:
        server.should_exit = True
        thread.join(10)
        root.removeHandler(handler)
        ours.setLevel(level)
    assert r.status_code == 500 and r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["request_id"] == "req-500" and body["type"].endswith("internal-error")
    for leaked in (SECRET, "hunter2", "Traceback", "RuntimeError", "boom.py"):
        assert leaked not in r.text
    logged = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert any(e.get("error") == "RuntimeError" and e.get("request_id") == "req-500" for e in logged)
    assert any(e.get("msg") == "GET /boom 500" for e in logged)
    assert SECRET not in stream.getvalue() and "Traceback" not in stream.getvalue()


def test_json_logs_redact_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ant-key-material-0123456789")
    record = logging.LogRecord(
        "x",
        logging.WARNING,
        __file__,
        1,
        "calling with %s and Bearer abc.def-ghi",
        ("ant-key-material-0123456789",),
        None,
    )
    line = json.loads(JsonFormatter().format(record))
    assert "ant-key-material" not in line["msg"] and "abc.def-ghi" not in line["msg"]


def test_a_clean_shutdown_interrupts_running_traces_with_their_billed_calls(
    tmp_path: Path, db_backend: DbBackend
) -> None:
    url = db_backend.fresh_url()
    with (
        ApiServer(tmp_path, llm_factory=scripted_factory(latency=2.0), warm_up=False, database_url=url) as srv,
        srv.client(srv.admin_key) as api,
    ):
        api.post("/v1/turns", json=small_turn())
        quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM}).json()
        location = api.post("/v1/traces", json={"quote_id": quote["quote_id"]}).headers["location"]
        assert api.get(location).json()["status"] in ("queued", "running")
    with ApiServer(tmp_path, warm_up=False, database_url=url) as srv, srv.client(srv.admin_key) as api:
        job = api.get(location).json()
    assert job["status"] == "interrupted" and job["result"] is None
    assert "shut down" in job["reason"]
