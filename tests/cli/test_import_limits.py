"""``provenance import`` of files under the API's limits, with progress and a summary a person can read (issue 29):
a turn, a line and a conversation over ``PROVENANCE_MAX_BODY_BYTES`` are rejected as the API rejects them, naming
the setting; a megabyte of junk prints a few lines per kind of error and how many more; progress is a bar on a
terminal and a line of counts every ``COUNT_EVERY`` seconds otherwise; warnings are counted apart from
rejections and fail nothing. The CLI runs in process (``main``), the API over ASGI (``InProcessApi``)."""

from __future__ import annotations

import dataclasses
import io
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.api_server import InProcessApi

from provenance_api.cli import style
from provenance_api.cli.main import main
from provenance_api.cli.style import Progress, capped_lines, issue_kind
from provenance_api.importers import import_conversation
from provenance_api.importers.common import ImportIssue, ImportResult
from provenance_api.operations import imports as bulk
from provenance_api.storage.crud_turns import canonical

REPO = Path(__file__).resolve().parents[2]
ANTHROPIC = REPO / "tests/data/real/anthropic/parallel_tool_calls.json"
SETTING = "PROVENANCE_MAX_BODY_BYTES"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def chat(ident: str, answer: str, tool_output: str = "order shipped") -> dict[str, Any]:
    return {
        "id": ident,
        "messages": [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": f"Where is order {ident}?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"call_{ident}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{ident}", "content": tool_output},
            {"role": "assistant", "content": answer},
        ],
    }


def line(conversation: dict[str, Any]) -> str:
    return json.dumps(conversation, separators=(",", ":"))


# --- the same limits on every path --------------------------------------------------------------------------


def doubled_turn() -> tuple[dict[str, Any], int, int]:
    """An Anthropic conversation (a real one, its first tool result made long) whose stored turn holds the tool
    result twice (as a model message and as the call's return): (conversation, its size as a line, its turn's
    size as stored)."""
    conversation = json.loads(ANTHROPIC.read_text(encoding="utf-8"))
    results = [b for m in conversation["messages"] for b in m["content"] if b.get("type") == "tool_result"]
    results[0]["content"] = "alice is bob's wife. " * 1500
    ident = bulk.conversation_id(bulk.Item("", "anthropic.jsonl", 1, obj=conversation))  # as the import names it
    turns = import_conversation(conversation, None, conversation_id=ident).turns
    assert len(turns) == 1
    return conversation, len(line(conversation).encode()), len(canonical(turns[0])[0].encode())


