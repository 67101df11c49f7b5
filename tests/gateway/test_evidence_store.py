"""The evidence records in the store: appended, listed per tenant, looked up by digest (the earliest record of a
digest wins), never changed or removed, and the migration that makes the table round-trips."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from provenance_api.core.evidence import EvidenceRecord
from provenance_api.storage.evidence_records import append_evidence, custody_for, list_evidence
from provenance_api.storage.models import AppendOnlyViolation, EvidenceRow
from provenance_api.storage.session import Database

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def _record(tenant: str, digest: str, minutes: int, server: str = "files") -> EvidenceRecord:
    return EvidenceRecord(
        tenant=tenant,
        principal="ops@host",
        server=server,
        transport="stdio",
        tool="read",
        request_id=str(minutes),
        arguments_digest="a" * 64,
        digest=digest,
        observed_at=T0 + timedelta(minutes=minutes),
    )


def test_records_are_listed_per_tenant_bound_by_digest_and_never_changed(tmp_path: Path) -> None:
    d1, d2 = "1" * 64, "2" * 64

    async def run() -> None:
        db = Database(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}")
        try:
            await db.migrate()
            await append_evidence(
                db, [_record("t1", d1, 1, "first"), _record("t2", d2, 2), _record("t1", d1, 3, "again")]
            )
            listed = await list_evidence(db, "t1")
            assert [(r.id, r.server, r.observed_at) for r in listed] == [
                (1, "first", T0 + timedelta(minutes=1)),
                (3, "again", T0 + timedelta(minutes=3)),
            ]
            found = await custody_for(db, "t1", [d1, d2, ""])
            assert list(found) == [d1] and found[d1].server == "first"
            assert await custody_for(db, "t2", [d1]) == {}
            with pytest.raises(AppendOnlyViolation):
                async with db.transaction() as session:
                    await session.execute(update(EvidenceRow).values(digest="0" * 64))
            with pytest.raises(AppendOnlyViolation):
                async with db.transaction() as session:
                    row = await session.get(EvidenceRow, 1)
                    assert row is not None
                    row.digest = "0" * 64
            assert (await custody_for(db, "t1", [d1]))[d1].digest == d1
        finally:
            await db.dispose()

    asyncio.run(run())


def test_the_migration_of_the_evidence_table_round_trips(tmp_path: Path) -> None:
    from alembic import command

    from provenance_api.storage.session import alembic_config

    url = f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"

    def tables() -> set[str]:
        with sqlite3.connect(tmp_path / "m.db") as conn:
            return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    command.upgrade(alembic_config(url), "head")
    assert "evidence_records" in tables()
    command.downgrade(alembic_config(url), "0016")
    assert "evidence_records" not in tables() and "stored_turns" in tables()
    command.upgrade(alembic_config(url), "head")
    assert "evidence_records" in tables()


def test_evidence_list_prints_a_table_when_piped_json_on_request_and_reports_every_gap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.cli_run import run_cli

    from provenance_api.gateway.recorder import GAPS_FILE

    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path))
    d1 = "3" * 64
    gap = _record("local", "", 9).model_copy(update={"kind": "gap", "missed": 2, "cause": "disk-full: no room"})

    async def fill() -> None:
        db = Database(f"sqlite+aiosqlite:///{tmp_path / 'provenance.db'}")
        try:
            await db.migrate()
            await append_evidence(db, [_record("local", d1, 1), _record("elsewhere", d1, 2), gap])
        finally:
            await db.dispose()

    asyncio.run(fill())
    (tmp_path / GAPS_FILE).write_text(
        _record("local", "", 10)
        .model_copy(update={"kind": "gap", "missed": 5, "cause": "read-only: x"})
        .model_dump_json()
        + "\n",
        encoding="utf-8",
    )
    code, out, err = run_cli(capsys, "evidence", "list")
    assert code == 0
    assert out.splitlines() == [
        "ID\tOBSERVED AT (UTC)\tSERVER\tTOOL\tERROR\tDIGEST",
        f"1\t2026-12-02 09:01:00.000\tfiles\tread\t\t{d1}",
    ]
    assert err.splitlines() == [
        "2 results not recorded: disk-full: no room (files, 2026-12-02 09:09:00)",
        "5 results not recorded: read-only: x (files, 2026-12-02 09:10:00)",
    ]
    code, out, _ = run_cli(capsys, "evidence", "list", "--json")
    assert [r["digest"] for r in out["records"]] == [d1] and out["not_recorded"] == 7
    assert [g["cause"] for g in out["gaps"]] == ["disk-full: no room", "read-only: x"]
