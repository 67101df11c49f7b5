"""Running the ``provenance`` command in this process, as a test reads it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from provenance_api.cli.main import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """(exit status, stdout — parsed when it is JSON, else the text —, stderr) of ``provenance ARGV``."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    try:
        return code, json.loads(out), err
    except json.JSONDecodeError:
        return code, out, err
