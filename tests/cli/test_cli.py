"""The command line on stored-turn files: the stable JSON contracts and the trace over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_openai import FakeOpenAI

from provenance_api.cli.main import main

FIXTURE_A = str(Path(__file__).resolve().parents[2] / "fixtures" / "eo_worldview_turn.json")
NOTE = "Non-authoritative note: classification maps can change"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_gate_json_is_the_stable_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gate", FIXTURE_A, "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data["summary"]) >= {
        "sources",
        "sentences",
        "traceable",
        "quoted",
        "agent_voice",
        "action",
        "unanchored",
    }
    # 5 tools, the system prompt's 8 rules (instructions_as_rules, the default), 2 history items
    assert data["summary"]["sources"] == 15 and data["summary"]["sentences"] == 13
    for seg in data["segments"]:
        assert set(seg) >= {"id", "text", "start", "end", "status", "class", "anchors", "citations"}
        for c in seg["citations"]:
            assert set(c) >= {"source_id", "line_start", "line_end"}
    quoted = [s for s in data["segments"] if s["status"] == "quoted"]
    assert quoted and all(s["citations"] for s in quoted)


def test_gate_text_starts_with_the_summary_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gate", FIXTURE_A)
    assert code == 0
    assert out.splitlines()[1].startswith("15 sources · 13 sentences:")


def test_quote_json_is_the_stable_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "quote", FIXTURE_A, NOTE, "--json")
    assert code == 0
    data = json.loads(out)
    # 15 sources with the prompt split into its rules: (3+2) + (12+2) + 2·12 = 43 and the redundancy that fits under
    # MAX_CALLS (the paper's 31 + 8 are counted on the prompt kept whole: tests/method/test_cost.py)
    assert data["planned_calls"] == 43 + 5 and data["calls"]["redundancy"] == 5 and data["refused"] is None
    assert isinstance(data["input_tokens"], int) and data["input_tokens"] > 0
    window = [w for w in data["warnings"] if "700-token" in w]
    assert [w.split(" ", 1)[0] for w in window] == ["s3"]  # it names its source; every rule fits the window
    assert "cost_usd" in data


def test_quote_with_an_unpriced_model_reports_unknown_cost(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "quote", FIXTURE_A, NOTE, "--model", "openai/house-model-7", "--json")
    assert code == 0 and json.loads(out)["cost_usd"] is None


def test_sentence_not_in_the_response_is_refused_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "quote", FIXTURE_A, "The moon is made of cheese.")
    assert code == 2
    assert "does not occur in the turn's response" in err and "fix:" in err


def test_missing_file_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "gate", str(tmp_path / "absent.json"))
    assert code == 2 and "no such file" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"turn_id": "x"}', encoding="utf-8")
    code, _, err = run(capsys, "gate", str(bad))
    assert code == 2 and "field response" in err


def _judge(request: dict[str, Any]) -> str:
    system = request["messages"][0]["content"]
    if "strict judge of support" in system:
        user = request["messages"][-1]["content"]
        return "5" if "] instructions §" in user else "1"  # any rule of the agent's instructions shown
    return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "nothing"})


def test_trace_runs_over_real_http_and_never_exceeds_the_quote(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAI(_judge) as srv:
        code, out, err = run(
            capsys,
            "trace",
            FIXTURE_A,
            NOTE,
            "--model",
            "openai/fake",
            "--api-base",
            srv.base_url,
            "--api-key",
            "test-key",
            "--yes",
            "--json",
        )
        answered = srv.answered
    assert code == 0, err
    data = json.loads(out)
    assert set(data) >= {
        "gamma",
        "s_all",
        "s_none",
        "verdict",
        "layers",
        "sources",
        "omitted",
        "calls",
        "usage",
        "cost_usd",
    }
    assert data["gamma"] == 4.0 and data["verdict"] == "attributed"
    assert data["calls"]["made"] <= data["calls"]["planned"] == 48 and data["calls"]["refused"] == 0
    assert data["calls"]["made"] == answered
    assert "calls" in err  # progress went to stderr
    window = [w for w in data["warnings"] if "700-token" in w]
    assert {w.split(" ", 1)[0] for w in window} == {"s3"}  # the corpus's cuts reach the result
    assert all(s["alone"] is None or isinstance(s["alone"], float) for s in data["sources"])


def test_trace_text_prints_the_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAI(_judge) as srv:
        code, out, err = run(
            capsys,
            "trace",
            FIXTURE_A,
            NOTE,
            "--model",
            "openai/fake",
            "--api-base",
            srv.base_url,
            "--api-key",
            "test-key",
            "--yes",
        )
    assert code == 0, err
    assert "⚠ s3 (read_file: playbooks/land_cover_change.md)" in out and "700-token" in out
    assert "⚠ s3 (read_file: playbooks/land_cover_change.md)" in err  # the quote, before consent


def test_trace_without_consent_spends_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAI(_judge) as srv:
        code, _, err = run(capsys, "trace", FIXTURE_A, NOTE, "--model", "openai/fake", "--api-base", srv.base_url)
        assert srv.requests == []
    assert code == 2 and "nothing was spent" in err


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when this returns: nothing listens there


def test_trace_against_an_unreachable_endpoint_fails_with_the_cause_and_the_fix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The finding: a trace whose every call failed printed "Verdict: no information" and exited 0. Now the
    endpoint is checked before the gate: exit 1, the cause and the flag to fix, nothing asked or spent."""
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    code, out, err = run(
        capsys,
        "trace",
        FIXTURE_A,
        NOTE,
        "--model",
        "openai/local",
        "--api-base",
        base,
        "--api-key",
        "test-key",
        "--yes",
        "--json",
        "--timeout",
        "5",
    )
    assert code == 1
    failed = json.loads(out)["error"]
    assert "gamma" not in failed and "verdict" not in failed
    assert "cannot reach" in failed["detail"] and base in failed["detail"]
    assert failed["field"] == "--api-base" and "--api-base" in failed["fix"]
    assert "Verdict" not in err and "Model calls" not in err  # no gate: the check comes first


def test_trace_whose_provider_refuses_every_call_fails_and_names_the_key_setting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from support.fake_openai import FakeReply

    with FakeOpenAI(lambda request: FakeReply.error(401, "Incorrect API key provided")) as srv:
        code, out, err = run(
            capsys,
            "trace",
            FIXTURE_A,
            NOTE,
            "--model",
            "openai/fake",
            "--api-base",
            srv.base_url,
            "--api-key",
            "wrong",
            "--yes",
        )
    assert code == 1 and "Verdict" not in out
    assert "every model call failed" in err and "key" in err.split("fix:", 1)[1]
