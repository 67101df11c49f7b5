"""gate, quote and trace on a conversation log as an agent left it (no store): its last turn, or ``--turn N``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli_run import run_cli

from provenance_api.importers import detect_format, import_conversation

TAU = Path(__file__).resolve().parents[1] / "data" / "tau-bench" / "airline-gpt-4o-dev.json"
STORED = Path(__file__).resolve().parents[2] / "fixtures" / "vendor_terms_turn.json"


@pytest.fixture
def log(tmp_path: Path) -> tuple[Path, list[Any]]:
    conversation = json.loads(TAU.read_text(encoding="utf-8"))[0]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(conversation), encoding="utf-8")
    turns = import_conversation(conversation, detect_format(conversation), conversation_id="run.json").turns
    assert len(turns) >= 3
    return path, turns


def test_gate_reads_a_conversation_log_and_works_on_its_last_turn(
    log: tuple[Path, list[Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, turns = log
    code, gate, err = run_cli(capsys, "gate", str(path), "--json")
    assert code == 0, err
    said = " ".join(seg["text"] for seg in gate["segments"])
    assert said.split() == turns[-1].response.split()
    code, first, err = run_cli(capsys, "gate", str(path), "--json", "--turn", "0")
    assert code == 0, err
    assert " ".join(seg["text"] for seg in first["segments"]).split() == turns[0].response.split() != said.split()
    code, third, _ = run_cli(capsys, "gate", str(path), "--json", "--turn", "2")
    assert third["summary"]["actions"] == len(third["actions"]) == 2  # the τ-bench turn that called two tools


def test_quote_prices_a_sentence_or_an_action_of_a_log(
    log: tuple[Path, list[Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = log
    code, sentence, err = run_cli(capsys, "quote", str(path), "r0", "--turn", "2", "--json", "--model", "openai/gpt-4o")
    assert code == 0, err
    code, action, err = run_cli(capsys, "quote", str(path), "a0", "--turn", "2", "--json", "--model", "openai/gpt-4o")
    assert code == 0, err
    # the first call was made before any tool returned: its context has fewer sources than the answer's
    assert action["sources"] < sentence["sources"] and action["planned_calls"] < sentence["planned_calls"]


def test_a_turn_out_of_range_or_a_stored_turn_with_turn_is_a_usage_error(
    log: tuple[Path, list[Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, turns = log
    code, problem, _ = run_cli(capsys, "gate", str(path), "--json", "--turn", str(len(turns)))
    assert code == 2 and problem["error"]["field"] == "--turn"
    assert f"has {len(turns)} turns; there is no turn {len(turns)}" in problem["error"]["detail"]
    code, problem, _ = run_cli(capsys, "gate", str(STORED), "--json", "--turn", "0")
    assert code == 2 and problem["error"]["field"] == "--turn" and "stored turn" in problem["error"]["detail"]
    code, problem, _ = run_cli(capsys, "quote", str(path), "a9", "--turn", "2", "--json")
    assert code == 2 and problem["error"]["field"] == "target" and "a0–a1" in problem["error"]["detail"]


def test_a_file_of_several_conversations_or_none_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    many = tmp_path / "many.jsonl"
    rows = json.loads(TAU.read_text(encoding="utf-8"))[:3]
    many.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, problem, _ = run_cli(capsys, "gate", str(many), "--json")
    assert code == 2 and problem["error"]["field"] == "FILE" and "holds 3 conversations" in problem["error"]["detail"]
    assert "provenance import" in problem["error"]["fix"]
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"hello": "world"}), encoding="utf-8")
    code, problem, _ = run_cli(capsys, "gate", str(odd), "--json")
    assert code == 2 and problem["error"]["field"] == "FILE" and "no message list" in problem["error"]["detail"]
    code, problem, _ = run_cli(capsys, "gate", str(tmp_path / "absent.json"), "--json")
    assert code == 2 and problem["error"]["field"] == "FILE"
