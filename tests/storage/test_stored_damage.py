"""Bad input never becomes stored damage: each test is named after a finding and failed before the fix.

- A JSONL upload with a 1,000-deep line answered 500; a lone surrogate answered 422 for the whole upload; the
  lines after a bad one were dropped and no summary came back.
- A stored turn that can no longer be read (stored by an older version, 200 levels deep) answered 500 on every
  read of it and on the tenant's gating report.
- There was no way to delete a turn, nor what one import stored.
- Trace results are an append-only audit record: only deleting their turn may remove them.

Every test runs the whole service in process over ASGI (``InProcessApi``) with a scripted judge; those that
touch SQL that differs between engines (the search index, the deletes) run on SQLite and on a real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from sqlalchemy import delete, func, select, text
from support.api_server import SMALL_CLAIM, InProcessApi, scripted_factory, small_turn
from support.services import DbBackend

from estimator.corpus.turn import StoredTurn
from provenance_api.storage import search_index
from provenance_api.storage.models import (
    AppendOnlyViolation,
    QuoteRow,
    StoredTurnRow,
    TraceJobRow,
    TraceResultRow,
    utcnow,
)
from provenance_api.storage.session import Database

PROBLEM = "application/problem+json"


def chat(ident: str, answer: str) -> dict[str, Any]:
    return {
        "id": ident,
        "messages": [
            {"role": "system", "content": "You are a support agent. Always name the carrier."},
            {"role": "user", "content": f"Where is order {ident}?"},
            {"role": "assistant", "content": answer},
        ],
    }


def jsonl(*lines: str) -> bytes:
    return "\n".join(lines).encode("utf-8")


def deep_json(levels: int) -> str:
    return "[" * levels + "]" * levels


def deep_dict(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def db_run(server: InProcessApi, work: Any) -> Any:
    """Run ``work(db)`` on the server's own database through a second engine (as another process would)."""

    async def run() -> Any:
        db = Database(server.settings.effective_database_url)
        try:
            return await work(db)
        finally:
            await db.dispose()

    return asyncio.run(run())


def store_as_an_older_version_did(server: InProcessApi, tenant: str, turn_id: str) -> None:
    """A turn whose tool arguments nest 200 levels deep, stored as the service did before the nesting cap: the
    raw row and its search-index row, without today's validation (which refuses it)."""
    turn = small_turn(turn_id=turn_id, response="Order D-1 shipped with DHL.", query="Where is order D-1?")
    turn["response_payload"]["tool_calls"][0]["arguments"] = deep_dict(200)
    body = json.dumps(turn, separators=(",", ":"))
    shallow = StoredTurn.model_validate(small_turn(turn_id=turn_id, response=turn["response"], query=turn["query"]))

    async def work(db: Database) -> None:
        async with db.transaction() as session:
            row = StoredTurnRow(
                tenant=tenant,
                turn_id=turn_id,
                digest=hashlib.sha256(body.encode()).hexdigest(),
                body=body,
                model=turn["model"],
                agent=turn["agent"],
                turn_created_at=None,
                stored_at=utcnow(),
                stored_by="old-version",
            )
            session.add(row)
            await session.flush()
            await search_index.index_turn(session, seq=row.seq, tenant=tenant, turn=shallow)

    db_run(server, work)


def row_counts(server: InProcessApi, tenant: str, turn_ids: list[str]) -> dict[str, int]:
    """How many rows of each kind the tenant still holds for ``turn_ids`` (search rows by the turns' text)."""

    async def work(db: Database) -> dict[str, int]:
        async with db.session() as session:

            async def count(model: Any) -> int:
                query = (
                    select(func.count()).select_from(model).where(model.tenant == tenant, model.turn_id.in_(turn_ids))
                )
                return int((await session.execute(query)).scalar_one())

            out = {
                "turns": await count(StoredTurnRow),
                "quotes": await count(QuoteRow),
                "jobs": await count(TraceJobRow),
                "results": await count(TraceResultRow),
            }
            out["search"] = int(
                (
                    await session.execute(text("SELECT count(*) FROM turn_search WHERE tenant = :t"), {"t": tenant})
                ).scalar_one()
            )
            return out

    result: dict[str, int] = db_run(server, work)
    return result


