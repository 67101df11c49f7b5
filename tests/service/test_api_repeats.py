"""``repeats`` on the API (``POST /v1/quotes``, ``POST /v1/traces``) and ``--repeats`` on the command line: the
quote prices every sample, a trace takes them (the median its score, the samples in the result), a bad value is
refused naming the field, and the judgement cache answers a repeat of a trace with the same samples but never a
repeat of a measurement with its first sample's answer.

The judge is ``KeyedJudge`` with a wobble: the n-th time one judge prompt is asked it answers 9, 7, 8 (the tool
return shown) or 2, 4, 3 (not shown), so s(1) reads 8 (spread 7–9) and s(0) 3 (spread 2–4) over three samples."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_server import SMALL_CLAIM, SMALL_KEY, InProcessApi, KeyedJudge, small_turn
from support.fake_openai import FakeOpenAI

from estimator.seams.llm import LLMRequest, LLMResponse, Message, ScriptedLLM, Usage
from provenance_api.cli.main import main
from provenance_api.providers.llm_cache import CachingLLM, cache_key
from provenance_api.storage.judgement_cache import SqliteJudgementCache

WOBBLE = (0, 2, 1)


class NoisyJudge(KeyedJudge):
    """``KeyedJudge``, but a judge prompt asked again is answered differently (``WOBBLE``), as a hosted judge
    may; ``asked`` counts the calls of each judge prompt that reached it."""

    def __init__(self) -> None:
        super().__init__(SMALL_KEY)
        self.asked: Counter[str] = Counter()

    def answer(self, system: str, user: str) -> str:
        said = super().answer(system, user)
        if "strict judge of support" not in system:
            return said  # a span check: as KeyedJudge
        n = self.asked[user]
        self.asked[user] += 1
        wobble = WOBBLE[n % len(WOBBLE)]
        return str(int(said) - wobble if said == "9" else int(said) + wobble)

    def scripted(self, request: LLMRequest) -> LLMResponse:
        text = self.answer(*self._split([{"role": m.role, "content": m.content} for m in request.messages]))
        return LLMResponse(text=text, usage=Usage(100, 1))


@pytest.fixture
def noisy() -> NoisyJudge:
    return NoisyJudge()


@pytest.fixture
def api(tmp_path: Path, noisy: NoisyJudge) -> Iterator[httpx.Client]:
    store = SqliteJudgementCache(tmp_path / "noisy-judgements.db", 600)

    def judge(model: str, api_base: str | None) -> CachingLLM:  # the service's judge: behind the judgement cache
        return CachingLLM(ScriptedLLM(noisy.scripted, model=model), store)

    with InProcessApi(tmp_path, llm_factory=judge, warm_up=False) as srv, srv.client(srv.admin_key) as client:
        assert client.post("/v1/turns", json=small_turn()).status_code == 201
        yield client


def quote(api: httpx.Client, **body: Any) -> dict[str, Any]:
    made = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, **body})
    assert made.status_code == 201, made.text
    out: dict[str, Any] = made.json()
    return out


def trace(api: httpx.Client, **body: Any) -> dict[str, Any]:
    started = api.post(
        "/v1/traces", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "max_cost_usd": 5.0, **body}
    )
    assert started.status_code == 202, started.text
    done: dict[str, Any] = api.get(f"/v1/traces/{started.json()['trace_id']}", params={"wait": "true"}).json()
    assert done["status"] == "succeeded", done
    return done


def test_the_quote_prices_every_sample(api: httpx.Client) -> None:
    one, three = quote(api), quote(api, repeats=3)
    spans = one["calls"]["spans"]
    assert three["calls"]["spans"] == spans  # span checks are made once
    assert three["planned_calls"] - spans == 3 * (one["planned_calls"] - spans)
    assert three["calls"]["repeats"] == 3 and "repeats" not in one["calls"]
    assert three["input_tokens"] > one["input_tokens"] and three["cost_usd"] > one["cost_usd"]
    assert quote(api, params={"repeats": 3})["planned_calls"] == three["planned_calls"]  # the same parameter


@pytest.mark.parametrize(
    "body",
    [{"repeats": 0}, {"repeats": 10}, {"repeats": "three"}, {"repeats": 3, "params": {"repeats": 2}}],
)
def test_a_bad_repeats_is_refused_naming_the_field(api: httpx.Client, body: dict[str, Any]) -> None:
    refused = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, **body})
    assert refused.status_code == 422 and refused.json()["field"] in ("repeats", "body.repeats"), refused.text
    started = api.post(
        "/v1/traces", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "max_cost_usd": 5.0, **body}
    )
    assert started.status_code == 422 and started.json()["field"] in ("repeats", "body.repeats"), started.text


def test_a_trace_by_quote_id_takes_repeats_from_its_quote(api: httpx.Client) -> None:
    quoted = quote(api, repeats=2)
    again = api.post("/v1/traces", json={"quote_id": quoted["quote_id"], "repeats": 3})
    assert again.status_code == 422 and again.json()["field"] == "repeats"
    result = api.post("/v1/traces", json={"quote_id": quoted["quote_id"]})
    assert result.status_code == 202
    done = api.get(f"/v1/traces/{result.json()['trace_id']}", params={"wait": "true"}).json()
    assert done["result"]["repeats"] == 2 and done["result"]["params"]["repeats"] == 2


def test_a_trace_takes_every_sample_and_the_cache_repeats_the_trace_not_the_sample(
    api: httpx.Client, noisy: NoisyJudge
) -> None:
    planned = quote(api, repeats=3)["planned_calls"]
    first = trace(api, repeats=3)
    result = first["result"]
    assert (result["repeats"], result["params"]["repeats"]) == (3, 3)
    assert (result["s_all"], result["s_none"], result["gamma"]) == (8.0, 3.0, 5.0)  # medians of 9,7,8 and 2,4,3
    assert sorted(result["s_all_spread"]["samples"]) == [7.0, 8.0, 9.0]
    assert (result["s_all_spread"]["low"], result["s_all_spread"]["high"]) == (7.0, 9.0)
    assert sorted(result["s_none_spread"]["samples"]) == [2.0, 3.0, 4.0]
    tools = next(x for x in result["layers"] if x["layer"] == "tools")
    assert tools["delta"] == 5.0 and sorted(tools["spread"]["samples"]) == [2.0, 3.0, 4.0]
    assert "3 times" in result["sampling"]
    # three real calls of every judge prompt: the cache answered none of the repeats with the first answer
    assert set(noisy.asked.values()) == {3} and first["calls"]["cached"] == 0
    assert first["calls"]["made"] <= first["calls"]["planned"] == planned

    second = trace(api, repeats=3)  # the same trace again: the same three samples, from the cache
    assert set(noisy.asked.values()) == {3}  # no judge prompt reached the judge again
    assert second["calls"]["made"] == 0 and second["calls"]["cached"] == first["calls"]["made"]
    assert second["result"]["s_all_spread"]["samples"] == result["s_all_spread"]["samples"]
    assert second["result"]["s_all"] == 8.0


def test_one_sample_says_its_spread_is_unknown(api: httpx.Client, noisy: NoisyJudge) -> None:
    result = trace(api)["result"]
    assert result["repeats"] == 1 and "single sample" in result["sampling"] and "unknown" in result["sampling"]
    assert "s_all_spread" not in result and all("spread" not in s for s in result["sources"])
    assert set(noisy.asked.values()) == {1}


def test_the_cache_key_holds_the_sample_and_the_first_sample_keeps_its_old_key() -> None:
    request = LLMRequest(messages=(Message("system", "judge"), Message("user", "claim")), purpose="judge")
    keys = [cache_key("m", None, LLMRequest(messages=request.messages, purpose="judge", sample=i)) for i in range(3)]
    assert len(set(keys)) == 3 and keys[0] == cache_key("m", None, request)


# --------------------------------------------------------------------------- the command line


@pytest.fixture
def turn_file(tmp_path: Path) -> str:
    path = tmp_path / "turn.json"
    path.write_text(json.dumps(small_turn()), encoding="utf-8")
    return str(path)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_quote_prices_repeats_and_refuses_a_bad_value(
    capsys: pytest.CaptureFixture[str], turn_file: str
) -> None:
    _, out, _ = cli(capsys, "quote", turn_file, SMALL_CLAIM, "--json")
    one = json.loads(out)
    _, out, _ = cli(capsys, "quote", turn_file, SMALL_CLAIM, "--repeats", "3", "--json")
    three = json.loads(out)
    spans = one["calls"]["spans"]
    assert three["planned_calls"] - spans == 3 * (one["planned_calls"] - spans) and three["calls"]["repeats"] == 3
    code, out, _ = cli(capsys, "quote", turn_file, SMALL_CLAIM, "--repeats", "3")
    assert code == 0 and "repeats 3: each measurement 3 times" in out
    assert f"up to {three['planned_calls']} planned" in out
    for bad in ("0", "10"):
        code, _, err = cli(capsys, "quote", turn_file, SMALL_CLAIM, "--repeats", bad)
        assert code == 2 and "--repeats" in err and "1 to 9" in err


def test_the_cli_trace_takes_every_sample_and_prints_the_spread(
    capsys: pytest.CaptureFixture[str], turn_file: str, noisy: NoisyJudge
) -> None:
    argv = ("trace", turn_file, SMALL_CLAIM, "--model", "openai/fake", "--api-key", "test-key", "--yes")
    with FakeOpenAI(noisy.openai) as srv:
        code, out, err = cli(capsys, *argv, "--api-base", srv.base_url, "--repeats", "3", "--json")
        assert code == 0, err
        result = json.loads(out)
        assert (result["repeats"], result["s_all"], result["s_none"]) == (3, 8.0, 3.0)
        assert sorted(result["s_all_spread"]["samples"]) == [7.0, 8.0, 9.0]
        assert result["calls"]["made"] == srv.answered <= result["calls"]["planned"]
        assert set(noisy.asked.values()) == {3}  # the CLI's judgement cache collapsed no repeat
        code, out, err = cli(capsys, *argv, "--api-base", srv.base_url, "--repeats", "3")  # answered from the cache
    assert code == 0, err
    assert set(noisy.asked.values()) == {3}
    assert "s(1) = 8.00 · spread 7.00–9.00" in out and "s(0) = 3.00 · spread 2.00–4.00" in out
    assert "Sampling: Each measurement was taken 3 times (repeats=3)" in out
    assert "without it 3.00 · spread 2.00–4.00" in out  # the tool layer and its source
    assert "spread" in out.split("What these mean", 1)[1]  # the term is explained
