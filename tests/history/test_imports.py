"""Bulk import and the gating report: ``provenance import`` / ``gate --all`` in-process, and
``POST /v1/imports`` / ``GET /v1/reports/gating`` through the whole app (in process, over ASGI)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.api_server import InProcessApi

from provenance_api.cli.main import main

TAU_BENCH = Path(__file__).resolve().parents[2] / "tests/data/tau-bench/airline-gpt-4o-dev.json"
TAU_REPLIES = 760  # assistant text replies (established by the importer tests)
TAU_TURNS = 780  # a turn per reply, and an unfinished one (no answer) per conversation ending in tool calls
KEYS = ("traceable", "quoted", "agent_voice", "action", "unanchored")


def ends_in_tool_calls(conversation: dict[str, Any]) -> bool:
    """Read off the transcript: a tool call after the last assistant text reply (an unfinished turn)."""
    traj = conversation["traj"]
    replies = [
        i
        for i, m in enumerate(traj)
        if m["role"] == "assistant"
        and not m.get("tool_calls")
        and isinstance(m.get("content"), str)
        and m["content"].strip()
    ]
    return any(m.get("tool_calls") for m in traj[(replies[-1] if replies else -1) + 1 :])


def tau_path() -> Path:
    if not TAU_BENCH.is_file():
        pytest.fail(f"τ-bench data missing: expected {TAU_BENCH} (shipped in tests/data/tau-bench)")
    return TAU_BENCH


def chat(ident: str, answer: str) -> dict[str, Any]:
    return {
        "id": ident,
        "messages": [
            {"role": "system", "content": "You are a support agent. Always name the carrier."},
            {"role": "user", "content": f"Where is order {ident}?"},
            {"role": "assistant", "content": answer},
        ],
    }


GOOD = [chat("c1", "Order c1 shipped with DHL."), chat("c2", "Order c2 is delayed."), chat("c3", "Order c3 arrived.")]
# line 2 is not JSON, line 4 is JSON but no conversation; lines 1, 3 and 5 are good
MIXED_LINES = [
    json.dumps(GOOD[0]),
    '{"id": "broken", "messages": [',
    json.dumps(GOOD[1]),
    json.dumps({"hello": "world"}),
    json.dumps(GOOD[2]),
]


def assert_mixed(counts: dict[str, Any], where_suffix: str) -> None:
    assert counts["imported"] == 3 and counts["rejected"] == 2 and counts["conflicting"] == 0, counts
    wheres = [e["where"] for e in counts["errors"]]
    assert len(wheres) == 2
    assert wheres[0].endswith(f"{where_suffix}2") and "invalid JSON" in counts["errors"][0]["reason"]
    assert wheres[1].endswith(f"{where_suffix}4") and counts["errors"][1]["reason"]


def assert_report_consistent(report: dict[str, Any], turns: int) -> None:
    assert len(report["turns"]) == turns == report["totals"]["turns"]
    for key in ("sentences", *KEYS):
        assert report["totals"][key] == sum(t["counts"][key] for t in report["turns"]), key
    assert report["totals"]["sentences"] == sum(report["totals"][k] for k in KEYS)
    assert all(t["summary"] and t["turn_id"] for t in report["turns"])
    top = report["top_quoted_sources"]
    assert len(top) <= 20
    assert [s["quotes"] for s in top] == sorted((s["quotes"] for s in top), reverse=True)


# --- the command line ----------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.mark.slow  # volume: all 780 τ-bench turns, imported twice and gated
def test_cli_imports_tau_bench_idempotently_and_gates_every_turn(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tau_path())
    code, out, err = run(capsys, "import", path, "--json")
    assert code == 0, err  # notes alone do not fail the command
    counts = json.loads(out)
    assert {k: counts[k] for k in ("imported", "unchanged", "conflicting", "rejected", "errors")} == {
        "imported": TAU_TURNS,
        "unchanged": 0,
        "conflicting": 0,
        "rejected": 0,
        "errors": [],
    }
    ending = sum(map(ends_in_tool_calls, json.loads(tau_path().read_text(encoding="utf-8"))))
    assert ending == TAU_TURNS - TAU_REPLIES and counts["notes"] == []  # unfinished turns, not notes
    # redirected, no progress line is redrawn (a terminal gets one): a plain line of counts every 10 s at most
    assert "\r" not in err + out and all(line.startswith("[importing] ") for line in err.splitlines())
    code, out, _ = run(capsys, "import", path, "--json")
    assert code == 0
    assert json.loads(out)["imported"] == 0 and json.loads(out)["unchanged"] == TAU_TURNS

    code, out, _ = run(capsys, "gate", "--all", "--json")
    assert code == 0
    report = json.loads(out)
    assert_report_consistent(report, TAU_TURNS)
    labels = {s["source"] for s in report["top_quoted_sources"]}
    # the policy's rules are sources of their own (instructions_as_rules): each is named with its section
    assert any(label.startswith("instructions §") for label in labels) and "get_reservation_details" in labels

    code, out, _ = run(capsys, "gate", "--all")
    assert code == 0 and "most quoted sources:" in out and f"{TAU_TURNS} turns" in out
    code, out, _ = run(capsys, "gate", "--all", "--tenant", "nobody", "--json")
    assert code == 0 and json.loads(out)["totals"]["turns"] == 0


def test_cli_reports_bad_lines_with_their_numbers_and_imports_the_rest(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = data_dir / "history" / "nested"
    folder.mkdir(parents=True)
    mixed = folder / "mixed.jsonl"
    mixed.write_text("\n".join(MIXED_LINES) + "\n", encoding="utf-8")
    code, out, _ = run(capsys, "import", str(data_dir / "history"), "--json")
    assert code == 1  # something was rejected
    assert_mixed(json.loads(out), "mixed.jsonl:")
    # the same conversation again, one answer changed: turn ids come from content, so the changed answer is a
    # turn of its own, stored beside the first one, which is never overwritten
    code, out, _ = run(capsys, "gate", "--all", "--json")
    before = {t["turn_id"] for t in json.loads(out)["turns"]}
    changed = [json.dumps(chat("c1", "Order c1 was lost.")), *MIXED_LINES[1:]]
    mixed.write_text("\n".join(changed) + "\n", encoding="utf-8")
    code, out, _ = run(capsys, "import", str(data_dir / "history"), "--json", "--format", "openai-chat")
    counts = json.loads(out)
    assert counts["conflicting"] == 0 and counts["unchanged"] == 2 and counts["imported"] == 1, counts
    code, out, _ = run(capsys, "gate", "--all", "--json")
    after = {t["turn_id"] for t in json.loads(out)["turns"]}
    assert before < after and len(after - before) == 1
    assert next(iter(after - before)).startswith("history~nested~mixed.jsonl#c1:")


def test_cli_gate_needs_a_file_or_all_and_import_an_existing_path(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "gate")
    assert code == 2 and "FILE or --all" in err
    code, _, err = run(capsys, "import", str(data_dir / "absent.jsonl"))
    assert code == 2 and "no such file" in err
    code, _, err = run(capsys, "import", str(data_dir), "--format", "nope")
    assert code == 2 and "unknown format" in err


# --- the API over HTTP ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApi]:
    with InProcessApi(tmp_path_factory.mktemp("imports"), max_body_bytes=4_000_000, warm_up=False) as srv:
        yield srv


def jsonl_chunks(lines: list[str]) -> Iterator[bytes]:
    for line in lines:  # streamed: each line its own chunk, split mid-line too
        data = (line + "\n").encode("utf-8")
        yield data[: len(data) // 2]
        yield data[len(data) // 2 :]


@pytest.mark.slow  # volume: all 780 τ-bench turns, imported twice and gated
def test_api_imports_tau_bench_idempotently_and_reports_gating(server: InProcessApi) -> None:
    lines = [json.dumps(c) for c in json.loads(tau_path().read_text(encoding="utf-8"))]
    with server.client(server.key("tau", "importer"), timeout=60.0) as api:
        first = api.post("/v1/imports", content=jsonl_chunks(lines), params={"name": "airline"})
        assert first.status_code == 200, first.text
        assert first.json()["imported"] == TAU_TURNS and first.json()["rejected"] == 0, first.text
        assert first.json()["notes"] == []
        assert sum(ends_in_tool_calls(json.loads(line)) for line in lines) == TAU_TURNS - TAU_REPLIES
        again = api.post("/v1/imports", content=jsonl_chunks(lines), params={"name": "airline"})
        assert again.json()["imported"] == 0 and again.json()["unchanged"] == TAU_TURNS
        report = api.get("/v1/reports/gating")
        assert report.status_code == 200
        assert_report_consistent(report.json(), TAU_TURNS)
        assert report.json()["turns"][0]["turn_id"].startswith("airline#")
        assert len(report.json()["top_quoted_sources"]) > 0


def test_api_reports_bad_lines_by_number_and_scopes_to_the_tenant(server: InProcessApi) -> None:
    with server.client(server.key("mixed", "importer")) as api:
        r = api.post("/v1/imports", content="\n".join(MIXED_LINES).encode(), params={"format": "openai_chat"})
        assert r.status_code == 200, r.text
        assert_mixed(r.json(), "line ")
        report = api.get("/v1/reports/gating").json()
        assert_report_consistent(report, 3)  # only this tenant's turns
        assert api.post("/v1/imports", content=b"{}", params={"format": "nope"}).status_code == 422
    with server.client() as anonymous:
        assert anonymous.post("/v1/imports", content=b"").status_code == 401
        assert anonymous.get("/v1/reports/gating").status_code == 401


def test_api_import_respects_the_body_limit(server: InProcessApi) -> None:
    big = ("x" * 1000 + "\n").encode() * 5000  # 5 MB, streamed without a length
    with server.client(server.admin_key) as api:
        r = api.post("/v1/imports", content=iter([big[i : i + 65536] for i in range(0, len(big), 65536)]))
    assert r.status_code == 413


# --- isolation, ids, encodings, notes (issue 15) ---------------------------------------------------


def with_tool_return(ident: str | None, content_json: str, arguments: str = "{}") -> str:
    """A conversation (as JSON text) whose one tool return is ``content_json`` verbatim."""
    head = {"role": "user", "content": "Look it up."}
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}],
    }
    tail = {"role": "assistant", "content": "Found it."}
    id_part = f'"id": {json.dumps(ident)}, ' if ident else ""
    return (
        f'{{{id_part}"messages": [{json.dumps(head)}, {json.dumps(call)}, '
        f'{{"role": "tool", "tool_call_id": "t1", "content": {content_json}}}, {json.dumps(tail)}]}}'
    )


DEEP = "[" * 5000 + "]" * 5000  # beyond any recursion limit: the parser itself cannot read it


def deep_arguments(ident: str) -> str:
    """The file parses; the call's arguments, a JSON string inside it, are too deep for the importer."""
    return with_tool_return(ident, '"ok"', arguments=DEEP)


