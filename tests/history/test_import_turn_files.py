"""``provenance import`` and ``POST /v1/imports`` of stored-turn files (the CLI's own turn shape, as in
``fixtures/``): a single turn, a list of them and JSONL lines of them are stored whole under their own ids — the
system prompt, the history, the agent's own messages, the tool calls and the response exactly as in the file —
never read as a conversation of their ``model_messages`` (which kept the reply and lost everything else).

The expectations are the files' own JSON: what is read back through the API is compared with what the file says,
field by field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_server import InProcessApi
from support.cli_run import run_cli

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
# a pydantic-ai turn (its tool calls in model_messages, a system prompt, history) and two flat-call turns
EO = FIXTURES / "eo_worldview_turn.json"
FALLBACK = FIXTURES / "fallback_path_turn.json"
REDUNDANT = FIXTURES / "redundant_sources_turn.json"
KEPT = ("system_prompt", "system_prompt_versioned", "response", "model", "agent", "attachments")


def raw(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(data))
    return data


def stored(data_dir: Path, turn_id: str) -> dict[str, Any]:
    """The turn as the API reads it back (the admin tenant, where ``provenance import`` stores by default)."""
    with InProcessApi(data_dir, warm_up=False) as srv, srv.client(srv.admin_key) as api:
        got = api.get(f"/v1/turns/{turn_id}")
        assert got.status_code == 200, got.text
        turn: dict[str, Any] = got.json()["turn"]
        return turn


def assert_kept(turn: dict[str, Any], expected: dict[str, Any]) -> None:
    """Every field of the file, as it was written: strings and flags equal, the history, the agent's own messages
    and the flat tool calls equal as JSON (each message and call with every key the file gave it)."""
    assert turn["turn_id"] == expected["turn_id"]
    for key in KEPT:
        if key in expected:
            assert turn[key] == expected[key], key
    history = expected.get("request_payload", {}).get("messages", [])
    assert len(turn["request_payload"]["messages"]) == len(history)
    for got, want in zip(turn["request_payload"]["messages"], history, strict=True):
        assert {k: got[k] for k in want} == want
    assert len(turn["model_messages"]) == len(expected.get("model_messages", []))
    for got, want in zip(turn["model_messages"], expected.get("model_messages", []), strict=True):
        assert [p["part_kind"] for p in got["parts"]] == [p["part_kind"] for p in want["parts"]]
        for got_part, want_part in zip(got["parts"], want["parts"], strict=True):
            assert {k: got_part[k] for k in want_part if k != "timestamp"} == {
                k: v for k, v in want_part.items() if k != "timestamp"
            }
    calls = expected.get("response_payload", {}).get("tool_calls", [])
    assert len(turn["response_payload"]["tool_calls"]) == len(calls)
    for got, want in zip(turn["response_payload"]["tool_calls"], calls, strict=True):
        assert {k: got[k] for k in want} == want


def test_a_stored_turn_file_is_imported_whole(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = raw(EO)
    assert expected["system_prompt"] and expected["request_payload"]["messages"]  # what used to be lost
    tool_calls = [p for m in expected["model_messages"] for p in m["parts"] if p["part_kind"] == "tool-call"]
    assert tool_calls
    code, out, err = run_cli(capsys, "import", str(EO))
    assert code == 0, (out, err)
    assert "1 imported" in out and "0 rejected" in out, out
    turn = stored(data_dir, expected["turn_id"])
    assert_kept(turn, expected)
    assert [p["tool_name"] for m in turn["model_messages"] for p in m["parts"] if p["part_kind"] == "tool-call"] == [
        p["tool_name"] for p in tool_calls
    ]
    again, out, _ = run_cli(capsys, "import", str(EO))  # the same file again: nothing new, nothing conflicting
    assert again == 0 and "0 imported, 1 unchanged, 0 conflicting" in out, out


def test_a_list_and_jsonl_of_stored_turns_keep_every_turn_whole(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    turns = [raw(FALLBACK), raw(REDUNDANT)]
    assert all(t["response_payload"]["tool_calls"] and t["request_payload"]["messages"] for t in turns)
    listed = tmp_path / "turns.json"
    listed.write_text(json.dumps(turns, indent=2), encoding="utf-8")
    code, out, err = run_cli(capsys, "import", "--json", str(listed))
    assert code == 0, (out, err)
    assert out["imported"] == 2 and out["rejected"] == 0, out
    for expected in turns:
        assert_kept(stored(data_dir, expected["turn_id"]), expected)
    capsys.readouterr()  # the service's first start printed its admin key
    eo = raw(EO)
    lines = tmp_path / "more.jsonl"
    lines.write_text(json.dumps(eo) + "\n", encoding="utf-8")
    code, out, _ = run_cli(capsys, "import", "--json", str(lines))
    assert code == 0 and out["imported"] == 1, out
    assert_kept(stored(data_dir, eo["turn_id"]), eo)


def test_a_broken_stored_turn_is_rejected_naming_its_field_not_read_as_a_conversation(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = {**raw(EO), "system_prompt_versioned": "yes"}  # a flag spelt as a word: refused, not guessed
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    code, out, _ = run_cli(capsys, "import", "--json", str(path))
    assert code == 1 and out["imported"] == 0 and out["rejected"] == 1, out
    assert "system_prompt_versioned" in out["errors"][0]["reason"]


def test_the_api_import_keeps_stored_turns_whole(tmp_path: Path) -> None:
    turns = [raw(EO), raw(FALLBACK)]
    body = "\n".join(json.dumps(t) for t in turns).encode()
    with InProcessApi(tmp_path / "data", warm_up=False) as srv, srv.client(srv.key("acme", "ann")) as api:
        done = api.post("/v1/imports", content=body)
        assert done.status_code == 200, done.text
        assert done.json()["imported"] == 2 and done.json()["rejected"] == 0, done.json()
        listed = api.post("/v1/imports", content=json.dumps([raw(REDUNDANT)]).encode())  # one line, a list
        assert listed.json()["imported"] == 1, listed.json()
        for expected in [*turns, raw(REDUNDANT)]:
            got = api.get(f"/v1/turns/{expected['turn_id']}")
            assert got.status_code == 200, got.text
            assert_kept(got.json()["turn"], expected)
        assert_only_tenant(api, srv, turns[0]["turn_id"])


def assert_only_tenant(api: httpx.Client, srv: InProcessApi, turn_id: str) -> None:
    """An imported turn is the importing tenant's, as any other: another tenant does not find it."""
    with srv.client(srv.key("other", "bob")) as other:
        assert other.get(f"/v1/turns/{turn_id}").status_code == 404
    assert api.get(f"/v1/turns/{turn_id}").status_code == 200
