"""The contributive probe over HTTP: quote (the probe alone) → probe job → events → verdict, with the
service's own litellm adapter talking to a local OpenAI-compatible server running a scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.api_server import InProcessApi, small_turn
from support.fake_openai import FakeOpenAI

from estimator.params import DEFAULT_PARAMS

MODEL = "openai/gpt-4o-mini"  # priced in litellm's bundled map; served here by FakeOpenAI
PROVIDER_KEY = "sk-probe-provider-key-0123456789"
WITH = "Order A-1 shipped on 2025-03-03 with DHL."
WITHOUT = "I cannot see where order A-1 is right now."


class Regenerator:
    """Answers a probe regeneration with the claim when the order lookup (s0) is shown, else without
    it; ``drop_full`` lists the full-context calls (0-based, in arrival order) that lose the claim."""

    def __init__(self, drop_full: tuple[int, ...] = ()) -> None:
        self.drop_full = drop_full
        self.full = 0

    def __call__(self, request: dict[str, Any]) -> str:
        prompt = "\n".join(str(m.get("content", "")) for m in request["messages"])
        assert "Answer using ONLY the SOURCES" in prompt
        if "[s0] " not in prompt:
            return WITHOUT
        index, self.full = self.full, self.full + 1
        return WITHOUT if index in self.drop_full else WITH


def read_events(lines: list[str]) -> list[tuple[str, dict[str, Any]]]:
    events, name = [], ""
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
    return events


@pytest.fixture
def provider_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    return monkeypatch


def test_a_probe_job_end_to_end_with_a_stable_baseline_is_required(
    tmp_path: Path, provider_env: pytest.MonkeyPatch
) -> None:
    k = DEFAULT_PARAMS.causal_samples
    with FakeOpenAI(Regenerator(), api_key=PROVIDER_KEY) as provider:
        provider_env.setenv("OPENAI_API_BASE", provider.base_url)
        with InProcessApi(tmp_path, warm_up=False) as srv, srv.client(srv.admin_key) as api:
            assert api.post("/v1/turns", json=small_turn()).status_code == 201
            quote = api.post(
                "/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0", "model": MODEL, "probe": True}
            ).json()
            # the cost gate prices the probe alone: 2k calls, each at the output cap, disclosed
            assert quote["planned_calls"] == 2 * k and quote["calls"]["probe"] == 2 * k
            assert quote["calls"]["round1"] == quote["calls"]["spans"] == 0
            assert quote["output_tokens"] == 2 * k * DEFAULT_PARAMS.causal_max_output
            assert quote["cost_usd"] is not None and quote["cost_usd"] > 0

            # a probe quote does not start a trace, and an unknown source is refused before any spend
            wrong = api.post("/v1/traces", json={"quote_id": quote["quote_id"]})
            assert wrong.status_code == 422 and wrong.json()["field"] == "quote_id"
            unknown = api.post("/v1/probes", json={"quote_id": quote["quote_id"], "source_id": "s9"})
            assert unknown.status_code == 422 and unknown.json()["field"] == "source_id"

            started = api.post("/v1/probes", json={"quote_id": quote["quote_id"], "source_id": "s0"})
            assert started.status_code == 202, started.text
            location = started.headers["location"]
            probe_id = started.json()["probe_id"]
            assert location == f"/v1/probes/{probe_id}" and probe_id.startswith("pr_")
            assert int(started.headers["x-ratelimit-remaining"]) == DEFAULT_PARAMS.rate_max_calls - 2 * k
            with api.stream("GET", f"{location}/events") as stream:
                events = read_events(list(stream.iter_lines()))
            done = api.get(location, params={"wait": "true"}).json()

            # tenant-scoped, and a probe is not a trace
            other = srv.key("tenant-b", "bob")
            with srv.client(other) as stranger:
                assert stranger.get(location).status_code == 404
                assert stranger.get(f"{location}/events").status_code == 404
            assert api.get(f"/v1/traces/{probe_id}").status_code == 404
            assert api.post("/v1/probes", json={"quote_id": quote["quote_id"], "source_id": "s0"}).status_code == 409
            remaining = int(api.get("/v1/turns").headers.get("x-ratelimit-remaining", "-1"))

    assert done["status"] == "succeeded", done
    result = done["result"]
    assert (result["verdict"], result["note"]) == ("required", None)
    assert (result["baseline"], result["without"], result["k"]) == (k, 0, k)
    assert result["calls"] == {"planned": 2 * k, "made": 2 * k, "failed": 0}
    assert result["anchors"] == ["2025-03-03", "dhl"] and result["target_id"] == "s0"
    assert done["calls"] == {"planned": 2 * k, "made": 2 * k, "billed": 2 * k, "cached": 0, "failed": 0}
    assert events[-1] == ("end", {"probe_id": probe_id, "status": "succeeded", "reason": None, "calls": done["calls"]})
    # sampled and never cached: k identical full-context requests all reached the provider,
    # with no temperature and the output cap
    assert provider.answered == 2 * k
    bodies = [json.dumps(b["messages"], sort_keys=True) for b in provider.requests]
    assert max(bodies.count(b) for b in bodies) == k
    assert all(
        "temperature" not in b and b["max_tokens"] == DEFAULT_PARAMS.causal_max_output for b in provider.requests
    )
    assert remaining in (-1, DEFAULT_PARAMS.rate_max_calls - 2 * k)


def test_an_unstable_baseline_is_inconclusive_with_b_over_k(tmp_path: Path, provider_env: pytest.MonkeyPatch) -> None:
    with FakeOpenAI(Regenerator(drop_full=(1,)), api_key=PROVIDER_KEY) as provider:
        provider_env.setenv("OPENAI_API_BASE", provider.base_url)
        with InProcessApi(tmp_path, warm_up=False) as srv, srv.client(srv.admin_key) as api:
            api.post("/v1/turns", json=small_turn())
            body = {"turn_id": "t-small-1", "sentence": WITH, "source_id": "s0", "k": 2, "model": MODEL}
            refused = api.post("/v1/probes", json={**body, "max_cost_usd": 0.0})
            assert refused.status_code == 422 and refused.json()["field"] == "max_cost_usd"
            started = api.post("/v1/probes", json={**body, "max_cost_usd": 1.0})
            assert started.status_code == 202, started.text
            done = api.get(started.headers["location"], params={"wait": "true"}).json()
    assert done["status"] == "succeeded", done
    result = done["result"]
    assert result["verdict"] == "inconclusive"
    assert result["note"] == "baseline unstable: 1/2 full-context runs"
    assert (result["baseline"], result["without"], result["k"]) == (1, 0, 2)
    assert done["calls"]["planned"] == 4 and provider.answered == 4


def test_migration_0002_keeps_existing_trace_jobs_as_traces(tmp_path: Path) -> None:
    import asyncio
    import sqlite3

    from alembic import command

    from provenance_api.storage import crud_traces
    from provenance_api.storage.session import Database, alembic_config

    path = tmp_path / "old.db"
    url = f"sqlite+aiosqlite:///{path}"
    command.upgrade(alembic_config(url), "0001")
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO trace_jobs (id, tenant, user, turn_id, quote_id, claim, segment_id, model, params, status,"
            " calls_planned, calls_made, calls_billed, layer_scores, created_at, updated_at) VALUES ('tr_old',"
            " 'local', 'admin', 't1', 'q_old', 'c', 'r0', 'm', '{}', 'failed', 12, 3, 3, '{}',"
            " '2026-01-01 00:00:00', '2026-01-01 00:00:00')"
        )

    async def upgrade_and_read() -> crud_traces.JobRecord:
        db = Database(url)
        try:
            await db.migrate()
            return await crud_traces.get_job(db, "local", "tr_old", "trace")
        finally:
            await db.dispose()

    job = asyncio.run(upgrade_and_read())
    assert (job.kind, job.source_id, job.status, job.calls_made) == ("trace", None, "failed", 3)