def test_cli_a_5000_deep_file_between_two_good_ones_rejects_it_alone_and_prints_the_summary(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = data_dir / "history"
    folder.mkdir()
    (folder / "a_good.json").write_text(json.dumps(GOOD[0]), encoding="utf-8")
    (folder / "b_deep.json").write_text(with_tool_return("deep", DEEP), encoding="utf-8")
    (folder / "c_good.json").write_text(json.dumps(GOOD[1]), encoding="utf-8")
    code, out, err = run(capsys, "import", str(folder))
    assert code == 1, err  # something was rejected
    assert "3 conversations: 2 imported, 0 unchanged, 0 conflicting, 1 rejected" in out
    assert "b_deep.json: nested too deeply" in out and "Traceback" not in out + err
    code, out, _ = run(capsys, "gate", "--all", "--json")
    assert {t["turn_id"].split(":")[0] for t in json.loads(out)["turns"]} == {
        "history~a_good.json#c1",
        "history~c_good.json#c2",
    }
    (folder / "b_deep.json").unlink()
    code, out, _ = run(capsys, "import", str(folder))
    assert code == 0 and "2 unchanged" in out and "0 rejected" in out
    with pytest.raises(SystemExit) as exited:
        main(["import", "--help"])
    assert exited.value.code == 0
    assert "Exit status: 0 when nothing was rejected" in " ".join(capsys.readouterr().out.split())


def test_cli_a_conversation_too_deep_for_the_importer_is_rejected_alone(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jsonl = data_dir / "mixed.jsonl"
    jsonl.write_text(
        "\n".join(
            [
                json.dumps(GOOD[0]),
                deep_arguments("deepish"),
                json.dumps(GOOD[1]),
                with_tool_return("deep", DEEP),
                json.dumps(GOOD[2]),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    code, out, _ = run(capsys, "import", str(jsonl), "--json")
    counts = json.loads(out)
    assert code == 1 and counts["imported"] == 3 and counts["rejected"] == 2, counts
    assert [e["where"].rsplit(":", 1)[-1] for e in counts["errors"]] == ["2", "4"]
    assert all("nested too deeply" in e["reason"] for e in counts["errors"])


def test_cli_ids_come_from_the_relative_path_and_are_stable(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = data_dir / "history"
    for session in ("s1", "s2"):
        (root / session).mkdir(parents=True)
        no_id = {"messages": chat("x", f"Answer of {session}.")["messages"]}  # no id field: a content hash
        lines = [json.dumps(chat("c1", f"Order c1, as {session} saw it.")), json.dumps(no_id)]
        (root / session / "history.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, _ = run(capsys, "import", str(root), "--json")
    assert code == 0 and json.loads(out)["imported"] == 4 and json.loads(out)["conflicting"] == 0
    code, out, _ = run(capsys, "gate", "--all", "--json")
    ids = sorted(t["turn_id"] for t in json.loads(out)["turns"])
    named = [i for i in ids if i.split(":")[0].endswith("#c1")]
    assert [i.split(":")[0] for i in named] == ["history~s1~history.jsonl#c1", "history~s2~history.jsonl#c1"]
    hashed = [i for i in ids if i not in named]
    assert [i.split("#")[0] for i in hashed] == ["history~s1~history.jsonl", "history~s2~history.jsonl"]
    assert len({i.split("#")[1] for i in hashed}) == 2 and all(len(i.split("#")[1].split(":")[0]) == 12 for i in hashed)
    # the lines reordered: the hash ids follow the content, not the line number
    for session in ("s1", "s2"):
        path = root / session / "history.jsonl"
        path.write_text("\n".join(reversed(path.read_text(encoding="utf-8").split("\n")[:2])) + "\n", encoding="utf-8")
    code, out, _ = run(capsys, "import", str(root), "--json")
    assert code == 0 and json.loads(out)["unchanged"] == 4 and json.loads(out)["imported"] == 0


def test_cli_decodes_jsonl_line_by_line_and_accepts_a_bom(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jsonl = data_dir / "latin.jsonl"
    latin = json.dumps(chat("c2", "Livré à Genève."), ensure_ascii=False).encode("latin-1")
    jsonl.write_bytes(
        b"\xef\xbb\xbf" + json.dumps(GOOD[0]).encode() + b"\n" + latin + b"\n" + json.dumps(GOOD[2]).encode() + b"\r\n"
    )
    bom_json = data_dir / "bom.json"
    bom_json.write_bytes(b"\xef\xbb\xbf" + json.dumps(chat("c4", "Order c4 is here."), indent=2).encode())
    code, out, _ = run(capsys, "import", str(jsonl), str(bom_json), "--json")
    counts = json.loads(out)
    assert code == 1 and counts["imported"] == 3 and counts["rejected"] == 1, counts
    (error,) = counts["errors"]
    assert error["where"].endswith("latin.jsonl:2") and "not UTF-8" in error["reason"]


def test_cli_conversations_without_a_turn_are_noted_in_the_summary_and_json(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call = {"id": "x", "type": "function", "function": {"name": "final_result", "arguments": "{}"}}
    ends_in_call = {
        "id": "pending",
        "messages": [
            {"role": "user", "content": "Cancel it."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ],
    }
    no_reply = {"id": "quiet", "messages": [{"role": "user", "content": "Anyone there?"}]}
    path = data_dir / "notes.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in (GOOD[0], ends_in_call, no_reply)) + "\n", encoding="utf-8")
    code, out, _ = run(capsys, "import", str(path))
    # the conversation ending in a call is an unfinished turn (tests/history/test_unfinished_turns.py), not a note
    assert code == 0 and "3 conversations: 2 imported" in out and "1 noted" in out
    assert "note: " in out and "notes.jsonl#pending" not in out
    assert "notes.jsonl:3: notes.jsonl#quiet: no assistant reply with text: no turn" in out
    code, out, _ = run(capsys, "import", str(path), "--json")
    assert [n["where"].split(":")[-1] for n in json.loads(out)["notes"]] == [" notes.jsonl#quiet"]


def test_api_uploads_without_a_name_do_not_collide_and_a_deep_line_is_rejected_alone(server: InProcessApi) -> None:
    with server.client(server.key("noname", "importer")) as api:
        one = {"messages": chat("x", "First upload's answer.")["messages"]}
        two = {"messages": chat("x", "Second upload's answer.")["messages"]}
        assert api.post("/v1/imports", content=json.dumps(one).encode()).json()["imported"] == 1
        second = api.post("/v1/imports", content=json.dumps(two).encode()).json()
        assert second["imported"] == 1 and second["conflicting"] == 0, second
        body = "\n".join(
            [json.dumps(GOOD[0]), with_tool_return("deep", DEEP), deep_arguments("deepish"), json.dumps(GOOD[1])]
        ).encode()
        r = api.post("/v1/imports", content=body, params={"name": "deep"}).json()
        assert r["imported"] == 2 and r["rejected"] == 2, r
        assert [e["where"].split(":")[0] for e in r["errors"]] == ["line 2", "line 3"]
        assert all("nested too deeply" in e["reason"] for e in r["errors"])


def test_api_reads_a_pretty_printed_body_a_bom_and_rejects_only_a_latin1_line(server: InProcessApi) -> None:
    with server.client(server.key("pretty", "importer")) as api:
        pretty = json.dumps(chat("p1", "Order p1 is on its way."), indent=2).encode()
        r = api.post("/v1/imports", content=b"\xef\xbb\xbf" + pretty)
        assert r.status_code == 200 and r.json()["imported"] == 1 and r.json()["rejected"] == 0, r.text
        listed = api.post("/v1/imports", content=json.dumps([GOOD[0], GOOD[1]], indent=2).encode()).json()
        assert listed["imported"] == 2 and listed["rejected"] == 0, listed
        garbage = api.post("/v1/imports", content=b"{\n  not json at all\n  nor this\n}\n").json()
        assert garbage["rejected"] == 1 and garbage["errors"][0]["where"] == "body", garbage
        assert "neither JSONL" in garbage["errors"][0]["reason"]
        latin = json.dumps(chat("c9", "Livré."), ensure_ascii=False).encode("latin-1")
        mixed = api.post("/v1/imports", content=b"\xef\xbb\xbf" + json.dumps(GOOD[2]).encode() + b"\n" + latin).json()
        assert mixed["imported"] == 1 and mixed["rejected"] == 1 and mixed["errors"][0]["where"] == "line 2", mixed


@pytest.mark.slow  # scale: gates a store of many turns in batches
def test_gate_all_streams_in_batches_and_keeps_no_per_turn_list(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from provenance_api.core.settings import Settings
    from provenance_api.operations import imports as bulk
    from provenance_api.storage.session import Database

    code, _, _ = run(capsys, "import", str(tau_path()))
    assert code == 0

    async def report(stream: bool) -> tuple[bulk.GatingReport, list[int]]:
        db = Database(Settings().effective_database_url)
        batches: list[int] = []
        try:
            got = await bulk.gating_report(
                db, Settings().admin_tenant, (lambda entries: batches.append(len(entries))) if stream else None
            )
        finally:
            await db.dispose()
        return got, batches

    streamed, batches = asyncio.run(report(stream=True))
    held, _ = asyncio.run(report(stream=False))
    assert streamed.turns == [] and len(held.turns) == TAU_TURNS == sum(batches)
    assert max(batches) == 50 and len(batches) == -(-TAU_TURNS // 50)  # never more than one batch held
    assert streamed.totals_dict() == held.totals_dict()
