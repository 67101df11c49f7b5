"""One trace through the service against a real instruction-tuned model behind llama.cpp's
OpenAI-compatible server on loopback. The model is a weak judge, so nothing here asserts which
source wins; only what must hold for any model: quotes verify and lie in their line spans, calls
stay within the plan, the verdict and roles follow from Γ and the drops by the thresholds, a
downgraded support is silent, and the server's structured-output quirks are handled."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from support.api_server import ApiServer, small_turn
from support.local_model import llama_server

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.params import DEFAULT_PARAMS
from estimator.spans.verify import verify_quote
from provenance_api.providers import free_tier

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(1800)]

MODEL = "openai/local"


def _verdict(gamma: float | None, layers: list[dict[str, Any]]) -> str:
    if gamma is None or math.isnan(gamma):
        return "no_information"
    if gamma < DEFAULT_PARAMS.tau_gamma:
        return "internal_knowledge"
    contributing = [x for x in layers if abs(x["delta"]) >= DEFAULT_PARAMS.tau]
    return "attributed" if contributing else "redundant"


def _role(delta: float) -> str:
    if delta >= DEFAULT_PARAMS.tau:
        return "grounds"
    return "distractor" if delta <= -DEFAULT_PARAMS.tau else "irrelevant"


def test_a_trace_through_the_service_on_a_real_model_keeps_every_guarantee(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    turn_json = small_turn("t-local-1", model=MODEL)
    with llama_server(small=True) as base_url:
        monkeypatch.setenv("OPENAI_API_KEY", "local-no-key")
        monkeypatch.setenv("OPENAI_API_BASE", base_url)
        # the operator allows its self-hosted model, priced at nothing
        policy: dict[str, Any] = {
            "allowed_models": [MODEL],
            "model_prices": {MODEL: {"input_per_mtok": 0, "output_per_mtok": 0}},
        }
        with ApiServer(tmp_path, warm_up=False, **policy) as srv, srv.client(srv.admin_key, timeout=1500) as api:
            assert api.post("/v1/turns", json=turn_json).status_code == 201
            quote = api.post("/v1/quotes", json={"turn_id": "t-local-1", "sentence": "r0", "model": MODEL})
            assert quote.status_code == 201, quote.text
            planned = quote.json()["planned_calls"]
            started = api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
            assert started.status_code == 202, started.text
            # ?wait=true returns after the service's wait cap; a CPU model may need several of them
            done = api.get(started.headers["location"], params={"wait": "true"}).json()
            for _ in range(40):
                if done["status"] not in ("queued", "running"):
                    break
                done = api.get(started.headers["location"], params={"wait": "true"}).json()

    assert done["status"] == "succeeded", done
    result = done["result"]
    assert result["calls"]["made"] <= result["calls"]["planned"] == planned

    # the verdict and the roles follow from Γ and the drops by the thresholds
    assert result["verdict"] == _verdict(result["gamma"], result["layers"])
    for layer in result["layers"]:
        assert layer["role"] == _role(layer["delta"])
    for source in result["sources"]:
        if source["delta"] is not None:
            assert source["role"] == _role(source["delta"])

    # every returned quote verifies against its source and lies within its line span
    corpus = build_corpus(StoredTurn.model_validate(turn_json), tokenizer=free_tier.tokenizer())
    parsed = 0
    for source in result["sources"]:
        support = source["support"]
        if support is None:
            continue
        if support["downgraded"]:
            assert support["verdict"] == "silent" and support["confidence"] <= 0.3
        if not support.get("no_information"):
            parsed += 1  # the server's json_schema 500 and fenced JSON were coped with
        if support["quote"]:
            unit = corpus.by_id(source["source_id"])
            check = verify_quote(support["quote"], unit.text)
            assert check.verified, (support["quote"], unit.text)
            assert (support["line_start"], support["line_end"]) == (check.line_start, check.line_end)
            window = "\n".join(unit.lines[check.line_start - 1 : check.line_end])  # type: ignore[operator]
            assert verify_quote(support["quote"], window).verified
    assert parsed >= 1
