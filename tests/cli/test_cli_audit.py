"""``provenance audit verify``: exit 0 and the head hash when the tenant's custody log is intact, 1 naming the
first broken record when a stored turn was edited behind the service's back, the same object as the admin
endpoint with ``--json``, and plain text when piped. Runs in process (``main``) on a data directory of its own;
the tampering is raw SQL on the SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.cli_run import run_cli

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def test_verify_exits_0_on_an_intact_log_and_1_naming_the_edited_turn(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run_cli(
        capsys, "import", str(FIXTURES / "eo_worldview_turn.json"), str(FIXTURES / "vendor_terms_turn.json")
    )
    assert code == 0
    code, out, _ = run_cli(capsys, "audit", "verify")
    with sqlite3.connect(data_dir / "provenance.db") as conn:
        (head,) = conn.execute("SELECT hash FROM custody_log WHERE seq = 3").fetchone()
        conn.execute(
            "UPDATE stored_turns SET body = REPLACE(body, 'Guardrails', 'Guardrailz') "
            "WHERE turn_id = 'eo-worldview-0001'"
        )
    assert code == 0, out
    assert out.splitlines() == [
        "tenant 'local': custody log intact · 3 records",
        "checked 2 turns and 0 results",
        f"head 3 {head}",
    ]
    assert "\x1b[" not in out  # plain text when piped

    code, out, _ = run_cli(capsys, "audit", "verify")
    assert code == 1
    first = out.splitlines()[0]
    assert first.startswith("tenant 'local': custody log BROKEN at record ")
    assert "(turn_stored 'eo-worldview-0001'): content_differs" in first
    assert "differs: s9 (instructions)" in out, out


def test_verify_json_is_the_endpoint_s_object(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "import", str(FIXTURES / "vendor_terms_turn.json"))[0] == 0
    with sqlite3.connect(data_dir / "provenance.db") as conn:
        conn.execute("DELETE FROM custody_log WHERE seq = 1")
    code, report, _ = run_cli(capsys, "audit", "verify", "--json")
    assert code == 1
    assert set(report) == {"tenant", "intact", "records", "head", "broken", "problems", "checked", "not_chained"}
    assert report["intact"] is False and report["records"] == 1
    assert report["broken"]["seq"] == 2 and report["broken"]["problem"] == "record_missing"
    assert report["broken"]["subject"] == "vendor-terms-0001"


def test_another_tenant_has_its_own_empty_log(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "import", str(FIXTURES / "vendor_terms_turn.json"))[0] == 0
    code, report, _ = run_cli(capsys, "audit", "verify", "--tenant", "other", "--json")
    assert code == 0
    assert (report["tenant"], report["records"], report["head"], report["checked"]["turns"]) == ("other", 0, None, 0)
