"""The command line behaves like the tools its users know: `--version`, and errors as JSON when JSON was
asked for (a script parsing stdout gets a problem object, not a plain line on stderr)."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest

from provenance_api.cli.main import main


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"provenance {version('provenance-service')}"


def test_an_error_under_json_is_a_problem_object_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["quote", "no-such-turn.json", "any sentence", "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and err == ""
    problem = json.loads(out)["error"]
    assert problem["status"] == 422 and problem["field"] == "FILE"
    assert "no-such-turn.json" in problem["detail"] and problem["fix"]


def test_an_error_without_json_stays_a_plain_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["quote", "no-such-turn.json", "any sentence"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("provenance: Invalid input: no such file") and "fix:" in err
