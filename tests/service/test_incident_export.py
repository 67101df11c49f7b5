"""The incident export through the API (``GET /v1/turns/{turn_id}/incident``): a stored turn whose file read tells
the agent to send money, the transfer it made (a1) and the sentence that reports it (r1). The chain is checked in
both directions, and every envelope, age, custody binding and digest against what ``/actions`` and ``/segments``
report for the same turn; the export is scoped to the tenant, names ``target`` when it is out of range, gives the
same bytes twice, carries the latest finished trace of the action, and says the custody chain is broken once the
stored turn is edited behind the service's back."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.action_turns import injected, knowing_answer
from support.api_server import InProcessApi
from support.evidence_store import put_evidence
from support.incident_turns import IBAN, NOTES, REPORT, TURN_ID, notes_turn

from estimator.seams.llm import LLMRequest, LLMResponse, ScriptedLLM, Usage
from provenance_api.core.evidence import EvidenceRecord, text_digest

PROBLEM = "application/problem+json"
URL = "/v1/turns/conv-7:0/incident"
RULES = """
[[rules]]
action_tool = "send_money"
evidence_tool = "read_file"
max_age_seconds = 30
"""
RELAYED = datetime(2026, 3, 2, 9, 0, 2, 500000, tzinfo=UTC)


def _record_the_read(srv: InProcessApi) -> None:
    """The MCP gateway's record of the file read (as ``provenance gateway`` writes it), in the server's store."""
    record = EvidenceRecord(
        tenant="acme",
        principal="ops@host",
        server="files",
        transport="stdio",
        tool="read_file",
        digest=text_digest(NOTES),
        observed_at=RELAYED,
    )
    put_evidence(srv.settings.effective_database_url, record)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessApi, httpx.Client]]:
    root = tmp_path_factory.mktemp("incident")
    rules = root / "rules.toml"
    rules.write_text(RULES)
    with (
        InProcessApi(root / "data", warm_up=False, freshness_rules=rules) as srv,
        srv.client(srv.key("acme", "ann")) as client,
    ):
        _record_the_read(srv)
        assert client.post("/v1/turns", json=notes_turn().model_dump(mode="json")).status_code == 201
        yield srv, client


def _get(client: httpx.Client, target: str, **params: str) -> dict[str, Any]:
    r = client.get(URL, params={"target": target, **params})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_an_action_s_incident_has_its_chain_and_the_sources_it_could_read(
    api: tuple[InProcessApi, httpx.Client],
) -> None:
    srv, client = api
    incident = _get(client, "a1")
    actions = client.get(f"/v1/turns/{TURN_ID}/actions").json()
    transfer = next(a for a in actions["actions"] if a["id"] == "a1")
    listed = {s["id"]: s for s in actions["sources"]}
    read = next(s for s in actions["sources"] if s["tool"] == "read_file")

    assert incident["turn"]["turn_id"] == TURN_ID and incident["turn"]["conversation"] == "conv-7"
    assert incident["turn"]["answered_at"] == "2026-03-02T09:00:45Z"
    target = incident["target"]
    assert (target["kind"], target["id"], target["tool"], target["call_id"]) == ("action", "a1", "send_money", "c2")
    assert target["arguments"] == f'{{"amount":500,"currency":"EUR","iban":"{IBAN}"}}'
    assert target["produced_at"] == "2026-03-02T09:00:40Z" and target["origin"] == "data"
    chain = incident["chain"]
    assert (
        [(r["id"], r["text"]) for r in chain["reported_by"]]
        == [("r1", REPORT)]
        == [(r, REPORT) for r in transfer["reported_by"]]
    )
    assert [(c["source_id"], c["basis"]) for c in chain["caused_by"]] == [(read["id"], "screen")]
    assert chain["text"] == (
        f'a1 `send_money` ← reported by r1 "{REPORT}"; caused by {read["id"]} (tool return of `read_file`)'
    )
    # what a1 could read when it was made: never the transfer's own return; ages at 09:00:40, not at the answer
    ages = {a["source_id"]: a for a in transfer["source_ages"]}
    assert [s["id"] for s in incident["sources"]] == [s["id"] for s in actions["sources"] if s["id"] in ages]
    assert "send_money" not in {s["tool"] for s in incident["sources"]}
    for source in incident["sources"]:
        served = listed[source["id"]]
        assert source["envelope"] == served["envelope"] and source["digest"] == served["envelope"]["digest"]
        assert len(source["digest"]) == 64
        assert (source["age_seconds"], source["age"]) == (ages[source["id"]]["age_seconds"], ages[source["id"]]["age"])
        assert (source["custody"], source["custody_server"], source["custody_observed_at"]) == (
            served["custody"] or "history",
            served["custody_server"],
            served["custody_observed_at"],
        )
    mine = next(s for s in incident["sources"] if s["id"] == read["id"])
    assert (mine["age_seconds"], mine["age"]) == (38.0, "38 s")
    assert (mine["custody"], mine["custody_server"], mine["custody_observed_at"]) == (
        "gateway",
        "files",
        "2026-03-02T09:00:02.500000Z",
    )
    assert mine["envelope"]["principal"] == "alice" and mine["envelope"]["tenant"] is None  # not recorded: null
    assert incident["argument_sources"] == transfer["argument_sources"]
    assert incident["injection"] == transfer["injection"] and incident["injection"]["suspected"] is True
    assert incident["freshness"] == transfer["freshness"] and incident["freshness"][0]["status"] == "breach"
    assert incident["freshness_rules"] == 1
    assert incident["trace"] is None and "no trace of a1" in incident["trace_note"]
    # the turn's custody record is the log's head (the last thing stored), checked against the admin walk
    with srv.client(srv.admin_key) as admin:
        walk = admin.get("/v1/admin/audit/verify", params={"tenant": "acme"}).json()
    log = incident["custody_log"]
    assert log["intact"] is True and log["broken"] is None and log["turn_broken"] is False
    assert (log["record"]["seq"], log["record"]["hash"]) == (walk["head"]["seq"], walk["head"]["hash"])
    assert log["record"]["kind"] == "turn_stored" and log["records"] == walk["records"]


def test_a_sentence_s_incident_goes_the_other_way(api: tuple[InProcessApi, httpx.Client]) -> None:
    _, client = api
    incident = _get(client, "r1")
    segments = client.get(f"/v1/turns/{TURN_ID}/segments").json()
    sentence = next(s for s in segments["segments"] if s["id"] == "r1")
    assert incident["target"]["kind"] == "sentence" and incident["target"]["text"] == sentence["text"] == REPORT
    assert incident["target"]["produced_at"] == segments["answered_at"] == "2026-03-02T09:00:45Z"
    assert incident["target"]["status"] == sentence["status"]
    assert [(r["kind"], r["id"]) for r in incident["chain"]["reports"]] == [("action", "a1")]
    assert incident["chain"]["reported_by"] == []
    (cause,) = incident["chain"]["caused_by"]
    assert (cause["basis"], cause["via"]) == ("screen", "a1")
    assert incident["chain"]["text"].startswith(f'r1 "{REPORT}" → reports a1 `send_money`; caused by ')
    # a sentence could read every source; its ages are at the answer, as /segments gives them
    assert [s["id"] for s in incident["sources"]] == [s["id"] for s in segments["sources"]]
    for source, served in zip(incident["sources"], segments["sources"], strict=True):
        assert source["envelope"] == served["envelope"] and source["digest"] == served["envelope"]["digest"]
        assert (source["age_seconds"], source["age"]) == (served["age_seconds"], served["age"])
        assert source["custody"] == (served["custody"] or "history")
        assert source["custody_observed_at"] == served["custody_observed_at"]
    assert incident["argument_sources"] is None and incident["injection"] is None and incident["freshness"] == []


def test_markdown_lists_every_digest_and_the_same_store_gives_the_same_bytes(
    api: tuple[InProcessApi, httpx.Client],
) -> None:
    _, client = api
    first = client.get(URL, params={"target": "a1", "format": "markdown"})
    second = client.get(URL, params={"target": "a1", "format": "markdown"})
    assert first.status_code == 200, first.text
    assert first.headers["content-type"].startswith("text/markdown")
    assert first.headers["content-disposition"] == 'attachment; filename="incident-conv-7_0-a1.md"'
    assert first.content == second.content
    assert client.get(URL, params={"target": "a1"}).content == client.get(URL, params={"target": "a1"}).content
    text = first.text
    incident = _get(client, "a1")
    assert text.startswith("# Incident: action a1 ")
    for source in incident["sources"]:
        assert f"`{source['digest']}`" in text
    assert "a1 `send_move`" not in text and 'a1 `send_money` ← reported by r1 "I have sent 500 EUR' in text
    assert "custody verified by the gateway (files, 2026-03-02T09:00:02.500000+00:00)" in text
    assert "| 38 s |" in text and "not recorded" in text  # the rule's tenant and scope: not recorded
    assert "**Verification:** custody log intact" in text
    assert "no trace of a1 has finished" in text


def test_another_tenant_gets_404_and_a_target_out_of_range_a_422_naming_it(
    api: tuple[InProcessApi, httpx.Client],
) -> None:
    srv, client = api
    with srv.client(srv.key("other", "bob")) as other:
        hidden = other.get(URL, params={"target": "a1"})
    assert hidden.status_code == 404 and hidden.headers["content-type"].startswith(PROBLEM)
    missing = client.get("/v1/turns/nope/incident", params={"target": "a1"})
    assert missing.status_code == 404
    wrong = client.get(URL, params={"target": "a99"})
    assert wrong.status_code == 422 and wrong.headers["content-type"].startswith(PROBLEM)
    problem = wrong.json()
    assert problem["field"] == "target" and "a0…a1" in problem["detail"] and "r0…r1" in problem["detail"]
    assert "a0…a1" in problem["fix"]
    assert client.get(URL).status_code == 422  # no target at all
    assert client.get(URL, params={"target": "a1", "format": "pdf"}).status_code == 422


def test_the_api_documents_the_route(api: tuple[InProcessApi, httpx.Client]) -> None:
    spec = api[1].get("/openapi.json").json()
    route = spec["paths"]["/v1/turns/{turn_id}/incident"]["get"]
    assert route["summary"].startswith("Incident export")
    assert "text/markdown" in route["responses"]["200"]["content"]
    assert route["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/IncidentOut")


def _knowing_llm(model: str, api_base: str | None) -> ScriptedLLM:
    def script(request: LLMRequest) -> LLMResponse:
        text = knowing_answer(request.messages[0].content, request.messages[-1].content)
        return LLMResponse(text=text, usage=Usage(len(request.prompt_text) // 4, 1))

    return ScriptedLLM(script, model=model)


def test_the_latest_finished_trace_of_the_action_is_carried(tmp_path: Path) -> None:
    with (
        InProcessApi(tmp_path, warm_up=False, llm_factory=_knowing_llm) as srv,
        srv.client(srv.key("acme", "ann")) as client,
    ):
        assert client.post("/v1/turns", json=injected().model_dump(mode="json")).status_code == 201
        started = client.post("/v1/traces", json={"turn_id": "t-act", "target": {"action": "a1"}, "max_cost_usd": 1})
        assert started.status_code == 202, started.text
        trace_id = started.json()["trace_id"]
        deadline = time.monotonic() + 60
        while (done := client.get(f"/v1/traces/{trace_id}").json())["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, done  # stops a hung wait; not a timing assertion
            time.sleep(0.05)
        incident = client.get("/v1/turns/t-act/incident", params={"target": "a1"}).json()
        other = client.get("/v1/turns/t-act/incident", params={"target": "a0"}).json()
        text = client.get("/v1/turns/t-act/incident", params={"target": "a1", "format": "markdown"}).text
    assert done["status"] == "succeeded", done
    result = done["result"]
    trace = incident["trace"]
    assert (trace["trace_id"], trace["status"], trace["estimator"]) == (trace_id, "succeeded", result["estimator"])
    assert trace["verdict"] == result["verdict"] and trace["unit"] == "points"  # the judge's 1–9 scale
    page = next(s["source_id"] for s in result["sources"] if s["label"].startswith("fetch_page"))
    assert trace["sources"][0]["source_id"] == page and trace["sources"][0]["role"] == "grounds"
    measured = {s["source_id"]: (s["role"], s["delta"]) for s in result["sources"]}
    assert {s["source_id"]: (s["role"], s["delta"]) for s in trace["sources"]} == measured
    deltas = [s["delta"] for s in trace["sources"] if s["delta"] is not None]
    assert deltas == sorted(deltas, reverse=True)
    assert trace["injection"] == result["injection"] and trace["injection"]["suspected"] is True
    assert [(c["source_id"], c["basis"]) for c in incident["chain"]["caused_by"]] == [(page, "trace")]
    drop = next(s["delta"] for s in result["sources"] if s["source_id"] == page)
    assert incident["chain"]["caused_by"][0]["because"] == f"grounds, Δ {drop:.2f} points"
    assert other["trace"] is None  # a trace of a1 is not a trace of a0
    assert f"Trace `{trace_id}`: succeeded" in text and f"| 1 | `{page}` |" in text
    assert incident["custody_log"]["intact"] is True  # the stored result is chained too


def test_a_turn_edited_behind_the_service_s_back_breaks_the_chain(tmp_path: Path) -> None:
    with InProcessApi(tmp_path, warm_up=False) as srv, srv.client(srv.key("acme", "ann")) as client:
        assert client.post("/v1/turns", json=notes_turn().model_dump(mode="json")).status_code == 201
        before = client.get(URL, params={"target": "a1"}).json()["custody_log"]
        with sqlite3.connect(tmp_path / "provenance.db") as conn:
            edited = conn.execute(
                "UPDATE stored_turns SET body = REPLACE(body, 'Hire two engineers', 'Hire six engineers') "
                "WHERE turn_id = ?",
                (TURN_ID,),
            ).rowcount
        after = client.get(URL, params={"target": "a1"}).json()["custody_log"]
        text = client.get(URL, params={"target": "a1", "format": "markdown"}).text
    assert edited == 1 and before["intact"] is True
    assert after["intact"] is False and after["turn_broken"] is True
    assert after["broken"]["subject"] == TURN_ID and after["broken"]["problem"] == "content_differs"
    assert after["record"] == before["record"]  # the record stands; what is stored no longer matches it
    assert f"custody log BROKEN at record {after['broken']['seq']} (turn_stored '{TURN_ID}') — this turn" in text
