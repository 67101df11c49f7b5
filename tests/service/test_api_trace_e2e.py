"""A trace end to end over HTTP: quote → trace → events → result, with the service's own judge
(LiteLLMClient, configured the litellm way through OPENAI_API_KEY / OPENAI_API_BASE) talking to a
local OpenAI-compatible server that runs a scripted judge. The result must equal the estimator's
result for the same inputs with ScriptedLLM running the same script."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support.api_server import TEST_PRICES, InProcessApi, KeyedJudge, load_fixture, small_turn
from support.fake_openai import FakeOpenAI, FakeReply

from estimator.corpus.turn import StoredTurn
from estimator.loo.judged import trace_claim
from estimator.params import DEFAULT_PARAMS
from estimator.seams.llm import ScriptedLLM
from provenance_api.providers import free_tier

EO = load_fixture("eo_worldview_turn.json")
CLAIM = "Layer: MODIS Annual Land Cover Type (IGBP classification)."
JUDGE_MODEL = "openai/fake-judge"
PROVIDER_KEY = "sk-e2e-provider-key-0123456789"


def expected_result(judge: KeyedJudge) -> dict[str, Any]:
    turn = StoredTurn.model_validate(EO)
    corpus = free_tier.corpus_for(turn)
    llm = ScriptedLLM(judge.scripted, model=JUDGE_MODEL)
    result = asyncio.run(
        trace_claim(llm, CLAIM, turn.effective_query(), corpus, params=DEFAULT_PARAMS, tokenizer=free_tier.tokenizer())
    )
    out: dict[str, Any] = result.to_dict()
    return out


def read_events(lines: list[str]) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    name = ""
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
    return events


def test_quote_trace_events_result_through_litellm_and_a_local_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = KeyedJudge("MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual")
    with FakeOpenAI(lambda req: FakeReply(text=judge.openai(req), delay=0.03), api_key=PROVIDER_KEY) as provider:
        monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
        monkeypatch.setenv("OPENAI_API_BASE", provider.base_url)
        with InProcessApi(tmp_path, warm_up=False) as srv, srv.client(srv.admin_key, timeout=120) as api:
            assert api.post("/v1/turns", json=EO).status_code == 201
            quote = api.post("/v1/quotes", json={"turn_id": EO["turn_id"], "sentence": CLAIM, "model": JUDGE_MODEL})
            # 15 sources (the prompt split into its rules): (3+2) + (12+2) + 2·12 = 43, and the redundancy that fits
            # under MAX_CALLS (the paper's 31 + 8 are counted on the prompt kept whole: tests/method/test_cost.py)
            assert quote.status_code == 201 and quote.json()["planned_calls"] == 43 + 5
            started = api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
            assert started.status_code == 202
            trace_id = started.json()["trace_id"]

            with api.stream("GET", f"/v1/traces/{trace_id}/events") as stream:
                events = read_events(list(stream.iter_lines()))
            done = api.get(f"/v1/traces/{trace_id}").json()

    assert done["status"] == "succeeded", done
    # the stream: progress as calls complete, partial layer scores before the end, then `end`
    progress = [data for kind, data in events if kind == "progress"]
    assert events[-1] == (
        "end",
        {"trace_id": trace_id, "status": "succeeded", "reason": None, "calls": done["calls"]},
    )
    assert len(progress) >= 3
    done_counts = [p["calls"]["made"] for p in progress]
    assert done_counts == sorted(done_counts) and done_counts[-1] == done["calls"]["made"]
    assert all(p["calls"]["planned"] == 48 for p in progress)
    assert any(p["layer_scores"] and p["status"] == "running" for p in progress)
    # The stream sends the job's latest snapshot whenever it changes, so a round that starts and ends between
    # two reads (a busy machine) may not appear; what appears is a real round, at least one of them ablation.
    rounds = {p["round"] for p in progress}
    assert rounds & {"round1", "round2", "redundancy"}
    assert rounds <= {"round1", "round2", "redundancy", "spans", None}

    # the result equals the estimator's own, for the same inputs and the same script, plus the
    # declared-attribution audit of the sentence (it credits no source; the tool return grounds it)
    declared = done["result"].pop("declared")
    cost = done["result"].pop("cost_usd")
    expected = expected_result(judge)
    assert expected.pop("cost_usd") is None  # the in-process script has no price
    assert done["result"] == expected
    # the service prices the same tokens at the operator's price for the test judge (TEST_PRICES)
    price, usage = TEST_PRICES["openai/fake-judge"], done["result"]["usage"]
    priced = (usage["input_tokens"] * price["input_per_mtok"] + usage["output_tokens"] * price["output_per_mtok"]) / 1e6
    assert cost == pytest.approx(priced) and cost > 0
    assert declared["outcome"] == "none_declared" and declared["grounding"]

    # every judge call crossed HTTP to the provider, authenticated, and was billed once
    assert provider.answered == done["calls"]["billed"] == done["calls"]["made"] == done["result"]["calls"]["made"]
    assert all(r.headers.get("authorization") == f"Bearer {PROVIDER_KEY}" for r in provider.records)
    assert {body["model"] for body in provider.requests} == {"fake-judge"}


def test_a_trace_whose_every_call_fails_is_failed_and_never_repeats_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "sk-wrong-key-that-must-never-be-shown-0000"
    with FakeOpenAI(KeyedJudge().openai, api_key=PROVIDER_KEY) as provider:  # answers 401 echoing the key sent
        monkeypatch.setenv("OPENAI_API_KEY", wrong)
        monkeypatch.setenv("OPENAI_API_BASE", provider.base_url)
        with InProcessApi(tmp_path, warm_up=False) as srv, srv.client(srv.admin_key, timeout=120) as api:
            api.post("/v1/turns", json=small_turn())
            quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0", "model": JUDGE_MODEL})
            started = api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
            done = api.get(started.headers["location"], params={"wait": "true"}).json()
            with api.stream("GET", f"{started.headers['location']}/events") as stream:
                events = read_events(list(stream.iter_lines()))
    assert done["status"] == "failed" and done["result"] is None
    assert done["reason"].startswith("every model call failed") and done["calls"]["billed"] == 0
    assert done["calls"]["made"] > 0 and provider.answered == 0
    assert events[-1][1]["status"] == "failed"
    assert wrong not in json.dumps(done) and wrong not in json.dumps(events)
