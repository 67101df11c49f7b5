"""One set of numbers: a trace's calls read the same in the API (``calls``), its progress events (``progress``
and ``end``), its result, the CLI's printed result and the CLI's trace log — planned, made, cached, billed,
failed — for a rerun answered from the judgement cache and for a run whose span checks fail. And the CLI
checks the key and the endpoint before it shows the gate or asks: a missing key or a dead endpoint exits 1
with the cause and the setting to fix, and nothing is sent. The counts live on the job row (migration 0012)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic import command
from sqlalchemy import Connection, MetaData, Table, text
from support.api_server import SMALL_CLAIM, InProcessApi, KeyedJudge, small_turn
from support.fake_openai import FakeOpenAI, FakeReply
from support.services import DbBackend

from provenance_api.cli.main import main
from provenance_api.storage.session import Database, alembic_config

FIXTURE = str(Path(__file__).resolve().parents[2] / "fixtures" / "eo_worldview_turn.json")
KEY = "sk-numbers"


def _events(api: httpx.Client, trace_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The finished trace's event stream: its progress event, then ``end``."""
    body = api.get(f"/v1/traces/{trace_id}/events").text
    out = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        out.append((fields["event"], json.loads(fields["data"])))
    return out


def _api_trace(api: httpx.Client) -> dict[str, Any]:
    quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM}).json()
    started = api.post("/v1/traces", json={"quote_id": quote["quote_id"]})
    done: dict[str, Any] = api.get(started.headers["location"], params={"wait": "true"}).json()
    assert done["status"] == "succeeded", done
    return done


def _five(calls: dict[str, Any]) -> dict[str, int]:
    return {k: calls[k] for k in ("planned", "made", "cached", "billed", "failed")}


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()  # what the in-process server printed is not the command's
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _calls_line(calls: dict[str, int], cost: str) -> str:
    return (
        f"{calls['planned']} planned · {calls['made']} made · {calls['cached']} cached · {calls['billed']} "
        f"billed · {calls['failed']} failed · cost {cost}"
    )


@pytest.fixture
def provider_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The CLI and the service in one data directory, the judge's key and base the litellm way."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path))
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps(small_turn()), encoding="utf-8")
    return turn


