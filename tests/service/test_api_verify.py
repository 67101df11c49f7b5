"""The answer gate over HTTP (``POST /v1/turns/{id}/verify``): every traceable sentence traced
within one pre-quoted budget, through the litellm adapter to a local server running a scripted judge."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.api_server import InProcessApi, small_turn
from support.fake_openai import FakeOpenAI, FakeReply

MODEL = "openai/gpt-4o-mini"  # priced in litellm's bundled map; served here by FakeOpenAI
PROVIDER_KEY = "sk-verify-provider-key-0123456789"
ORDER = "Order A-1 shipped on 2025-03-03 with DHL."
REFUND = "Your refund of 40 EUR was approved on 2025-03-05."
WRONG_REFUND = "Your refund of 60 EUR was approved on 2025-03-05."
# The phrase of each claim's source that a judge recognises, keyed by words only the claim has.
KEYS = {"shipped on": "with carrier DHL", "was approved on": "Refund R-7: 40 EUR"}


def turn(refund: str = REFUND) -> dict[str, Any]:
    base = small_turn("t-verify-1", response=f"{ORDER} {refund} Would you like the tracking number?")
    base["response_payload"]["tool_calls"].append(
        {
            "name": "lookup_refund",
            "arguments": {"refund_id": "R-7"},
            "response": "Refund R-7: 40 EUR, approved 2025-03-05, to the original card.",
        }
    )
    return base


class Judge:
    """Judge calls: 9 when the claim's key phrase is among the sources shown, else 2. Span checks:
    the key phrase, as ``supported`` — or ``contradicted`` for a claim listed in ``contradicts``.
    A claim listed in ``fails`` gets HTTP 400 on every call."""

    def __init__(self, *, contradicts: tuple[str, ...] = (), fails: tuple[str, ...] = ()) -> None:
        self.contradicts, self.fails = contradicts, fails

    def __call__(self, request: dict[str, Any]) -> str | FakeReply:
        messages = request["messages"]
        system = "\n".join(str(m["content"]) for m in messages if m["role"] == "system")
        user = "\n".join(str(m["content"]) for m in messages if m["role"] != "system")
        marker = next(m for m in KEYS if m in user)
        if marker in self.fails:
            return FakeReply.error(400, "the model is unavailable for this request")
        key = KEYS[marker]
        if "strict judge of support" in system:
            return "9" if key in user else "2"
        if key not in user:
            return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.8, "reason": "-"})
        verdict = "contradicted" if marker in self.contradicts else "supported"
        return json.dumps({"verdict": verdict, "evidence_quote": key, "confidence": 0.9, "reason": "it says"})


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)

    def start(judge: Judge, stored: dict[str, Any]) -> Any:
        provider = FakeOpenAI(judge, api_key=PROVIDER_KEY).__enter__()
        monkeypatch.setenv("OPENAI_API_BASE", provider.base_url)
        srv = InProcessApi(tmp_path / str(len(started)), warm_up=False).__enter__()
        api = srv.client(srv.admin_key, timeout=120)
        started.append((provider, srv, api))
        assert api.post("/v1/turns", json=stored).status_code == 201
        return provider, api

    started: list[tuple[FakeOpenAI, InProcessApi, Any]] = []
    yield start
    for provider, srv, api in started:
        api.close()
        srv.__exit__(None, None, None)
        provider.__exit__(None, None, None)


def verify(api: Any, **body: Any) -> Any:
    return api.post("/v1/turns/t-verify-1/verify", json={"model": MODEL, "max_cost_usd": 1.0, **body})


def test_an_all_grounded_answer_is_allowed(serve: Any) -> None:
    provider, api = serve(Judge(), turn())
    out = verify(api)
    assert out.status_code == 200, out.text
    body = out.json()
    assert (body["decision"], body["rule"]) == ("allow", "all_grounded")
    rows = {s["segment_id"]: s for s in body["sentences"]}
    assert [(r["status"], r["decision"], r["rule"]) for r in rows.values()] == [
        ("traceable", "allow", "grounded"),
        ("traceable", "allow", "grounded"),
        ("agent_voice", "allow", "no_evidence_needed"),
    ]
    assert 0 < body["quoted_cost_usd"] <= 1.0 and body["calls"]["made"] == provider.answered > 0
    # each sentence is an ordinary stored trace whose result carries the declared-attribution audit
    trace = api.get(f"/v1/traces/{rows['r0']['trace_id']}").json()
    assert trace["status"] == "succeeded"
    assert trace["result"]["declared"]["outcome"] == "none_declared"
    assert trace["result"]["declared"]["grounding"] == ["s0"]


def test_one_contradicted_claim_blocks_the_answer(serve: Any) -> None:
    _, api = serve(Judge(contradicts=("was approved on",)), turn(WRONG_REFUND))
    body = verify(api).json()
    assert (body["decision"], body["rule"]) == ("block", "contradicted")
    assert "s1" in body["reason"] and "verified quote" in body["reason"]
    assert [s["decision"] for s in body["sentences"]] == ["allow", "block", "allow"]


def test_a_model_error_mid_run_blocks_with_the_reason(serve: Any) -> None:
    provider, api = serve(Judge(fails=("was approved on",)), turn())
    body = verify(api).json()
    assert (body["decision"], body["rule"]) == ("block", "error")
    failed = body["sentences"][1]
    assert failed["outcome"] == "error" and failed["rule"] == "error"
    assert "every model call failed" in failed["reason"] and failed["trace_id"] in failed["reason"]
    assert body["sentences"][0]["rule"] == "grounded"  # the other sentence was checked and passed
    assert provider.answered > 0


def test_a_budget_refusal_is_a_422_naming_max_cost_usd_and_never_allow(serve: Any) -> None:
    provider, api = serve(Judge(), turn())
    refused = verify(api, max_cost_usd=0.0001)
    assert refused.status_code == 422
    problem = refused.json()
    assert problem["field"] == "max_cost_usd" and "max_cost_usd" in problem["detail"]
    assert (problem["decision"], problem["rule"]) == ("block", "budget_refused")
    assert problem["quoted_cost_usd"] > 0.0001
    assert provider.answered == 0 and provider.requests == []
    # nothing was reserved: the whole budget is still there
    assert verify(api).json()["decision"] == "allow"
