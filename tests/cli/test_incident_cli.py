"""``provenance incident TURN_ID TARGET``: the incident export from the local store. Exit 0 with the Markdown (plain
text when piped) or, with ``--format json``, exactly the object ``GET /v1/turns/{id}/incident`` returns for the same
store; 1 naming the reason for a turn or a target the store does not have; 2 for a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.api_server import InProcessApi
from support.cli_run import run_cli
from support.incident_turns import REPORT, TURN_ID, notes_turn


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    """A data directory holding the notes turn, stored by ``provenance import`` for the admin tenant."""
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path / "data"))
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps(notes_turn().model_dump(mode="json")), encoding="utf-8")
    code, _, err = run_cli(capsys, "import", str(turn))
    assert code == 0, err
    return tmp_path / "data"


def test_json_is_the_api_s_object_for_the_same_store(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, printed, err = run_cli(capsys, "incident", TURN_ID, "a1", "--format", "json")
    assert code == 0, err
    with InProcessApi(data_dir, warm_up=False) as srv, srv.client(srv.key("local", "ann")) as client:
        served = client.get(f"/v1/turns/{TURN_ID}/incident", params={"target": "a1"})
        markdown = client.get(f"/v1/turns/{TURN_ID}/incident", params={"target": "r1", "format": "markdown"}).text
    capsys.readouterr()  # the service's first start printed its admin key
    assert served.status_code == 200, served.text
    assert printed == served.json()
    assert printed["target"]["id"] == "a1" and printed["chain"]["reported_by"][0]["text"] == REPORT
    assert printed["custody_log"]["intact"] is True and printed["custody_log"]["record"]["seq"] >= 1
    code, text, _ = run_cli(capsys, "incident", TURN_ID, "r1")  # Markdown by default: the API's bytes
    assert code == 0 and text == markdown
    assert text.startswith("# Incident: sentence r1 ") and "\x1b[" not in text


def test_a_missing_turn_or_target_exits_1_with_the_reason(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "incident", "nope", "a1")
    assert (code, out) == (1, "") and "no stored turn 'nope'" in err
    assert f"stored turns, newest first: {TURN_ID} (GET /v1/turns lists them all)" in err  # where to find the id
    code, out, err = run_cli(capsys, "incident", TURN_ID, "a99")
    assert (code, out) == (1, "") and "a0…a1" in err and "fix:" in err
    code, out, err = run_cli(capsys, "incident", TURN_ID, "a1", "--tenant", "other")
    assert (code, out) == (1, "") and "tenant 'other'" in err
    assert "the store holds no turn of this tenant: provenance import FILE stores a history" in err


def test_a_usage_error_exits_2(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as missing:
        run_cli(capsys, "incident", TURN_ID)
    with pytest.raises(SystemExit) as bad_format:
        run_cli(capsys, "incident", TURN_ID, "a1", "--format", "pdf")
    assert missing.value.code == 2 and bad_format.value.code == 2
    assert "TARGET" in capsys.readouterr().err
