"""The gateway is the command line's alone: a module of another layer that imports it breaks the contracts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def test_an_operation_that_imports_the_gateway_breaks_the_contracts(tmp_path: Path) -> None:
    for name in ("provenance_api", "estimator", "prompts"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "provenance_api/operations/custody.py"
    target.write_text(target.read_text(encoding="utf-8") + "\nimport provenance_api.gateway.run  # noqa\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([str(LINT), "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "the MCP evidence gateway is started by the command line only" in done.stdout
    assert "provenance_api.operations.custody -> provenance_api.gateway.run" in done.stdout
