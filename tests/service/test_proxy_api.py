"""``estimator: proxy`` through the whole app: the scripted judge (``llm_factory``) confirms what a
scripted scorer ranked (``scorer_factory``, standing in for the configured scoring endpoint); the quote prices
both sides and reserves the fallback's worst case; without a scorer the quote is a problem naming the field
and the setting."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_server import SMALL_CLAIM, SMALL_KEY, InProcessApi, KeyedJudge, scripted_factory, small_turn

from estimator.results.proxy import CONFIRMED_LINE, FALLBACK_LINE
from estimator.seams.llm import Message
from estimator.seams.scorer import ScriptedScorer

SCORER_BASE = "http://127.0.0.1:9/v1"  # a configured scoring endpoint; the injected scorer stands in for it


def planted(messages: Sequence[Message], target: str) -> float:
    return -70.0 + (40.0 if any(SMALL_KEY in m.content for m in messages) else 0.0)


@pytest.fixture
def scorer() -> ScriptedScorer:
    return ScriptedScorer(planted, model_name="local/proxy-1.5b")


def serve(tmp_path: Path, scorer: ScriptedScorer, judge: KeyedJudge, **settings: Any) -> InProcessApi:
    return InProcessApi(
        tmp_path, llm_factory=scripted_factory(judge), scorer_factory=lambda model: scorer, warm_up=False, **settings
    )


@pytest.fixture
def api(tmp_path: Path, scorer: ScriptedScorer) -> Iterator[httpx.Client]:
    with (
        serve(tmp_path, scorer, KeyedJudge(), scorer_api_base=SCORER_BASE) as srv,
        srv.client(srv.admin_key, timeout=60) as c,
    ):
        assert c.post("/v1/turns", json=small_turn()).status_code == 201
        yield c


def trace(api: httpx.Client, quote_id: str) -> dict[str, Any]:
    started = api.post("/v1/traces", json={"quote_id": quote_id})
    assert started.status_code == 202, started.text
    done: dict[str, Any] = api.get(f"/v1/traces/{started.json()['trace_id']}", params={"wait": "true"}).json()
    assert done["status"] == "succeeded", done
    return done


def test_a_proxy_quote_prices_both_sides_and_reserves_the_worst_case(api: httpx.Client) -> None:
    quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "estimator": "proxy"})
    assert quote.status_code == 201, quote.text
    body = quote.json()
    proxy = body["proxy"]
    assert body["estimator"] == "proxy" and proxy["can_score"] is True and proxy["how"] == "completions-echo"
    assert body["planned_calls"] == proxy["worst_case_calls"] > proxy["confirm_calls"]
    assert body["cost_usd"] == proxy["worst_case_cost_usd"] > proxy["confirm_cost_usd"] > 0
    assert proxy["local_passes"] > 0 and proxy["local_seconds"] > 0
    assert 0 < proxy["local_prompt_tokens"] < proxy["local_prompt_tokens_without_reuse"]
    judged = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM}).json()
    assert "proxy" not in judged or judged["proxy"] is None


def test_a_confirmed_proxy_trace_counts_hosted_calls_as_made_and_local_passes_as_scored(
    api: httpx.Client, scorer: ScriptedScorer
) -> None:
    quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "estimator": "proxy"})
    done = trace(api, quote.json()["quote_id"])
    result = done["result"]
    assert result["estimator"] == "proxy" and result["confirmed"] is True
    assert result["confirmation"] == CONFIRMED_LINE and result["proxy_model"] == "local/proxy-1.5b"
    assert result["calls"]["scored"] == len(scorer.calls) > 0
    assert done["calls"]["made"] == result["calls"]["made"] <= quote.json()["proxy"]["confirm_calls"]
    assert done["calls"]["planned"] == quote.json()["planned_calls"]
    grounds = [s["source_id"] for s in result["sources"] if s["role"] == "grounds"]
    assert grounds == [result["proxy"]["hosted"]["top_source"]]


def test_a_judge_that_disagrees_runs_the_full_search_through_the_api(tmp_path: Path, scorer: ScriptedScorer) -> None:
    """The judge is keyed on the instructions, the proxy on the tool return: they disagree."""
    with (
        serve(tmp_path, scorer, KeyedJudge("Always name the carrier"), scorer_api_base=SCORER_BASE) as srv,
        srv.client(srv.admin_key, timeout=60) as api,
    ):
        assert api.post("/v1/turns", json=small_turn()).status_code == 201
        quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "estimator": "proxy"})
        done = trace(api, quote.json()["quote_id"])
    result = done["result"]
    assert result["confirmed"] is False and result["confirmation"] == FALLBACK_LINE
    assert result["proxy"]["disagreements"] and result["proxy"]["judged_ranking"] is not None
    assert done["calls"]["made"] == result["calls"]["made"] <= done["calls"]["planned"]


def test_without_a_scorer_a_proxy_quote_is_a_problem_naming_the_setting(tmp_path: Path, scorer: ScriptedScorer) -> None:
    with serve(tmp_path, scorer, KeyedJudge()) as srv, srv.client(srv.admin_key, timeout=60) as api:
        assert api.post("/v1/turns", json=small_turn()).status_code == 201
        refused = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "estimator": "proxy"})
        inline = api.post(
            "/v1/traces",
            json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "estimator": "proxy", "max_cost_usd": 1.0},
        )
    for response in (refused, inline):
        assert response.status_code == 422, response.text
        problem = response.json()
        assert problem["field"] == "estimator" and "PROVENANCE_SCORER_API_BASE" in problem["fix"]
        assert "--local-model" in problem["fix"]
