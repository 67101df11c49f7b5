"""The command line behaves like the tools its users know (``gh``, ``llm``): `--version`; errors as JSON when JSON
was asked for; colour and in-place progress on a terminal only (never into a pipe or file, never with
``NO_COLOR`` or ``--no-color``); the claim echoed when it is given by its segment id; plurals right; plain-text
help; and a log of past traces (``provenance traces``) that ``--no-log`` / ``PROVENANCE_NO_LOG`` keep empty."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pytest
from support.api_server import KeyedJudge, small_turn
from support.fake_openai import FakeOpenAI, FakeReply

from provenance_api.cli.main import build_parser, main

REPO = Path(__file__).resolve().parents[2]
FIXTURE = str(REPO / "fixtures" / "eo_worldview_turn.json")
SENTENCE = "Order A-1 shipped on 2025-03-03 with DHL."
ESC = "\x1b["


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


# --------------------------------------------------------------------------- terminals and pipes


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "PROVENANCE_NO_LOG")}
    return {**env, "TERM": "xterm-256color", "PROVENANCE_DATA_DIR": str(data_dir), **extra}


def _command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "provenance_api.cli.main", *argv]


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str = ""


def piped(env: dict[str, str], *argv: str) -> Ran:
    """The command with stdout and stderr redirected (pipes), as a script or `> file` runs it."""
    done = subprocess.run(
        _command(*argv), env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600, check=False
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def on_terminal(env: dict[str, str], *argv: str) -> Ran:
    """The command on a pseudo-terminal (stdin, stdout and stderr), as a person runs it; both streams in ``out``."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(_command(*argv), env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    code = proc.wait(timeout=600)
    os.close(master)
    return Ran(code, b"".join(chunks).decode("utf-8", "replace"))


@dataclass(frozen=True)
class Traced:
    data_dir: Path
    turn: Path
    piped: Ran
    terminal: Ran


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traced]:
    """One trace with its output redirected (logged) and one on a terminal (``PROVENANCE_NO_LOG=1``), by segment
    id, against a scripted OpenAI-compatible judge on loopback."""
    data_dir = tmp_path_factory.mktemp("cli-data")
    turn = data_dir / "turn.json"
    turn.write_text(json.dumps(small_turn()), encoding="utf-8")
    judge = KeyedJudge()
    with FakeOpenAI(lambda req: FakeReply(text=judge.openai(req)), api_key="sk-cli") as srv:
        argv = (
            "trace",
            str(turn),
            "r0",
            "--model",
            "openai/fake",
            "--api-base",
            srv.base_url,
            "--api-key",
            "sk-cli",
            "--yes",
        )
        redirected = piped(_env(data_dir), *argv)
        terminal = on_terminal(_env(data_dir, PROVENANCE_NO_LOG="1"), *argv, "--no-cache")
    yield Traced(data_dir, turn, redirected, terminal)


@pytest.mark.slow  # child processes: two CLI traces, each importing the provider library
def test_redirected_output_has_no_colour_and_no_carriage_return(traced: Traced) -> None:
    ran = traced.piped
    assert ran.code == 0, ran.err
    for stream in (ran.out, ran.err):
        assert ESC not in stream and "\r" not in stream
    assert "[round1]" in ran.err  # progress is still reported, as plain lines
    assert "Verdict: attributed" in ran.out


@pytest.mark.slow  # child processes: two CLI traces, each importing the provider library
def test_a_terminal_gets_colour_and_progress_redrawn_in_place(traced: Traced) -> None:
    ran = traced.terminal
    assert ran.code == 0, ran.out
    assert "\r\x1b[K" in ran.out  # the progress line is redrawn
    assert "\x1b[1mVerdict:\x1b[0m" in ran.out and "\x1b[32mattributed\x1b[0m" in ran.out


@pytest.mark.parametrize(("extra", "flag"), [({"NO_COLOR": "1"}, ()), ({}, ("--no-color",)), ({"TERM": "dumb"}, ())])
def test_no_color_turns_colour_off_on_a_terminal(tmp_path: Path, extra: dict[str, str], flag: tuple[str, ...]) -> None:
    ran = on_terminal(_env(tmp_path, **extra), "gate", FIXTURE, *flag)
    assert ran.code == 0 and "15 sources · 13 sentences" in ran.out  # the prompt's 8 rules are sources
    assert ESC not in ran.out


def test_a_terminal_gets_colour_from_gate(tmp_path: Path) -> None:
    ran = on_terminal(_env(tmp_path), "gate", FIXTURE)
    assert ran.code == 0 and "\x1b[1mSentences\x1b[0m" in ran.out and "\x1b[32mtraceable" in ran.out


