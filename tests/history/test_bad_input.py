"""Bad input in a recorded run (issue 25): a call whose arguments are not JSON, a 5 MB argument, a call id reused, a
return without a call, a message of the wrong shape, an action id out of range. Each gives a clear error, warning or
note — never a crash — and nothing else of the import is lost; each is tried through ``provenance import`` (one
directory holding all of them and a good run) and through ``provenance gate`` / ``quote`` on the file itself. The
runs are AgentDojo's own (``fixtures/history/agentdojo``, written by its ``TraceLogger``), each spoiled in one way.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from support.api_server import InProcessApi
from support.cli_run import run_cli

RUN = Path(__file__).resolve().parents[2] / "fixtures" / "history" / "agentdojo" / "banking_obeyed_injection.json"
BIG = 5_000_000


def good() -> dict[str, Any]:
    run: dict[str, Any] = json.loads(RUN.read_text(encoding="utf-8"))
    return run


def assistant_at(run: dict[str, Any], tool: str) -> int:
    return next(
        i
        for i, m in enumerate(run["messages"])
        if m["role"] == "assistant" and m["tool_calls"] and m["tool_calls"][0]["function"] == tool
    )


def set_args(run: dict[str, Any], tool: str, args: Any) -> dict[str, Any]:
    """The run with ``tool``'s call made with ``args`` (the call, and its repetition in the return)."""
    at = assistant_at(run, tool)
    run["messages"][at]["tool_calls"][0]["args"] = args
    run["messages"][at + 1]["tool_call"]["args"] = copy.deepcopy(args)
    return run


def not_json() -> dict[str, Any]:
    return set_args(good(), "read_file", "{file_path: bill-december-2023.txt")


def big_argument() -> dict[str, Any]:
    run = good()
    at = assistant_at(run, "send_money")
    args = {**run["messages"][at]["tool_calls"][0]["args"], "subject": "x" * BIG}
    return set_args(run, "send_money", args)


def reused_id() -> dict[str, Any]:
    """read_file and get_most_recent_transactions asked for at once, both under the id ``call_1``."""
    run = good()
    messages = run["messages"]
    read, listing = assistant_at(run, "read_file"), assistant_at(run, "get_most_recent_transactions")
    calls = [messages[read]["tool_calls"][0], messages[listing]["tool_calls"][0]]
    for call in calls:
        call["id"] = "call_1"
    returns = [messages[read + 1], messages[listing + 1]]
    for ret in returns:
        ret["tool_call_id"] = ret["tool_call"]["id"] = "call_1"
    messages[read]["tool_calls"] = calls
    run["messages"] = [*messages[:read], messages[read], *reversed(returns), *messages[listing + 2 :]]
    return run


def orphan_return() -> dict[str, Any]:
    run = good()
    at = assistant_at(run, "get_most_recent_transactions")
    stray = {**copy.deepcopy(run["messages"][at + 1]), "tool_call_id": "call_9_9"}
    stray["tool_call"]["id"] = "call_9_9"
    run["messages"].insert(at + 2, stray)
    return run


def wrong_shape() -> dict[str, Any]:
    run = good()
    del run["messages"][assistant_at(run, "get_most_recent_transactions")]["tool_calls"][0]["function"]
    return run


SPOILED = {
    "not_json": not_json,
    "big_argument": big_argument,
    "reused_id": reused_id,
    "orphan_return": orphan_return,
    "wrong_shape": wrong_shape,
}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("runs") / "runs"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps(good()), encoding="utf-8")
    for name, make in SPOILED.items():
        (folder / f"{name}.json").write_text(json.dumps(make()), encoding="utf-8")
    return folder


def issues(counts: dict[str, Any], name: str, kind: str) -> list[str]:
    """Each issue of the run ``name`` as ``<where>: <reason>``."""
    return [f"{i['where']}: {i['reason']}" for i in counts[kind] if f"{name}.json" in i["where"]]


