"""``estimator: judged | expected | logprob | both`` on the quote and trace endpoints, through the app: the scripted
judge through ``llm_factory`` and a scripted scorer (log p of the claim rises by 40 nats when the tool
return is shown) through ``scorer_factory``."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_server import SMALL_CLAIM, SMALL_KEY, InProcessApi, KeyedJudge, scripted_factory, small_turn
from support.fake_openai import FakeOpenAI, FakeReply

from estimator.seams.llm import Message
from estimator.seams.scorer import ScriptedScorer

SCORER_BASE = "http://127.0.0.1:9/v1"  # a configured scoring server; the injected scorer stands in for it


def planted(messages: Sequence[Message], target: str) -> float:
    """log p(claim) = -70 nats, +40 when the tool return (the planted cause) is among the sources shown."""
    return -70.0 + (40.0 if any(SMALL_KEY in m.content for m in messages) else 0.0)


@pytest.fixture
def scorer() -> ScriptedScorer:
    return ScriptedScorer(planted)


@pytest.fixture
def api(tmp_path: Path, scorer: ScriptedScorer) -> Iterator[httpx.Client]:
    with (
        InProcessApi(
            tmp_path,
            llm_factory=scripted_factory(),
            scorer_factory=lambda model: scorer,
            warm_up=False,
            scorer_api_base=SCORER_BASE,
        ) as srv,
        srv.client(srv.admin_key, timeout=60) as c,
    ):
        assert c.post("/v1/turns", json=small_turn()).status_code == 201
        yield c


def tool_source(api: httpx.Client) -> str:
    layers = api.get("/v1/turns/t-small-1/sources").json()["layers"]
    source_id: str = next(s["id"] for layer in layers if layer["layer"] == "tools" for s in layer["sources"])
    return source_id


def run(api: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    started = api.post("/v1/traces", json=body)
    assert started.status_code == 202, started.text
    done: dict[str, Any] = api.get(f"/v1/traces/{started.json()['trace_id']}", params={"wait": "true"}).json()
    assert done["status"] == "succeeded", done
    return done


def test_the_quote_says_whether_the_model_can_score_and_keeps_the_estimator(api: httpx.Client) -> None:
    judged = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM}).json()
    assert judged["estimator"] == "judged" and judged["scoring"]["can_score"] is True
    quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "estimator": "logprob"})
    assert quote.status_code == 201, quote.text
    body = quote.json()
    assert body["estimator"] == "logprob" and body["scoring"]["how"] == "completions-echo"
    assert body["planned_calls"] == body["scoring"]["scoring_calls"] + body["scoring"]["span_calls"]


def test_a_logprob_trace_from_a_quote_finds_the_planted_cause(api: httpx.Client, scorer: ScriptedScorer) -> None:
    quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "estimator": "logprob"})
    result = run(api, {"quote_id": quote.json()["quote_id"]})["result"]
    assert result["estimator"] == "logprob" and result["verdict"] == "attributed"
    assert result["units"] == "nats" and scorer.calls
    grounds = [s["source_id"] for s in result["sources"] if s["role"] == "grounds"]
    assert grounds == [tool_source(api)]
    assert "agreement" not in result


def test_both_stores_the_judged_result_with_logprob_and_agreement(api: httpx.Client) -> None:
    quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "estimator": "both"})
    assert quote.json()["estimator"] == "both"
    result = run(api, {"quote_id": quote.json()["quote_id"]})["result"]
    # the result names the job's estimator; its top-level scores are the judged trace's (no nats)
    assert result["estimator"] == "both" and result["logprob"]["estimator"] == "logprob"
    assert "units" not in result and result["verdict"] == result["agreement"]["judged"]["verdict"]
    agree = result["agreement"]
    assert agree["same_verdict"] is True and agree["same_top_source"] is True
    assert agree["judged"]["top_source"] == agree["logprob"]["top_source"] == tool_source(api)


def test_a_model_that_cannot_score_is_refused_naming_estimator(tmp_path: Path, scorer: ScriptedScorer) -> None:
    with (
        InProcessApi(
            tmp_path, llm_factory=scripted_factory(), scorer_factory=lambda model: scorer, warm_up=False
        ) as srv,
        srv.client(srv.admin_key) as api,
    ):
        assert api.post("/v1/turns", json=small_turn()).status_code == 201
        for path, extra in (("/v1/quotes", {}), ("/v1/traces", {"max_cost_usd": 10})):
            refused = api.post(
                path,
                json={
                    "turn_id": "t-small-1",
                    "sentence": SMALL_CLAIM,
                    "estimator": "both",
                    "model": "anthropic/claude-sonnet-4-5",
                    **extra,
                },
            )
            assert refused.status_code == 422, refused.text
            problem = refused.json()
            assert problem["field"] == "estimator" and "estimator judged" in problem["fix"]
        ok = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM})
        assert ok.status_code == 201 and ok.json()["scoring"]["can_score"] is False
    assert not scorer.calls


def test_a_trace_by_quote_takes_its_estimator_from_the_quote(api: httpx.Client) -> None:
    quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM}).json()
    refused = api.post("/v1/traces", json={"quote_id": quote["quote_id"], "estimator": "logprob"})
    assert refused.status_code == 422 and refused.json()["field"] == "estimator"


def test_an_expected_digit_trace_reads_the_judges_top_logprobs_over_litellm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = KeyedJudge()

    def reply(request: dict[str, Any]) -> FakeReply:
        text = judge.openai(request)
        if text in ("9", "2"):  # a judge call: 70 % on its digit, 30 % on the next one down
            assert request.get("logprobs") is True and request.get("top_logprobs") == 20
            lower = str(int(text) - 1)
            return FakeReply(text=text, top_logprobs=({text: math.log(0.7), lower: math.log(0.3)},))
        return FakeReply(text=text)

    with FakeOpenAI(reply, api_key="sk-expected") as provider:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-expected")
        monkeypatch.setenv("OPENAI_API_BASE", provider.base_url)
        with InProcessApi(tmp_path, warm_up=False) as srv, srv.client(srv.admin_key, timeout=60) as api:
            assert api.post("/v1/turns", json=small_turn()).status_code == 201
            quote = api.post(
                "/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "estimator": "expected"}
            )
            assert quote.status_code == 201, quote.text
            body = quote.json()
            assert body["estimator"] == "expected" and body["expected_digit"]["offered"] is True
            assert body["planned_calls"] == sum(body["calls"].values())
            done = run(api, {"quote_id": body["quote_id"]})
            result = done["result"]
            answered = provider.answered
    assert result["estimator"] == "expected" and result["verdict"] == "attributed"
    assert result["s_all"] == pytest.approx(9 * 0.7 + 8 * 0.3) and result["s_none"] == pytest.approx(2 * 0.7 + 0.3)
    assert [s["role"] for s in result["sources"] if s["layer"] == "tools"] == ["grounds"]
    # one meter: the job's count, the result's count and the provider's count agree; nothing refused
    assert done["calls"]["made"] == result["calls"]["made"] == answered and result["calls"]["refused"] == 0
