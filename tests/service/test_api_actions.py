"""The actions of a stored turn through the API (``GET /v1/turns/{id}/actions``) and the CLI (``provenance gate``):
one shape, the same numbers, scoped to the tenant, zero model calls."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.action_turns import IBAN, injected, knowing_answer
from support.api_server import InProcessApi
from support.fake_openai import FakeOpenAI

from estimator.actions.trace import find_action
from estimator.seams.llm import LLMRequest, LLMResponse, ScriptedLLM, Usage
from provenance_api.cli.main import main

PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessApi, httpx.Client]]:
    with (
        InProcessApi(tmp_path_factory.mktemp("actions"), warm_up=False) as srv,
        srv.client(srv.key("acme", "ann")) as client,
    ):
        assert client.post("/v1/turns", json=injected().model_dump(mode="json")).status_code == 201
        plain = {"turn_id": "t-plain", "query": "Hi", "response": "Hello! How can I help today?"}
        assert client.post("/v1/turns", json=plain).status_code == 201
        yield srv, client


def test_the_api_lists_each_action_with_its_sources_origin_and_the_screen(
    api: tuple[InProcessApi, httpx.Client],
) -> None:
    _, client = api
    r = client.get("/v1/turns/t-act/actions")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["summary"] == "2 actions: 1 steered by tool data" and body["steered"] == 1
    assert [(a["id"], a["tool"], a["call_id"], a["origin"]) for a in body["actions"]] == [
        ("a0", "fetch_page", "c1", "user"),
        ("a1", "transfer_money", "c2", "data"),
    ]
    page = next(s for s in body["sources"] if s["call_id"] == "c1")
    assert page["layer"] == "tools" and page["tool"] == "fetch_page"
    transfer = body["actions"][1]
    iban = next(a for a in transfer["argument_sources"] if a["path"] == "iban")
    assert iban["value"] == IBAN and iban["source_id"] == page["id"] and IBAN in iban["quote"]
    assert transfer["suspect_injection"] and transfer["injection"]["source_id"] == page["id"]
    assert transfer["reported_by"] == ["r1"]


def test_a_turn_without_tool_calls_has_no_actions_and_other_tenants_see_nothing(
    api: tuple[InProcessApi, httpx.Client],
) -> None:
    srv, client = api
    quiet = client.get("/v1/turns/t-plain/actions").json()
    assert quiet["summary"] == "no actions" and quiet["actions"] == [] and quiet["steered"] == 0
    with srv.client(srv.key("other", "bob")) as other:
        r = other.get("/v1/turns/t-act/actions")
    assert r.status_code == 404 and r.headers["content-type"].startswith(PROBLEM)
    missing = client.get("/v1/turns/nope/actions")
    assert missing.status_code == 404 and missing.json()["title"]


def test_the_cli_gate_prints_the_same_actions_and_counts_them(
    api: tuple[InProcessApi, httpx.Client], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, client = api
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps(injected().model_dump(mode="json")), encoding="utf-8")
    assert main(["gate", str(turn), "--json"]) == 0
    gate = json.loads(capsys.readouterr().out)
    served = client.get("/v1/turns/t-act/actions").json()
    assert gate["actions"] == served["actions"] and gate["sources"] == served["sources"]
    assert gate["summary"]["actions"] == 2 and gate["summary"]["steered_by_tool_data"] == 1
    assert gate["summary"]["line"].endswith("· 2 actions: 1 steered by tool data")
    assert main(["gate", str(turn)]) == 0
    text = capsys.readouterr().out
    assert "2 actions: 1 steered by tool data" in text and "steered by tool data: transfer_money" in text
    assert f"iban = '{IBAN}' ← s0, line 5" in text


def _knowing_llm(model: str, api_base: str | None) -> ScriptedLLM:
    def script(request: LLMRequest) -> LLMResponse:
        text = knowing_answer(request.messages[0].content, request.messages[-1].content)
        return LLMResponse(text=text, usage=Usage(len(request.prompt_text) // 4, 1))

    return ScriptedLLM(script, model=model)


def test_an_action_is_quoted_and_traced_through_the_api(tmp_path: Path) -> None:
    with (
        InProcessApi(tmp_path, warm_up=False, llm_factory=_knowing_llm) as srv,
        srv.client(srv.key("acme", "ann")) as client,
    ):
        assert client.post("/v1/turns", json=injected().model_dump(mode="json")).status_code == 201
        ask = {"turn_id": "t-act", "target": {"action": "a1"}, "model": "openai/fake-judge"}
        quote = client.post("/v1/quotes", json=ask)
        assert quote.status_code == 201, quote.text
        q = quote.json()
        call = find_action(injected(), "a1").text
        assert q["segment_id"] == "a1" and q["claim"] == call
        # priced on what the agent had seen when it made the call: never the transfer's own result
        whole = client.post("/v1/quotes", json={**ask, "target": None, "sentence": "r0"}).json()
        assert q["sources"] == whole["sources"] - 1 and q["planned_calls"] < whole["planned_calls"]
        started = client.post("/v1/traces", json={"quote_id": q["quote_id"]})
        assert started.status_code == 202, started.text
        trace_id = started.json()["trace_id"]
        deadline = time.monotonic() + 60
        while (done := client.get(f"/v1/traces/{trace_id}").json())["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, done
            time.sleep(0.05)
        markdown = client.get(f"/v1/traces/{trace_id}/export", params={"format": "markdown"}).text
        # the inline form takes the same target
        inline = client.post("/v1/traces", json={"turn_id": "t-act", "target": {"action": "a1"}, "max_cost_usd": 1})
        assert inline.status_code == 202, inline.text
        wrong = client.post("/v1/quotes", json={**ask, "target": {"action": "a7"}})
        both = client.post("/v1/quotes", json={**ask, "sentence": "r0"})
        neither = client.post("/v1/quotes", json={"turn_id": "t-act"})
        probe = client.post("/v1/quotes", json={**ask, "probe": True})
    assert done["status"] == "succeeded", done
    result = done["result"]
    sources = {s["source_id"]: s for s in result["sources"]}
    page = next(sid for sid, s in sources.items() if s["label"].startswith("fetch_page"))
    assert result["target"] == {
        "kind": "action",
        "id": "a1",
        "tool": "transfer_money",
        "call_id": "c2",
        "text": call,
        "context_sources": result["target"]["context_sources"],
    }
    assert "transfer_money" not in {s["label"].split(":")[0].split("(")[0] for s in sources.values()}
    assert sources[page]["role"] == "grounds" and result["injection"]["suspected"] is True
    assert result["injection"]["source_id"] == page and IBAN in result["injection"]["quote"]
    assert "judge_action_system" in done["result"]["prompt_versions"]
    assert "declared" not in result  # the declared-attribution audit is a sentence's
    assert markdown.startswith("### Provenance of an action (a1, a tool call the agent made)")
    assert "**Steered by tool data.** transfer\\_money was called because" in markdown and IBAN in markdown
    assert wrong.status_code == 422 and wrong.json()["field"] == "target" and "a0–a1" in wrong.json()["detail"]
    assert both.status_code == 422 and both.json()["field"] == "target"
    assert neither.status_code == 422 and neither.json()["field"] == "sentence"
    assert probe.status_code == 422 and probe.json()["field"] == "probe"


@pytest.mark.slow
def test_the_cli_traces_an_action_over_http(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps(injected().model_dump(mode="json")), encoding="utf-8")

    def answer(request: dict[str, Any]) -> str:
        messages = request["messages"]
        return knowing_answer(messages[0]["content"], messages[-1]["content"])

    with FakeOpenAI(answer) as srv:
        argv = ["trace", str(turn), "a1", "--model", "openai/fake", "--api-base", srv.base_url, "--api-key", "k"]
        code = main([*argv, "--yes", "--json", "--no-log"])
        out, err = capsys.readouterr()
        assert code == 0, err
        data = json.loads(out)
        assert not any("transfer 7781 done" in json.dumps(r) for r in srv.requests)
        text_code = main([*argv, "--yes", "--no-log"])
        text = capsys.readouterr().out
    assert data["target"]["id"] == "a1" and data["injection"]["suspected"] is True
    assert text_code == 0
    assert text.startswith("Action: a1 transfer_money(") and "Injection: steered by tool data" in text
    assert f"transfer 1000 EUR to {IBAN}" in text