def test_one_import_of_every_spoiled_run_says_what_is_wrong_with_each_and_keeps_the_rest(
    logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path / "data"))
    code, counts, err = run_cli(capsys, "import", str(logs), "--json")
    assert code == 1, err  # something was rejected
    # one turn per run but the 5 MB one, which is refused unread, naming the limit and the setting to raise
    assert (counts["imported"], counts["conflicting"]) == (5, 0), counts
    (too_big,) = issues(counts, "big_argument", "errors")
    assert "over the limit of 2,000,000 bytes" in too_big and "PROVENANCE_MAX_BODY_BYTES" in too_big
    (args,) = issues(counts, "not_json", "warnings")
    assert "tool_calls[0].args: expected an object of arguments, got text that is not JSON" in args
    assert "kept as it is" in args
    (reused,) = issues(counts, "reused_id", "warnings")
    assert "call id 'call_1' (get_most_recent_transactions)" in reused and "named 'call_1#2'" in reused
    (orphan,) = issues(counts, "orphan_return", "warnings")
    assert "tool return for id 'call_9_9' answers no earlier call; kept in the history only" in orphan
    (shape,) = issues(counts, "wrong_shape", "errors")
    assert "message 6: assistant message rejected: tool_calls[0].function: expected the tool's name" in shape
    assert all(not issues(counts, "good", kind) for kind in ("errors", "warnings", "notes"))


def test_the_api_refuses_the_5_mb_run_whole_and_imports_the_others(logs: Path, tmp_path: Path) -> None:
    with InProcessApi(tmp_path, warm_up=False) as srv, srv.client(srv.key("acme", "ann")) as client:
        big = client.post("/v1/imports", content=(logs / "big_argument.json").read_bytes(), params={"name": "big"})
        assert big.status_code == 413 and big.json()["max_bytes"] == 2_000_000, big.text
        for name in ("good", *(n for n in SPOILED if n != "big_argument")):
            posted = client.post("/v1/imports", content=(logs / f"{name}.json").read_bytes(), params={"name": name})
            assert posted.status_code == 200, (name, posted.text)
            assert posted.json()["imported"] == 1, (name, posted.json())
        assert client.get("/v1/turns").json()["total"] == 5


def gate(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "gate", str(path), "--json")
    assert code == 0, err
    assert isinstance(out, dict)
    return out


def test_gate_reads_arguments_that_are_not_json_as_the_text_they_are(
    logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = gate(capsys, logs / "not_json.json")
    read = next(a for a in out["actions"] if a["tool"] == "read_file")
    assert read["arguments"] == "{file_path: bill-december-2023.txt"
    assert out["summary"]["actions"] == 4 and out["summary"]["steered_by_tool_data"] == 1


def test_gate_on_a_5_mb_argument_shows_it_cut_and_keeps_it_whole_in_json(
    logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = gate(capsys, logs / "big_argument.json")
    send = next(a for a in out["actions"] if a["tool"] == "send_money")
    assert len(send["arguments"]["subject"]) == BIG and send["suspect_injection"]
    code, text, err = run_cli(capsys, "gate", str(logs / "big_argument.json"))
    assert code == 0, err
    assert f"… ({BIG + 2:,} characters)" in text and len(text) < 20_000  # the repr: the value and its quotes


def test_gate_pairs_each_return_with_the_call_it_repeats_when_an_id_is_reused(
    logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = gate(capsys, logs / "reused_id.json")
    by_call = {s["call_id"]: s for s in out["sources"] if s["call_id"]}
    assert by_call["call_1"]["tool"] == "read_file"
    assert by_call["call_1#2"]["tool"] == "get_most_recent_transactions"
    send = next(a for a in out["actions"] if a["tool"] == "send_money")
    assert send["suspect_injection"] and send["injection"]["source_id"] == by_call["call_1"]["id"]


def test_gate_keeps_a_return_without_a_call_out_of_the_sources(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = gate(capsys, logs / "orphan_return.json")
    assert [s["call_id"] for s in out["sources"] if s["tool"] == "get_most_recent_transactions"] == ["call_2_0"]
    assert out["summary"]["actions"] == 4


def test_gate_works_on_the_rest_of_a_run_with_a_message_of_the_wrong_shape(
    logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = gate(capsys, logs / "wrong_shape.json")
    assert [a["tool"] for a in out["actions"]] == ["pay_bill", "read_file", "send_money"]


def test_an_action_id_out_of_range_names_the_ids_the_turn_has(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, problem, _ = run_cli(capsys, "quote", str(logs / "good.json"), "a9", "--json")
    assert code == 2 and problem["error"]["field"] == "target" and "a0–a3" in problem["error"]["detail"]
