"""Bulk import and the gating report: ``provenance import`` / ``gate --all`` in-process, and
``POST /v1/imports`` / ``GET /v1/reports/gating`` over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_server import ApiServer

from provenance_api.cli import main

TAU_BENCH = Path(__file__).resolve().parents[1] / "tests/data/tau-bench/airline-gpt-4o-dev.json"
TAU_TURNS = 760  # one per assistant text reply (established by the importer tests)
KEYS = ("traceable", "quoted", "agent_voice", "action", "unanchored")


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


def test_cli_imports_tau_bench_idempotently_and_gates_every_turn(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tau_path())
    code, out, err = run(capsys, "import", path, "--json")
    assert code == 0, err
    assert json.loads(out) == {"imported": TAU_TURNS, "unchanged": 0, "conflicting": 0, "rejected": 0, "errors": []}
    assert "\r" in err and "100 conversations" in err  # the progress line
    code, out, _ = run(capsys, "import", path, "--json")
    assert code == 0
    assert json.loads(out)["imported"] == 0 and json.loads(out)["unchanged"] == TAU_TURNS

    code, out, _ = run(capsys, "gate", "--all", "--json")
    assert code == 0
    report = json.loads(out)
    assert_report_consistent(report, TAU_TURNS)
    labels = {s["source"] for s in report["top_quoted_sources"]}
    assert "agent instructions (system prompt)" in labels and "get_reservation_details" in labels

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
    # the same ids again, one answer changed: a conflict, reported and counted, never overwritten
    changed = [json.dumps(chat("c1", "Order c1 was lost.")), *MIXED_LINES[1:]]
    mixed.write_text("\n".join(changed) + "\n", encoding="utf-8")
    code, out, _ = run(capsys, "import", str(mixed), "--json", "--format", "openai-chat")
    counts = json.loads(out)
    assert code == 1 and counts["conflicting"] == 1 and counts["unchanged"] == 2 and counts["imported"] == 0
    assert any("mixed-c1:0" in e["where"] for e in counts["errors"])


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
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with ApiServer(tmp_path_factory.mktemp("imports"), max_body_bytes=4_000_000, warm_up=False) as srv:
        yield srv


def jsonl_chunks(lines: list[str]) -> Iterator[bytes]:
    for line in lines:  # streamed: each line its own chunk, split mid-line too
        data = (line + "\n").encode("utf-8")
        yield data[: len(data) // 2]
        yield data[len(data) // 2 :]


def test_api_imports_tau_bench_idempotently_and_reports_gating(server: ApiServer) -> None:
    lines = [json.dumps(c) for c in json.loads(tau_path().read_text(encoding="utf-8"))]
    with server.client(server.key("tau", "importer"), timeout=60.0) as api:
        first = api.post("/v1/imports", content=jsonl_chunks(lines), params={"name": "airline"})
        assert first.status_code == 200, first.text
        assert first.json() == {"imported": TAU_TURNS, "unchanged": 0, "conflicting": 0, "rejected": 0, "errors": []}
        again = api.post("/v1/imports", content=jsonl_chunks(lines), params={"name": "airline"})
        assert again.json()["imported"] == 0 and again.json()["unchanged"] == TAU_TURNS
        report = api.get("/v1/reports/gating")
        assert report.status_code == 200
        assert_report_consistent(report.json(), TAU_TURNS)
        assert report.json()["turns"][0]["turn_id"].startswith("airline-")
        assert len(report.json()["top_quoted_sources"]) > 0


def test_api_reports_bad_lines_by_number_and_scopes_to_the_tenant(server: ApiServer) -> None:
    with server.client(server.key("mixed", "importer")) as api:
        r = api.post("/v1/imports", content="\n".join(MIXED_LINES).encode(), params={"format": "openai_chat"})
        assert r.status_code == 200, r.text
        assert_mixed(r.json(), "line ")
        report = api.get("/v1/reports/gating").json()
        assert_report_consistent(report, 3)  # only this tenant's turns
        assert api.post("/v1/imports", content=b"{}", params={"format": "nope"}).status_code == 422
    assert httpx.post(f"{server.base_url}/v1/imports", content=b"").status_code == 401
    assert httpx.get(f"{server.base_url}/v1/reports/gating").status_code == 401


def test_api_import_respects_the_body_limit(server: ApiServer) -> None:
    big = ("x" * 1000 + "\n").encode() * 5000  # 5 MB, streamed without a length
    with server.client(server.admin_key) as api:
        r = api.post("/v1/imports", content=iter([big[i : i + 65536] for i in range(0, len(big), 65536)]))
    assert r.status_code == 413
