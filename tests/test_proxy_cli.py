"""``provenance trace --estimator proxy`` without a local scoring model: a problem naming the option and the fix,
and nothing spent (the end-to-end run with a real local model is in test_proxy_local.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_openai import FakeOpenAI

from provenance_api.cli.main import main

FIXTURE_A = str(Path(__file__).resolve().parents[1] / "fixtures" / "eo_worldview_turn.json")
NOTE = "Non-authoritative note: classification maps can change"


def _judge(request: dict[str, Any]) -> str:
    return "5" if request.get("max_tokens", 0) <= 8 else json.dumps(
        {"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"})


def test_a_proxy_trace_without_a_scorer_names_the_setting_and_spends_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAI(_judge) as srv:
        code = main(["trace", FIXTURE_A, NOTE, "--model", "openai/fake", "--api-base", srv.base_url, "--api-key",
                     "test-key", "--estimator", "proxy", "--yes"])
        sent = srv.requests
    _, err = capsys.readouterr()
    assert code == 2 and sent == []
    assert "--estimator proxy needs a local scoring model" in err
    assert "--local-model FILE.gguf" in err and "--scorer-api-base" in err