def test_a_rerun_from_the_judgement_cache_reads_the_same_everywhere(
    provider_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    judge = KeyedJudge()
    with FakeOpenAI(lambda req: FakeReply(text=judge.openai(req)), api_key=KEY) as provider:
        monkeypatch.setenv("OPENAI_API_BASE", provider.base_url)
        with InProcessApi(tmp_path, warm_up=False) as srv, srv.client(srv.admin_key, timeout=60) as api:
            api.post("/v1/turns", json=small_turn())
            first = _api_trace(api)
            sent = provider.answered
            second = _api_trace(api)
            events = _events(api, second["trace_id"])
            # the CLI, in the service's data directory: the same judge, tenant and turn, so the same cache
            code, out, err = _cli(capsys, "trace", str(provider_env), SMALL_CLAIM, "--yes")
            assert code == 0, err
            _, listed, _ = _cli(capsys, "traces", "--json")
            cli_id = json.loads(listed)["items"][0]["trace_id"]
            cli_trace = api.get(f"/v1/traces/{cli_id}").json()
            cli_calls = api.get(f"/v1/traces/{cli_id}/calls").json()
            trace_list = api.get("/v1/traces").json()["items"]
        assert provider.answered == sent  # neither the API's rerun nor the CLI's sent a call
    n = first["calls"]["made"]
    assert n > 0 and first["calls"]["cached"] == 0
    cached = {"planned": first["calls"]["planned"], "made": 0, "cached": n, "billed": 0, "failed": 0}
    # the API: the job's calls, the result's account and both progress events
    assert _five(second["calls"]) == cached
    assert _five(second["result"]["calls"]) == cached and second["result"]["cost_usd"] == 0
    (kind, progress), (end_kind, end) = events
    assert (kind, end_kind) == ("progress", "end")
    assert progress["calls"] == cached  # the same five words as the job's calls and the result's account
    assert end["calls"] == cached
    # the CLI: its printed line, its log, and the API reading that log
    assert _calls_line(cached, "$0.0000") in out
    assert "answers from the judgement cache cost $0" in err  # the gate says so before consent
    logged = json.loads(listed)["items"][0]
    assert _five(logged["calls"]) == cached and logged["source"] == "cli" and logged["cost_usd"] == 0
    assert _five(cli_trace["calls"]) == cached and _five(cli_trace["result"]["calls"]) == cached
    assert {t["trace_id"]: t["source"] for t in trace_list}[cli_id] == "cli"  # the viewer's trace list shows it
    # the CLI trace's model calls are kept as the service keeps a trace's: each one, answered from the cache
    assert cli_calls["total"] == n and [c["outcome"] for c in cli_calls["calls"]] == ["cached"] * n
    assert all(c["cost_usd"] == 0 for c in cli_calls["calls"])


def _failing_span_checks(judge: KeyedJudge) -> Any:
    """Judge calls answer; every span check (a JSON verdict) fails with a 400 the client does not retry."""

    def script(request: dict[str, Any]) -> str | FakeReply:
        system = str(request["messages"][0].get("content", ""))
        if "strict judge of support" in system:
            return judge.openai(request)
        return FakeReply.error(400, "the request was refused")

    return script


def test_failed_calls_are_counted_alike_everywhere(
    provider_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAI(_failing_span_checks(KeyedJudge()), api_key=KEY) as provider:
        monkeypatch.setenv("OPENAI_API_BASE", provider.base_url)
        with InProcessApi(tmp_path, warm_up=False) as srv, srv.client(srv.admin_key, timeout=60) as api:
            api.post("/v1/turns", json=small_turn())
            done = _api_trace(api)
            events = _events(api, done["trace_id"])
        code, out, err = _cli(capsys, "trace", str(provider_env), SMALL_CLAIM, "--yes", "--no-cache", "--json")
        assert code == 0, err
        _, listed, _ = _cli(capsys, "traces", "--json")
    api_calls = _five(done["calls"])
    assert api_calls["failed"] > 0 and api_calls["made"] == api_calls["billed"] + api_calls["failed"]
    assert _five(done["result"]["calls"]) == api_calls
    (_, progress), (_, end) = events
    assert progress["calls"] == api_calls
    assert end["calls"] == api_calls
    assert _five(json.loads(out)["calls"]) == api_calls  # the CLI's run of the same trace, sent again
    assert _five(json.loads(listed)["items"][0]["calls"]) == api_calls


def test_a_trace_whose_every_call_failed_is_logged_as_failed_with_its_counts(
    provider_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAI(lambda req: FakeReply.error(401, "Incorrect API key provided")) as provider:
        code, out, err = _cli(
            capsys,
            "trace",
            str(provider_env),
            "r0",
            "--model",
            "openai/fake",
            "--api-base",
            provider.base_url,
            "--yes",
            "--json",
        )
        sent = len(provider.requests)
    assert code == 1 and json.loads(out)["status"] == "failed" and "every model call failed" in err
    _, listed, _ = _cli(capsys, "traces", "--json")
    (item,) = json.loads(listed)["items"]
    assert item["status"] == "failed" and item["verdict"] is None
    assert item["calls"]["made"] == item["calls"]["failed"] == sent > 0 and item["calls"]["billed"] == 0
    _, shown, _ = _cli(capsys, "traces", "show", item["trace_id"])
    assert "failed: every model call failed" in shown
    assert _calls_line(item["calls"], "$0.0000") in shown


# --------------------------------------------------------------------------- the check before consent


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_missing_key_fails_before_the_gate_and_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, out, err = _cli(capsys, "trace", FIXTURE, "r10", "--model", "openai/gpt-4o")
    assert code == 1 and out == ""
    assert "no API key for openai" in err and "OPENAI_API_KEY is not set" in err
    assert "fix: export OPENAI_API_KEY" in err and "--api-key" in err
    assert "Model calls" not in err and "Spend up to" not in err  # no gate, no consent prompt
    code, out, _ = _cli(capsys, "trace", FIXTURE, "r10", "--model", "openai/gpt-4o", "--json")
    problem = json.loads(out)["error"]
    assert code == 1 and problem["field"] == "OPENAI_API_KEY" and problem["type"].endswith("provider-auth")


def test_a_dead_endpoint_fails_before_the_gate_with_the_flag_to_fix(capsys: pytest.CaptureFixture[str]) -> None:
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    code, out, err = _cli(capsys, "trace", FIXTURE, "r10", "--model", "openai/local", "--api-base", base)
    assert code == 1 and out == ""
    assert f"cannot reach {base}" in err and "connection refused" in err
    assert "fix: start the server at" in err and "--api-base" in err
    assert "Model calls" not in err and "Spend up to" not in err


def test_an_endpoint_that_refuses_the_key_fails_before_the_gate(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAI(lambda req: "5", api_key="the-right-key") as provider:
        code, _, err = _cli(
            capsys,
            "trace",
            FIXTURE,
            "r10",
            "--model",
            "openai/fake",
            "--api-base",
            provider.base_url,
            "--api-key",
            "a-wrong-key",
            "--yes",
        )
        assert provider.requests == []  # no model call was sent
    assert code == 1 and "refused the request for its models (HTTP 401)" in err and "fix:" in err
    assert "--api-key" in err.split("fix:", 1)[1] and "Model calls" not in err


def test_the_gate_states_the_worst_case_and_that_cached_answers_cost_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _cli(capsys, "quote", FIXTURE, "r10")
    planned = json.loads(_cli(capsys, "quote", FIXTURE, "r10", "--json")[1])["planned_calls"]
    assert code == 0 and f"up to {planned} planned" in out
    assert "at most ~$" in out and f"the worst case: all {planned} planned calls sent and billed" in out
    assert "answers from the judgement cache cost $0" in out


# --------------------------------------------------------------------------- the counts on the job row


def test_migration_0012_backfills_the_counts_from_stored_results(tmp_path: Path, db_backend: DbBackend) -> None:
    """A job finished before the counts existed reads them from its stored result; one without a result reads 0;
    every existing job came from the API. Down and up again keeps the schema working."""
    url = db_backend.fresh_url() or f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"

    def to(revision: str, down: bool = False) -> Callable[[Connection], None]:
        def step(conn: Connection) -> None:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            (command.downgrade if down else command.upgrade)(cfg, revision)

        return step

    def seed(conn: Connection) -> None:
        meta = MetaData()
        jobs, results = (Table(name, meta, autoload_with=conn) for name in ("trace_jobs", "trace_results"))
        now = datetime.now(UTC).replace(tzinfo=None)  # the columns store UTC without a zone
        job: dict[str, Any] = {
            "kind": "trace",
            "source_id": None,
            "tenant": "t",
            "user": "u",
            "turn_id": "turn",
            "quote_id": "q",
            "claim": "c",
            "segment_id": None,
            "model": "m",
            "params": {},
            "reason": None,
            "calls_planned": 12,
            "calls_made": 0,
            "calls_billed": 0,
            "round": None,
            "message": None,
            "layer_scores": {},
            "quoted_cost_usd": None,
            "max_cost_usd": None,
            "reservation": None,
            "created_at": now,
            "started_at": now,
            "finished_at": now,
            "updated_at": now,
        }
        conn.execute(
            jobs.insert(),
            [
                {**job, "id": "tr_done", "status": "succeeded"},
                {**job, "id": "tr_failed", "status": "failed", "calls_made": 3},
            ],
        )
        result = {
            "verdict": "attributed",
            "calls": {"planned": 12, "made": 0, "saved": 1, "cached": 7, "failed": 2, "billed": 0},
        }
        conn.execute(
            results.insert(),
            [
                {
                    "job_id": "tr_done",
                    "tenant": "t",
                    "user": "u",
                    "turn_id": "turn",
                    "turn_digest": "d",
                    "claim_digest": "d",
                    "query_digest": "d",
                    "corpus_digest": "d",
                    "prompt_versions": {},
                    "params": {},
                    "model": "m",
                    "result": result,
                    "calls_planned": 12,
                    "calls_made": 0,
                    "calls_billed": 0,
                    "input_tokens": 0,
                    "output_tokens": 0,
                    "cost_usd": 0.0,
                    "created_at": now,
                }
            ],
        )

    def counts(conn: Connection) -> dict[str, tuple[int, int, str]]:
        rows = conn.execute(text("SELECT id, calls_cached, calls_failed, source FROM trace_jobs")).all()
        return {job_id: (cached, failed, source) for job_id, cached, failed, source in rows}

    async def work() -> dict[str, tuple[int, int, str]]:
        db = Database(url)
        try:
            async with db.engine.begin() as conn:
                await conn.run_sync(to("0011"))
                await conn.run_sync(seed)
                await conn.run_sync(to("0012"))
            async with db.engine.begin() as conn:
                found = await conn.run_sync(counts)
                await conn.run_sync(to("0011", down=True))
            await db.migrate()
            assert (await db.ready()) == (True, "ok")
            return found
        finally:
            await db.dispose()

    assert asyncio.run(work()) == {"tr_done": (7, 2, "api"), "tr_failed": (0, 0, "api")}


def test_a_logged_cli_trace_is_exported_to_the_otlp_endpoint_like_the_services(
    provider_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from support.otlp_receiver import attributes, otlp_receiver

    from provenance_api.providers import otel_export

    judge = KeyedJudge()
    with (
        FakeOpenAI(lambda req: FakeReply(text=judge.openai(req)), api_key=KEY) as provider,
        otlp_receiver() as receiver,
    ):
        monkeypatch.setenv("OPENAI_API_BASE", provider.base_url)
        monkeypatch.setenv("PROVENANCE_OTLP_ENDPOINT", receiver.base_url)
        code, _, err = _cli(capsys, "trace", str(provider_env), SMALL_CLAIM, "--yes")
        assert code == 0, err
        _, listed, _ = _cli(capsys, "traces", "--json")
        logged = json.loads(listed)["items"][0]
        assert otel_export.flush_all(10.0)
        receiver.wait_for_spans(1 + logged["calls"]["made"])
        spans = [span for _, _, span in receiver.spans()]
    roots = [s for s in spans if s.name == "provenance.trace"]
    assert len(roots) == 1
    root = attributes(roots[0].attributes)
    assert root["provenance.trace.id"] == logged["trace_id"] and root["provenance.verdict"] == logged["verdict"]
    assert root["provenance.calls.made"] == logged["calls"]["made"] > 0
    children = [s for s in spans if s.parent_span_id == roots[0].span_id]
    assert len(children) == logged["calls"]["made"]  # one span per model call, under the trace's
