"""The service's layers are enforced: `lint-imports` keeps the contracts in pyproject.toml, and breaks
when a route reaches storage itself or the estimator imports the service."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages and the contracts, to break on purpose."""
    for name in ("provenance_api", "estimator", "prompts"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")


def test_the_layer_contracts_hold(tree: Path) -> None:
    done = _lint(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_route_that_imports_storage_breaks_the_contracts(tree: Path) -> None:
    _append(tree / "provenance_api/http/routes/turns.py", "from provenance_api.storage import crud_turns  # noqa")
    done = _lint(tree)
    assert done.returncode != 0
    assert "provenance_api.http.routes.turns -> provenance_api.storage.crud_turns" in done.stdout


def test_storage_that_imports_the_http_surface_breaks_the_layers(tree: Path) -> None:
    _append(tree / "provenance_api/storage/crud_traces.py", "from provenance_api.http import api_errors  # noqa")
    done = _lint(tree)
    assert done.returncode != 0
    assert "provenance_api.storage is not allowed to import provenance_api.http" in done.stdout


def test_an_estimator_that_imports_the_service_breaks_the_contracts(tree: Path) -> None:
    _append(tree / "estimator/loo/rounds.py", "import provenance_api.core.settings  # noqa")
    done = _lint(tree)
    assert done.returncode != 0
    assert "estimator.loo.rounds -> provenance_api.core.settings" in done.stdout


def test_a_cycle_between_the_estimators_parts_breaks_the_contracts(tree: Path) -> None:
    """The cycle the estimator used to hide behind imports inside functions: the rounds importing the assembly
    that imports the rounds. A new one fails CI here."""
    _append(tree / "estimator/loo/rounds.py", "import estimator.loo.assembly  # noqa")
    done = _lint(tree)
    assert done.returncode != 0
    assert "No cycles are allowed in estimator.loo" in done.stdout


def test_a_cycle_between_two_folders_of_the_estimator_breaks_the_contracts(tree: Path) -> None:
    _append(tree / "estimator/spans/verify.py", "import estimator.loo.driver  # noqa")
    done = _lint(tree)
    assert done.returncode != 0
    assert "No cycles are allowed in estimator." in done.stdout