def test_a_turn_over_the_apis_limit_is_rejected_by_the_cli_as_by_the_api_naming_the_setting(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    conversation, line_bytes, turn_bytes = doubled_turn()
    limit = (line_bytes + turn_bytes) // 2
    assert line_bytes < limit < turn_bytes  # the line is within the limit, its turn is not
    path = data_dir / "anthropic.jsonl"
    path.write_text(line(conversation) + "\n", encoding="utf-8")

    monkeypatch.setenv(SETTING, str(limit))
    code, out, _ = run(capsys, "import", str(path), "--json")
    cli = json.loads(out)
    assert code == 1 and (cli["imported"], cli["rejected"]) == (0, 1), cli
    reason = cli["errors"][0]["reason"]
    assert f"{turn_bytes:,} bytes as stored, over this server's limit of {limit:,} bytes" in reason
    assert f"raise {SETTING}" in reason

    with (
        InProcessApi(data_dir / "api", max_body_bytes=limit, warm_up=False) as api,
        api.client(api.admin_key) as client,
    ):
        answer = client.post("/v1/imports", content=path.read_bytes(), params={"name": "anthropic.jsonl"})
    assert answer.status_code == 200, answer.text
    assert (answer.json()["rejected"], answer.json()["errors"][0]["reason"]) == (1, reason)
    capsys.readouterr()  # what the service printed when it started

    monkeypatch.setenv(SETTING, str(turn_bytes + 1))  # the setting is what to change
    code, out, _ = run(capsys, "import", str(path), "--json")
    assert code == 0 and json.loads(out)["imported"] == 1


def test_a_line_over_the_apis_limit_is_rejected_unread_naming_the_setting(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SETTING, "20000")
    long = line(chat("long", "Order long shipped.", "x" * 30_000))
    path = data_dir / "history.jsonl"
    path.write_text("\n".join([line(chat("a", "Order a shipped.")), long, line(chat("b", "Order b shipped."))]) + "\n")
    code, out, _ = run(capsys, "import", str(path), "--json")
    counts = json.loads(out)
    assert code == 1 and (counts["imported"], counts["rejected"]) == (2, 1), counts
    assert counts["errors"][0]["where"] == f"{path}:2"
    assert counts["errors"][0]["reason"].startswith(f"line 2 is {len(long):,} bytes, over the limit of 20,000 bytes")
    assert SETTING in counts["errors"][0]["reason"]

    # a JSON file: a list is limited per conversation, a single conversation as the file
    listed = data_dir / "listed.json"
    listed.write_text(json.dumps([chat("c", "Order c shipped."), json.loads(long)]), encoding="utf-8")
    single = data_dir / "single.json"
    single.write_text(long, encoding="utf-8")
    code, out, _ = run(capsys, "import", str(listed), str(single), "--json")
    counts = json.loads(out)
    assert (counts["imported"], counts["rejected"]) == (1, 2), counts
    assert [e["where"] for e in counts["errors"]] == [f"{listed}[1]", str(single)]
    assert counts["errors"][0]["reason"].startswith(f"conversation 1 is {len(long):,} bytes")
    assert counts["errors"][1]["reason"].startswith(f"the file is {len(long):,} bytes")

    monkeypatch.setenv(SETTING, "100000")
    code, out, _ = run(capsys, "import", str(path), "--json")
    assert code == 0 and json.loads(out)["imported"] == 1  # the long line; the two others are unchanged


def test_the_line_reader_skips_an_over_long_line_without_holding_it() -> None:
    data = b"short\r\n" + b"y" * 5000 + b"\n\nlast"
    lines = list(bulk.read_lines(io.BytesIO(data), 100))
    assert lines == [(b"short\r", 6, 7), (None, 5000, 5001), (b"", 0, 1), (b"last", 4, 4)]
    assert sum(used for _, _, used in lines) == len(data)
    assert list(bulk.read_lines(io.BytesIO(data))) == [
        (b"short\r", 6, 7),
        (b"y" * 5000, 5000, 5001),
        (b"", 0, 1),
        (b"last", 4, 4),
    ]


def test_a_turn_nested_over_the_limit_is_rejected_alike_by_the_cli_and_the_api(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep: Any = "bottom"
    for _ in range(70):
        deep = {"a": deep}
    conversation = chat("deep", "Order deep shipped.")
    conversation["messages"][2]["tool_calls"][0]["function"]["arguments"] = json.dumps(deep)
    path = data_dir / "deep.jsonl"
    path.write_text(line(conversation) + "\n", encoding="utf-8")
    code, out, _ = run(capsys, "import", str(path), "--json")
    cli = json.loads(out)
    assert code == 1 and cli["rejected"] == 1 and "nests more than 64 levels" in cli["errors"][0]["reason"]
    with InProcessApi(data_dir / "api", warm_up=False) as api, api.client(api.admin_key) as client:
        answer = client.post("/v1/imports", content=path.read_bytes(), params={"name": "deep.jsonl"})
    assert answer.json()["errors"][0]["reason"] == cli["errors"][0]["reason"]


# --- a megabyte of junk -------------------------------------------------------------------------------------


def test_a_megabyte_of_junk_prints_a_few_lines_of_each_kind_and_how_many_more(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(29)
    junk = data_dir / "junk.jsonl"
    junk.write_bytes(bytes(rng.randrange(256) for _ in range(1_000_000)))
    code, out, _ = run(capsys, "import", str(junk), "--json")
    every = json.loads(out)
    assert code == 1 and every["rejected"] == len(every["errors"]) > 3000  # --json keeps every one
    kinds = {issue_kind(e["reason"]) for e in every["errors"]}
    assert {"not UTF-8", "invalid JSON"} <= kinds

    code, out, _ = run(capsys, "import", str(junk))
    lines = out.splitlines()
    assert code == 1 and re.match(r"tenant 'local': \d+ conversations: 0 imported, ", lines[0]), lines[0]
    shown = [ln for ln in lines[1:] if not ln.startswith("  … and ")]
    more = [ln for ln in lines[1:] if ln.startswith("  … and ")]
    assert len(shown) <= 20 and len(lines) <= 21 + len(kinds)
    found = [re.match(r"  … and ([\d,]+) more", ln) for ln in more]
    counted = sum(int(m[1].replace(",", "")) for m in found if m is not None)
    assert len(shown) + counted == every["rejected"]
    assert all(ln.endswith("(all of them: --json)") for ln in more) and 2 <= len(more) <= len(kinds)


def test_capped_lines_show_every_kind_before_more_of_one() -> None:
    issues = [{"where": f"f:{i}", "reason": f"invalid JSON: column {i}"} for i in range(30)]
    issues.insert(25, {"where": "f:x", "reason": "not UTF-8 (invalid start byte at byte 3)"})
    lines = capped_lines(issues, per_kind=5, total=6)
    assert lines[:6] == [*(f"  f:{i}: invalid JSON: column {i}" for i in range(5)), lines[5]]
    assert "f:x: not UTF-8" in lines[5]  # the rarer kind is shown although the common one came first
    assert lines[6:] == ["  … and 25 more like 'invalid JSON'"]
    assert issue_kind("turn 'a:1' is 3,000 bytes as stored, over this server's limit of 2,000 bytes (X)") == (
        "turn … is … bytes as stored, over this server's limit of … bytes"
    )


# --- progress -----------------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_redirected_progress_writes_a_line_of_counts_every_ten_seconds_not_one_per_conversation() -> None:
    clock = Clock()
    stream = io.StringIO()
    shown = Progress(stream, live=False, clock=clock)
    for n in range(3500):  # 3,500 conversations over 35 s
        clock.now = n / 100
        shown.count("importing", f"{n} conversations", n / 3500, f"{n / 100:.1f} of 35.0 MB")
    lines = stream.getvalue().splitlines()
    assert lines == [
        "[importing] 29% (10.0 of 35.0 MB) after 10 s: 1000 conversations",
        "[importing] 57% (20.0 of 35.0 MB) after 20 s: 2000 conversations",
        "[importing] 86% (30.0 of 35.0 MB) after 30 s: 3000 conversations",
    ]
    assert "\r" not in stream.getvalue()


def test_progress_on_a_terminal_is_a_bar_redrawn_at_most_ten_times_a_second() -> None:
    clock = Clock()
    stream = Terminal()
    shown = Progress.for_stream(stream, no_color=True)
    shown.clock = clock
    assert shown.live
    for n in range(1, 1001):  # 1,000 conversations over 2 s
        clock.now = n / 500
        shown.count("importing", f"{n} conversations", n / 1000, f"{n / 100:.1f} of 10.0 MB")
    shown.done()
    frames = stream.getvalue().split("\r\x1b[K")[1:]
    assert 15 <= len(frames) <= 21  # not 1,000
    found = [re.match(r"\[importing\] (█*)(░*) +(\d+)% [\d.]+ of 10\.0 MB · \d+ conversations", f) for f in frames]
    bars = [(m[1], m[2], int(m[3])) for m in found if m is not None]
    assert len(bars) == len(frames) and all(len(filled + empty) == 24 for filled, empty, _ in bars), frames
    assert (bars[0][0], bars[0][2]) == ("", 0)
    assert len(bars[-1][0]) >= 22 and bars[-1][2] >= 90
    assert stream.getvalue().endswith("\n")


def test_progress_counts_appear_when_not_a_terminal(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(style, "COUNT_EVERY", 0.0)  # a line at every conversation, instead of every 10 s
    path = data_dir / "history.jsonl"
    path.write_text("\n".join(line(chat(f"c{i}", f"Order c{i} shipped.")) for i in range(5)) + "\n")
    code, out, err = run(capsys, "import", str(path))
    assert code == 0 and "5 imported" in out
    counts = [ln for ln in err.splitlines() if ln.startswith("[importing] ")]
    assert len(counts) >= 5 and "\r" not in err
    assert re.match(r"\[importing\] 100% \([\d.]+ of [\d.]+ kB\) after \d+ s: 5 conversations: 5 imported", counts[-1])
    assert "20%" in counts[0] and "1 conversation: " in counts[0]


# --- warnings -----------------------------------------------------------------------------------------------


def test_warnings_are_counted_apart_from_rejections_and_do_not_fail_the_import() -> None:
    counts = bulk.ImportCounts()
    counts.imported = 2
    counts.warn("history.jsonl:1: message 2", "an image named, not inlined")
    assert not counts.failed and counts.rejected == 0
    assert counts.line() == "0 conversations: 2 imported, 0 unchanged, 0 conflicting, 0 rejected, 1 warning, 0 noted"
    warning = {"where": "history.jsonl:1: message 2", "reason": "an image named, not inlined"}
    assert counts.to_dict()["warnings"] == [warning] and counts.to_dict()["errors"] == []
    counts.reject("history.jsonl:2", "invalid JSON")
    assert counts.failed and "1 rejected, 1 warning," in counts.line()


@pytest.fixture
def warning_importer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The importer as it is, plus one warning per conversation (as for a part it read only in part)."""

    def importing(obj: Any, format: str | None = None, *, conversation_id: str) -> ImportResult:
        result = import_conversation(obj, format, conversation_id=conversation_id)
        return dataclasses.replace(result, warnings=[ImportIssue("message 1", "an image named, not inlined")])

    monkeypatch.setattr(bulk, "import_conversation", importing)
    yield


def test_warnings_do_not_make_the_import_exit_1_and_are_printed_apart(
    data_dir: Path, warning_importer: None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = data_dir / "history.jsonl"
    path.write_text("\n".join(line(chat(f"c{i}", f"Order c{i} shipped.")) for i in range(3)) + "\n")
    code, out, _ = run(capsys, "import", str(path))
    assert code == 0
    assert "3 imported, 0 unchanged, 0 conflicting, 0 rejected, 3 warnings, 0 noted" in out
    assert out.count("  warning: ") == 3 and f"warning: {path}:1: message 1: an image named" in out
    code, out, _ = run(capsys, "import", str(path), "--json")
    counts = json.loads(out)
    assert code == 0 and (counts["unchanged"], counts["rejected"], len(counts["warnings"])) == (3, 0, 3)


def test_the_api_reports_warnings_apart_from_rejections(data_dir: Path, warning_importer: None) -> None:
    body = "\n".join([line(chat("a", "Order a shipped.")), "{not json"]).encode()
    with InProcessApi(data_dir / "api", warm_up=False) as api, api.client(api.admin_key) as client:
        answer = client.post("/v1/imports", content=body, params={"name": "up"})
    data = answer.json()
    assert (data["imported"], data["rejected"], len(data["errors"])) == (1, 1, 1)
    assert data["warnings"] == [{"where": "line 1: message 1", "reason": "an image named, not inlined"}]