def wait_done(api: httpx.Client, location: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        body: dict[str, Any] = api.get(location, params={"wait": "true"}).json()
        if body["status"] in ("succeeded", "failed", "interrupted"):
            return body
    raise AssertionError(f"{location} did not finish")


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture(scope="module")
def server(db_backend: DbBackend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApi]:
    with InProcessApi(
        tmp_path_factory.mktemp(f"damage-{db_backend.name}"),
        llm_factory=scripted_factory(),
        warm_up=False,
        database_url=db_backend.fresh_url(),
    ) as srv:
        yield srv


# --- imports: every bad line is reported and the rest imported -------------------------------------------


def stored_ids(api: httpx.Client) -> list[str]:
    """The caller's stored turn ids, oldest first (a turn's id ends in a digest of its content)."""
    return [t["turn_id"] for t in api.get("/v1/turns", params={"sort": "stored_at"}).json()["items"]]


def one_id(api: httpx.Client, prefix: str) -> str:
    """The one stored turn id that starts with ``prefix`` (``upload#b1:``)."""
    found = [i for i in stored_ids(api) if i.startswith(prefix)]
    assert len(found) == 1, (prefix, stored_ids(api))
    return found[0]


def test_a_1000_deep_jsonl_line_is_reported_and_the_rest_imported(server: InProcessApi) -> None:
    body = jsonl(
        json.dumps(chat("deep-a", "Order deep-a shipped with DHL.")),
        '{"id": "deep-x", "messages": ' + deep_json(1000) + "}",
        json.dumps(chat("deep-b", "Order deep-b is delayed.")),
    )
    with server.client(server.key("imp-deep", "ann")) as api:
        answer = api.post("/v1/imports", content=body)
        assert answer.status_code == 200, answer.text
        summary = answer.json()
        assert (summary["imported"], summary["rejected"]) == (2, 1), summary
        assert summary["errors"][0]["where"] == "line 2" and "nested too deeply" in summary["errors"][0]["reason"]
        assert summary["batch_id"].startswith("ib_")
        assert api.get(f"/v1/turns/{quote(one_id(api, 'upload#deep-b:'), safe='')}").status_code == 200


def test_a_lone_surrogate_line_is_reported_and_the_rest_imported(server: InProcessApi) -> None:
    lone = chat("sur-x", "Order sur-x shipped.")
    body = jsonl(
        json.dumps(chat("sur-a", "Order sur-a shipped with DHL.")),
        json.dumps(lone).replace("Order sur-x shipped.", "Order sur-x \\ud800 shipped."),
        json.dumps(chat("sur-b", "Order sur-b is delayed.")),
    )
    with server.client(server.key("imp-sur", "ann")) as api:
        answer = api.post("/v1/imports", content=body)
        assert answer.status_code == 200, answer.text
        summary = answer.json()
        assert (summary["imported"], summary["rejected"]) == (2, 1), summary
        where, reason = summary["errors"][0]["where"], summary["errors"][0]["reason"]
        assert where.startswith("line 2") and "surrogate" in reason and "RecordInvalid" not in reason
        assert [i.split(":")[0] for i in stored_ids(api)] == ["upload#sur-a", "upload#sur-b"]


def test_a_line_nesting_past_the_cap_is_rejected_naming_its_line_and_path(server: InProcessApi) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": json.dumps(deep_dict(80))}}
    deep = {
        "id": "cap-x",
        "messages": [
            {"role": "user", "content": "Where is order cap-x?"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
            {"role": "assistant", "content": "Order cap-x shipped."},
        ],
    }
    body = jsonl(json.dumps(chat("cap-a", "Order cap-a shipped with DHL.")), json.dumps(deep))
    with server.client(server.key("imp-cap", "ann")) as api:
        summary = api.post("/v1/imports", content=body).json()
        assert (summary["imported"], summary["rejected"]) == (1, 1), summary
        error = summary["errors"][0]
        assert error["where"].startswith("line 2")
        assert error["reason"].startswith("turn.response_payload: response_payload.tool_calls[0].arguments.a.a")
        assert "64 levels" in error["reason"] and "input_value" not in error["reason"]


def test_deep_request_bodies_of_quotes_probes_and_traces_are_refused_with_422(server: InProcessApi) -> None:
    with server.client(server.key("deep-bodies", "ann")) as api:
        assert api.post("/v1/turns", json=small_turn(turn_id="deep-bodies")).status_code == 201
        for path, body in [
            ("/v1/quotes", '{"turn_id": "deep-bodies", "sentence": "r0", "params": ' + deep_json(5000) + "}"),
            ("/v1/probes", '{"turn_id": "deep-bodies", "source_id": "s0", "sentence": ' + deep_json(200) + "}"),
            ("/v1/traces", '{"quote_id": ' + deep_json(100_000) + "}"),
        ]:
            problem = assert_problem(api.post(path, content=body, headers={"content-type": "application/json"}), 422)
            assert problem["field"].startswith("body"), problem
        assert api.get("/v1/turns/deep-bodies/segments").status_code == 200


# --- reads survive a turn that cannot be read ---------------------------------------------------------------


def test_every_read_path_survives_an_unrenderable_turn(server: InProcessApi) -> None:
    tenant = "reads"
    key = server.key(tenant, "ann")
    with server.client(key) as api, server.client() as viewer:
        assert viewer.post("/ui/session", json={"api_key": key}).status_code == 200
        assert api.post("/v1/turns", json=small_turn(turn_id="fine-1")).status_code == 201
        store_as_an_older_version_did(server, tenant, "old-deep")
        assert api.post("/v1/turns", json=small_turn(turn_id="fine-2")).status_code == 201

        listed = api.get("/v1/turns", params={"sort": "stored_at"})
        assert listed.status_code == 200
        assert [t["turn_id"] for t in listed.json()["items"]] == ["fine-1", "old-deep", "fine-2"]
        found = api.get("/v1/turns", params={"q": "order D-1"})
        assert found.status_code == 200 and [t["turn_id"] for t in found.json()["items"]] == ["old-deep"]

        for method, path, body in [
            ("GET", "/v1/turns/old-deep", None),
            ("GET", "/v1/turns/old-deep/segments", None),
            ("GET", "/v1/turns/old-deep/sources", None),
            ("POST", "/v1/turns/old-deep/segments", {"segments": [{"id": "a", "text": "Order D-1 shipped."}]}),
            ("POST", "/v1/quotes", {"turn_id": "old-deep", "sentence": "r0"}),
            ("POST", "/v1/probes", {"turn_id": "old-deep", "sentence": "r0", "source_id": "s0", "max_cost_usd": 1.0}),
            ("POST", "/v1/turns/old-deep/verify", {"max_cost_usd": 1.0}),
        ]:
            problem = assert_problem(api.request(method, path, json=body), 409)
            assert "'old-deep'" in problem["detail"] and "cannot be read" in problem["detail"], (path, problem)
            assert problem["fix"].startswith("delete it with DELETE /v1/turns/old-deep"), (path, problem)

        shown = viewer.get("/ui/api/turns", params={"sort": "stored_at"})
        assert shown.status_code == 200, shown.text
        assert [(t["turn_id"], bool(t.get("unreadable"))) for t in shown.json()["items"]] == [
            ("fine-1", False),
            ("old-deep", True),
            ("fine-2", False),
        ]

        report = api.get("/v1/reports/gating")
        assert report.status_code == 200, report.text
        data = report.json()
        assert [t["turn_id"] for t in data["turns"]] == ["fine-1", "fine-2"]
        assert [u["turn_id"] for u in data["unreadable"]] == ["old-deep"]
        assert "DELETE /v1/turns/old-deep" in data["unreadable"][0]["fix"]

        assert api.delete("/v1/turns/old-deep").status_code == 204
        assert_problem(api.get("/v1/turns/old-deep"), 404)
        assert api.get("/v1/turns", params={"q": "order D-1"}).json()["items"] == []
        assert api.get("/v1/reports/gating").json()["unreadable"] == []


# --- deleting a turn ------------------------------------------------------------------------------------------


def test_deleting_a_turn_removes_its_quotes_traces_and_results(server: InProcessApi) -> None:
    tenant = "del"
    with server.client(server.key(tenant, "ann")) as api:
        assert api.post("/v1/turns", json=small_turn(turn_id="del/1")).status_code == 201
        assert api.post("/v1/turns", json=small_turn(turn_id="keep-1")).status_code == 201
        quote = api.post("/v1/quotes", json={"turn_id": "del/1", "sentence": SMALL_CLAIM}).json()
        started = api.post("/v1/traces", json={"quote_id": quote["quote_id"]})
        assert started.status_code == 202, started.text
        trace = wait_done(api, started.headers["location"])
        assert trace["status"] == "succeeded", trace
        probe = api.post(
            "/v1/probes", json={"turn_id": "del/1", "sentence": "r0", "source_id": "s0", "max_cost_usd": 1.0}
        )
        assert probe.status_code == 202, probe.text
        wait_done(api, probe.headers["location"])
        api.post("/v1/quotes", json={"turn_id": "del/1", "sentence": "r0"})  # an unused quote too
        before = row_counts(server, tenant, ["del/1"])
        assert before["turns"] == 1 and before["quotes"] >= 3 and before["jobs"] == 2 and before["results"] >= 1
        assert before["search"] == 2

        assert api.delete("/v1/turns/del%2F1").status_code == 204
        assert row_counts(server, tenant, ["del/1"]) == {"turns": 0, "quotes": 0, "jobs": 0, "results": 0, "search": 1}
        assert_problem(api.get("/v1/turns/del%2F1"), 404)
        assert_problem(api.get(started.headers["location"]), 404)
        assert_problem(api.get(probe.headers["location"]), 404)
        assert_problem(api.post("/v1/traces", json={"quote_id": quote["quote_id"]}), 404)
        assert [t["turn_id"] for t in api.get("/v1/turns").json()["items"]] == ["keep-1"]
        assert_problem(api.delete("/v1/turns/del%2F1"), 404)
        # the id is free again: the same content is stored anew
        assert api.post("/v1/turns", json=small_turn(turn_id="del/1")).status_code == 201


def test_another_tenants_turn_cannot_be_deleted(server: InProcessApi) -> None:
    with server.client(server.key("owner", "ann")) as owner, server.client(server.key("stranger", "bo")) as stranger:
        assert owner.post("/v1/turns", json=small_turn(turn_id="mine")).status_code == 201
        problem = assert_problem(stranger.delete("/v1/turns/mine"), 404)
        assert problem["field"] == "turn_id" and "mine" in problem["detail"]
        assert owner.get("/v1/turns/mine").status_code == 200
        assert_problem(owner.delete("/v1/turns/never-stored"), 404)


def test_a_turn_being_traced_is_not_deleted_and_the_trace_is_named(tmp_path: Path) -> None:
    with (
        InProcessApi(tmp_path, llm_factory=scripted_factory(latency=0.5), warm_up=False) as srv,
        srv.client(srv.key("busy", "ann")) as api,
    ):
        assert api.post("/v1/turns", json=small_turn(turn_id="busy-1")).status_code == 201
        quote = api.post("/v1/quotes", json={"turn_id": "busy-1", "sentence": SMALL_CLAIM}).json()
        started = api.post("/v1/traces", json={"quote_id": quote["quote_id"]})
        trace_id = started.json()["trace_id"]
        problem = assert_problem(api.delete("/v1/turns/busy-1"), 409)
        assert trace_id in problem["detail"] and problem["job_id"] == trace_id
        assert problem["fix"].startswith(f"wait for the trace to end (GET /v1/traces/{trace_id}?wait=true)")
        assert api.get("/v1/turns/busy-1").status_code == 200
        assert wait_done(api, started.headers["location"])["status"] == "succeeded"
        assert api.delete("/v1/turns/busy-1").status_code == 204


def test_trace_results_stay_append_only_outside_turn_deletion(server: InProcessApi) -> None:
    with server.client(server.key("audit", "ann")) as api:
        assert api.post("/v1/turns", json=small_turn(turn_id="audit-1")).status_code == 201
        quote = api.post("/v1/quotes", json={"turn_id": "audit-1", "sentence": SMALL_CLAIM}).json()
        started = api.post("/v1/traces", json={"quote_id": quote["quote_id"]})
        assert wait_done(api, started.headers["location"])["status"] == "succeeded"

    async def try_removing(db: Database) -> list[str]:
        refused = []
        for attempt in ("row", "bulk delete", "bulk update"):
            try:
                async with db.transaction() as session:
                    if attempt == "row":
                        row = (
                            await session.execute(select(TraceResultRow).where(TraceResultRow.turn_id == "audit-1"))
                        ).scalar_one()
                        await session.delete(row)
                        await session.flush()
                    elif attempt == "bulk delete":
                        await session.execute(delete(TraceResultRow).where(TraceResultRow.turn_id == "audit-1"))
                    else:
                        from sqlalchemy import update

                        await session.execute(
                            update(TraceResultRow).where(TraceResultRow.turn_id == "audit-1").values(model="changed")
                        )
            except AppendOnlyViolation:
                refused.append(attempt)
        return refused

    assert db_run(server, try_removing) == ["row", "bulk delete", "bulk update"]
    assert row_counts(server, "audit", ["audit-1"])["results"] == 1


# --- import batches -------------------------------------------------------------------------------------------


def test_an_import_batch_is_deleted_for_its_tenant_only(server: InProcessApi) -> None:
    upload = jsonl(json.dumps(chat("b1", "Order b1 shipped with DHL.")), json.dumps(chat("b2", "Order b2 is late.")))
    with server.client(server.key("batch-a", "ann")) as a, server.client(server.key("batch-b", "bo")) as b:
        assert a.post("/v1/turns", json=small_turn(turn_id="a-own")).status_code == 201
        first = a.post("/v1/imports", content=upload).json()
        assert first["imported"] == 2
        again = a.post("/v1/imports", content=upload).json()  # created nothing: its batch owns no turn
        assert again["unchanged"] == 2 and again["batch_id"] != first["batch_id"]
        theirs = b.post("/v1/imports", content=upload).json()
        assert theirs["imported"] == 2

        assert_problem(b.delete(f"/v1/imports/{first['batch_id']}"), 404)
        problem = assert_problem(a.delete(f"/v1/imports/{again['batch_id']}"), 404)
        assert problem["field"] == "batch_id" and "batch_id" in problem["fix"]
        b1, b2 = one_id(a, "upload#b1:"), one_id(a, "upload#b2:")
        quoted = a.post("/v1/quotes", json={"turn_id": b1, "sentence": "r0"})
        assert quoted.status_code == 201, quoted.text

        assert a.delete(f"/v1/imports/{first['batch_id']}").status_code == 204
        assert [t["turn_id"] for t in a.get("/v1/turns").json()["items"]] == ["a-own"]
        assert row_counts(server, "batch-a", [b1, b2])["quotes"] == 0
        assert stored_ids(b) == [b1, b2]  # the same content, the same ids, for the other tenant
        assert_problem(a.delete(f"/v1/imports/{first['batch_id']}"), 404)
        assert a.post("/v1/imports", content=upload).json()["imported"] == 2  # importable again


def test_a_history_source_turn_over_the_size_limit_is_rejected_alone(tmp_path: Path) -> None:
    from test_agent_libraries import ToolLog, run_agent

    db = tmp_path / "agent.db"
    run_agent(
        db,
        ToolLog(),
        [("small", "Weather in Paris?", "Paris"), ("huge", "Weather in Oslo? " + "please " * 600, "Oslo")],
    )
    sources = {"desk": {"url": f"sqlite:///{db}", "format": "openai-agents-session", "tenants": ["sized"]}}
    with (
        InProcessApi(tmp_path / "data", warm_up=False, history_sources=sources, max_body_bytes=3000) as srv,
        srv.client(srv.key("sized", "ann")) as api,
    ):
        summary = api.post("/v1/imports/sources/desk").json()
        assert (summary["imported"], summary["rejected"]) == (1, 1), summary
        assert summary["batch_id"].startswith("ib_")
        error = summary["errors"][0]
        assert "huge" in error["where"] and "over this server's limit of 3,000 bytes" in error["reason"]
        stored = stored_ids(api)
        assert len(stored) == 1 and "#small:" in stored[0] and not any("#huge:" in i for i in stored), stored
        assert api.get(f"/v1/turns/{quote(stored[0], safe='')}").status_code == 200