# --------------------------------------------------------------------------- the claim, plurals, help


@pytest.mark.slow  # child processes: two CLI traces, each importing the provider library
def test_trace_and_quote_echo_the_claim_given_by_its_segment_id(
    traced: Traced, capsys: pytest.CaptureFixture[str]
) -> None:
    assert f'Sentence          r0 "{SENTENCE}"' in traced.piped.err  # the gate, before consent
    assert f'Claim: "{SENTENCE}"' in traced.piped.out  # the result
    assert main(["quote", str(traced.turn), "r0"]) == 0
    assert f'Sentence          r0 "{SENTENCE}"' in capsys.readouterr().out


def test_counts_take_the_right_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gate", FIXTURE]) == 0
    summary = capsys.readouterr().out.splitlines()[1]
    assert "1 report of an action" in summary and "1 reports" not in summary
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path / "data"))
    assert main(["import", str(REPO / "fixtures" / "history" / "openai_chat" / "refunds.json")]) == 0
    line = capsys.readouterr().out
    assert "1 conversation: 2 imported" in line and "1 conversations" not in line  # one conversation, two turns


def _parsers() -> Iterator[tuple[str, str]]:
    top = build_parser()
    yield "provenance", top.format_help()
    stack = [(top, "provenance")]
    while stack:
        parser, name = stack.pop()
        for group in parser._subparsers._group_actions if parser._subparsers else ():
            for sub_name, sub in getattr(group, "choices", {}).items():
                yield f"{name} {sub_name}", sub.format_help()
                stack.append((sub, f"{name} {sub_name}"))


def test_help_is_plain_text_without_markup() -> None:
    helps = dict(_parsers())
    assert {"provenance trace", "provenance traces show", "provenance explain", "provenance keys create"} <= set(helps)
    for name, text in helps.items():
        assert "``" not in text and ":class:" not in text and ":func:" not in text, name
    assert "Exit status" in helps["provenance"] and "NO_COLOR" in helps["provenance"]


# --------------------------------------------------------------------------- the trace log


@pytest.mark.slow  # child processes: two CLI traces, each importing the provider library
def test_traces_lists_the_logged_trace_and_shows_it(
    traced: Traced, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(traced.data_dir))
    assert main(["traces", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    assert len(items) == 1  # the run under PROVENANCE_NO_LOG=1 left no record
    item = items[0]
    assert (item["claim"], item["verdict"], item["model"], item["source"]) == (
        SENTENCE,
        "attributed",
        "openai/fake",
        "cli",
    )
    assert item["trace_id"] in traced.piped.err  # "logged as tr_…"
    assert main(["traces"]) == 0
    header, *row = capsys.readouterr().out.splitlines()
    assert header.split("\t")[0] == "ID"  # redirected: the header row, then one tab-separated line per trace
    assert len(row) == 1 and row[0].split("\t")[0] == item["trace_id"] and row[0].endswith(SENTENCE)
    assert main(["traces", "show", item["trace_id"]]) == 0
    shown = capsys.readouterr().out
    assert f"Trace {item['trace_id']}" in shown and "run by cli" in shown and "Verdict: attributed" in shown
    assert main(["traces", "show", item["trace_id"], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trace_id"] == item["trace_id"] and out["calls"] == item["calls"] and out["result"]["verdict"]
    assert main(["traces", "show", "tr_nope"]) == 2
    assert "provenance traces lists the logged traces" in capsys.readouterr().err


@pytest.mark.slow  # child processes: two CLI traces, each importing the provider library
def test_traces_on_a_terminal_is_a_table_with_a_header(traced: Traced) -> None:
    ran = on_terminal(_env(traced.data_dir, NO_COLOR="1"), "traces")
    header = ran.out.splitlines()[0]
    assert ran.code == 0 and header.split()[:2] == ["ID", "DATE"] and header.rstrip().endswith("CLAIM")
    assert "1 trace · provenance traces show ID" in ran.out


def test_no_log_leaves_no_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path))
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps(small_turn()), encoding="utf-8")
    judge = KeyedJudge()
    with FakeOpenAI(lambda req: FakeReply(text=judge.openai(req))) as srv:
        assert (
            main(["trace", str(turn), "r0", "--model", "openai/fake", "--api-base", srv.base_url, "--yes", "--no-log"])
            == 0
        )
    assert "logged as" not in capsys.readouterr().err
    assert main(["traces", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"items": []}
