"""Each model call of a trace, inspectable: the estimator's ledger records every call (stage, mask in words,
messages as sent, reply, parsed scalar, timing, usage, outcome), and the service keeps them with the trace and
serves them at ``GET /v1/traces/{trace_id}/calls`` — through the real server, with litellm talking to a local
OpenAI-compatible server that runs a scripted judge."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from support.api_server import TEST_PRICES, ApiServer, InProcessApi, KeyedJudge, small_turn
from support.fake_openai import FakeOpenAI, FakeReply
from support.services import DbBackend
from test_attribution import CLAIM, QUERY, SILENT, make_corpus, script, shown

from estimator.corpus.units import Corpus
from estimator.ledger import CallLedger, CallRecord, labelled
from estimator.loo.expected_digit import expected_digit
from estimator.loo.judged import trace_claim
from estimator.loo.logprob import trace_logprob
from estimator.loo.rounds import mask_words
from estimator.seams.llm import LLMError, LLMRequest, LLMResponse, Message, ScriptedLLM
from estimator.seams.scorer import ScriptedScorer
from provenance_api.storage import crud_calls
from provenance_api.storage.models import ModelCallRow
from provenance_api.storage.session import Database

JUDGE_STAGES = {"gamma", "round1", "round2", "redundancy"}
PROVIDER_KEY = "sk-calls-provider-key-0123456789"


# --------------------------------------------------------------------------- the estimator's records


def either_of_s0_s1(sources: dict[str, str]) -> str:
    return "9" if "s0" in sources or "s1" in sources else "2"  # two tool returns each carry the claim


def removed(record: CallRecord, corpus: Corpus) -> frozenset[str]:
    """The sources a judge prompt left out, read from the prompt itself."""
    present = shown(LLMRequest(messages=record.messages))
    return frozenset(u.id for u in corpus.units) - frozenset(present)


async def test_a_judged_trace_records_each_call_with_its_stage_mask_and_digit() -> None:
    corpus = make_corpus(["claim carried here", "claim carried here too", "a bounding box"])
    ledger = CallLedger(planned=48, concurrency=4)
    result = await trace_claim(ScriptedLLM(script(either_of_s0_s1)), CLAIM, QUERY, corpus, ledger=ledger)
    records = ledger.calls()
    assert len(records) == result.calls.made + result.calls.cached > 0
    assert [r.index for r in records] == list(range(len(records)))
    assert {r.stage for r in records} == JUDGE_STAGES | {"spans"}
    for record in records:
        assert record.outcome == "answered" and record.kind == "chat" and record.seconds >= 0
        if record.stage == "spans":
            assert re.fullmatch(r"span check of s\d+", record.mask) and record.parsed is None
            assert record.reply == SILENT
            continue
        gone = removed(record, corpus)
        assert record.mask == mask_words(gone, corpus)  # the words name what the prompt really left out
        assert record.parsed == float(either_of_s0_s1(shown(LLMRequest(messages=record.messages))))
        assert record.reply == str(int(record.parsed))
        assert (record.stage == "gamma") == (record.mask in ("all sources", "no sources"))
    masks = {r.mask: r.stage for r in records}
    assert masks["without layer tools"] == "round1" and masks["without s1"] == "round2"
    assert masks["only s0 of tools"] == "redundancy"  # kept alone, the other layers intact


async def test_an_expected_digit_trace_records_the_expected_digit() -> None:
    corpus = make_corpus(["unrelated", "claim carried here"])
    high = [{"7": math.log(0.5), "9": math.log(0.5)}]
    low = [{"2": 0.0}]

    def judge(request: LLMRequest) -> LLMResponse:
        if request.purpose != "judge":
            return LLMResponse(text=SILENT)
        top = high if "s1" in shown(request) else low
        return LLMResponse(text=next(iter(top[0])), top_logprobs=top)

    ledger = CallLedger(planned=48, concurrency=4)
    await trace_claim(ScriptedLLM(judge), CLAIM, QUERY, corpus, expected=True, ledger=ledger)
    judged = [r for r in ledger.calls() if r.stage in JUDGE_STAGES]
    assert judged and {r.parsed for r in judged} == {expected_digit(high), expected_digit(low)} == {8.0, 2.0}
    for record in judged:
        assert record.parsed == (8.0 if "s1" in shown(LLMRequest(messages=record.messages)) else 2.0)


async def test_a_logprob_trace_records_scoring_calls_with_their_log_probability() -> None:
    corpus = make_corpus(["unrelated", "claim carried here"])

    def score(messages: Sequence[Message], target: str) -> float:
        return -30.0 + (25.0 if "[s1] " in messages[-1].content else 0.0) - 0.5 * len(messages)

    ledger = CallLedger(planned=48, concurrency=4)
    result = await trace_logprob(
        ScriptedScorer(score), ScriptedLLM(lambda r: SILENT), CLAIM, QUERY, corpus, ledger=ledger
    )
    records = ledger.calls()
    assert len(records) == result.calls.made
    scored = [r for r in records if r.kind == "score"]
    assert scored and {r.stage for r in scored} <= JUDGE_STAGES and "all sources" in {r.mask for r in scored}
    for record in scored:
        assert record.parsed == score(record.messages, CLAIM) and record.reply is None
        assert record.prompt[-1] == Message("assistant", CLAIM) and record.prompt[:-1] == record.messages
    assert {r.stage for r in records if r.kind == "chat"} == {"spans"}


async def test_failed_refused_and_cached_calls_are_recorded_beside_the_counts() -> None:
    def answer(request: LLMRequest) -> LLMResponse:
        if request.purpose == "probe":
            raise LLMError("HTTP 500 from the provider", billed=True)
        return LLMResponse(text="7", cached=request.purpose == "support")

    ledger = CallLedger(planned=2, concurrency=1)
    llm = ScriptedLLM(answer)
    ask = LLMRequest(messages=(Message("user", "judge this"),), purpose="judge")
    with labelled("round1", "without layer tools"):
        assert (await ledger.call(llm, ask, parse=lambda r: float(r.text))).text == "7"
    await ledger.call(llm, LLMRequest(messages=ask.messages, purpose="support"), stage="spans", mask="span check")
    with pytest.raises(LLMError):
        await ledger.call(llm, LLMRequest(messages=ask.messages, purpose="probe"))
    with pytest.raises(LLMError):  # the plan allowed 2 calls sent: refused before it is sent
        await ledger.call(llm, ask)
    first, cached, failed, refused = ledger.calls()
    assert (first.stage, first.mask, first.parsed, first.outcome) == ("round1", "without layer tools", 7.0, "answered")
    assert (cached.stage, cached.outcome, cached.parsed) == ("spans", "cached", None)
    assert failed.outcome == "failed_billed" and failed.error == "HTTP 500 from the provider"
    assert failed.reply is None and failed.stage == "other"
    assert refused.outcome == "refused" and "plan allows 2" in (refused.error or "")
    # the counts are the ledger's own, unchanged by the records
    assert (ledger.made, ledger.cached, ledger.failed, ledger.refused, ledger.billed) == (2, 1, 1, 1, 2)


def test_a_prompt_over_the_cap_keeps_short_messages_whole_and_cuts_the_long_one() -> None:
    messages = [("system", "be strict"), ("user", "A" * 10_000 + "B" * 10_000)]
    kept, cut = crud_calls.cap_prompt(messages, cap=4_000)
    assert cut and kept[0] == ("system", "be strict")
    user = kept[1][1]
    assert len(user) <= 4_000 and user.startswith("A") and user.endswith("B")
    assert "characters not kept" in user
    assert crud_calls.cap_prompt(messages, cap=30_000) == (messages, False)


# --------------------------------------------------------------------------- through the service


class Provider:
    """The local OpenAI-compatible server running the keyed judge, and the service judging through it."""

    def __init__(self, srv: InProcessApi, fake: FakeOpenAI, judge: KeyedJudge) -> None:
        self.srv, self.fake, self.judge = srv, fake, judge
        self.api = srv.client(srv.admin_key, timeout=120)

    def trace(self, turn_id: str, sentence: str = "r0") -> dict[str, Any]:
        quote = self.api.post(
            "/v1/quotes", json={"turn_id": turn_id, "sentence": sentence, "model": "openai/fake-judge"}
        )
        assert quote.status_code == 201, quote.text
        started = self.api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
        assert started.status_code == 202, started.text
        done: dict[str, Any] = self.api.get(started.headers["location"], params={"wait": "true"}).json()
        return done

    def calls(self, trace_id: str) -> dict[str, Any]:
        got = self.api.get(f"/v1/traces/{trace_id}/calls")
        assert got.status_code == 200, got.text
        body: dict[str, Any] = got.json()
        return body


def kept_rows(srv: InProcessApi, trace_ids: list[str]) -> int:
    """Rows of ``model_calls`` for these traces, read from the service's database itself."""

    async def work() -> int:
        db = Database(srv.settings.effective_database_url)
        try:
            async with db.session() as session:
                query = select(func.count()).select_from(ModelCallRow).where(ModelCallRow.trace_id.in_(trace_ids))
                return int((await session.execute(query)).scalar_one())
        finally:
            await db.dispose()

    return asyncio.run(work())


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory, db_backend: DbBackend) -> Iterator[Provider]:
    judge = KeyedJudge()
    with (
        FakeOpenAI(judge.openai, api_key=PROVIDER_KEY) as fake,
        InProcessApi(
            tmp_path_factory.mktemp("calls"),
            warm_up=False,
            database_url=db_backend.fresh_url(),
            judge_api_base=fake.base_url,
            judge_api_key=PROVIDER_KEY,
        ) as srv,
    ):
        provider = Provider(srv, fake, judge)
        try:
            assert provider.api.post("/v1/turns", json=small_turn()).status_code == 201
            yield provider
        finally:
            provider.api.close()


SMALL_HEADERS = {"s0": "[s0] lookup_order(order_id=A-1)\n", "s1": "[s1] agent instructions (system prompt)\n"}
"""The header line of each source's fenced block in the small turn's judge prompts."""


def test_each_call_is_kept_as_the_provider_received_it_with_the_digit_it_read(provider: Provider) -> None:
    before = len(provider.fake.requests)
    done = provider.trace("t-small-1")
    assert done["status"] == "succeeded", done
    account = done["result"]["calls"]
    out = provider.calls(done["trace_id"])
    calls = out["calls"]
    assert out["trace_id"] == done["trace_id"]
    assert out["total"] == out["kept"] == len(calls) == account["made"] + account["cached"] + account["refused"]
    assert [c["index"] for c in calls] == list(range(len(calls)))
    # the prompts kept are the messages the provider received, call for call
    sent = Counter(json.dumps(r["messages"]) for r in provider.fake.requests[before:])
    assert Counter(json.dumps(c["prompt"]) for c in calls) == sent
    headers = SMALL_HEADERS
    judged = [c for c in calls if c["stage"] in JUDGE_STAGES]
    assert {c["mask"] for c in judged} == {
        "all sources",
        "no sources",
        "without layer tools",
        "without layer instructions",
    }
    for call in judged:
        system, user = call["prompt"][0]["content"], call["prompt"][1]["content"]
        gone = {
            "all sources": set(),
            "no sources": {"s0", "s1"},
            "without layer tools": {"s0"},
            "without layer instructions": {"s1"},
        }[call["mask"]]
        assert all((headers[s] in user) == (s not in gone) for s in headers), call["mask"]
        assert call["reply"] == provider.judge.answer(system, user)
        assert call["parsed"] == float(call["reply"])
    spans = [c for c in calls if c["stage"] == "spans"]
    assert {c["mask"] for c in spans} == {"span check of s0", "span check of s1"}
    assert all(c["parsed"] is None and json.loads(c["reply"])["verdict"] for c in spans)
    price = TEST_PRICES["openai/fake-judge"]
    for call in calls:
        assert call["outcome"] == "answered" and call["error"] is None and not call["prompt_truncated"]
        assert call["input_tokens"] > 0 and call["output_tokens"] > 0 and call["seconds"] >= 0
        assert call["cost_usd"] == pytest.approx(
            (call["input_tokens"] * price["input_per_mtok"] + call["output_tokens"] * price["output_per_mtok"]) / 1e6
        )


def test_a_repeated_trace_shows_its_cached_calls_at_no_cost(provider: Provider) -> None:
    first = provider.trace("t-small-1")
    sent = len(provider.fake.requests)
    again = provider.trace("t-small-1")  # the same prompts: the judgement cache answers every call
    assert again["status"] == "succeeded" and len(provider.fake.requests) == sent
    account = again["result"]["calls"]
    calls = provider.calls(again["trace_id"])["calls"]
    assert account["made"] == 0 and len(calls) == account["cached"] > 0
    assert all(c["outcome"] == "cached" and c["cost_usd"] == 0 for c in calls)
    replies = {json.dumps(c["prompt"]): c["reply"] for c in provider.calls(first["trace_id"])["calls"]}
    assert all(replies[json.dumps(c["prompt"])] == c["reply"] for c in calls)  # the answer it was cached from
    assert [c["parsed"] for c in calls if c["stage"] in JUDGE_STAGES]  # read from the cached answers too


def test_another_tenant_cannot_see_the_calls(provider: Provider) -> None:
    done = provider.trace("t-small-1")
    with provider.srv.client(provider.srv.key("tenant-b", "bob")) as other:
        hidden = other.get(f"/v1/traces/{done['trace_id']}/calls")
        assert hidden.status_code == 404 and hidden.headers["content-type"].startswith("application/problem+json")
    assert provider.api.get("/v1/traces/tr_nosuchtrace/calls").status_code == 404
    assert len(provider.calls(done["trace_id"])["calls"]) > 0


def test_a_huge_prompt_is_kept_truncated(provider: Provider) -> None:
    big = "Order A-1 left the warehouse. " + " ".join(f"crate{i} weighed {i % 97} kg" for i in range(700))
    turn = small_turn(
        "t-big",
        response_payload={
            "tool_calls": [{"name": f"lookup_{i}", "arguments": {"n": i}, "response": big} for i in range(8)]
        },
    )
    assert provider.api.post("/v1/turns", json=turn).status_code == 201
    done = provider.trace("t-big")
    assert done["status"] == "succeeded", done
    calls = provider.calls(done["trace_id"])["calls"]
    cut = [c for c in calls if c["prompt_truncated"]]
    whole = next(c for c in calls if c["mask"] == "all sources")
    assert whole in cut and any(c["mask"] == "no sources" and not c["prompt_truncated"] for c in calls)
    assert sum(len(m["content"]) for m in whole["prompt"]) <= crud_calls.PROMPT_CAP_CHARS
    assert "characters not kept" in whole["prompt"][1]["content"]
    sent = [r["messages"] for r in provider.fake.requests if "[s7] lookup_7" in json.dumps(r["messages"])]
    assert whole["prompt"][0] in [m[0] for m in sent]  # the short system message is kept whole


def test_the_per_trace_cap_keeps_the_first_calls_and_says_how_many_there_were(
    provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(crud_calls, "MAX_CALLS_KEPT", 3)  # the server runs in this process
    done = provider.trace("t-small-1")
    out = provider.calls(done["trace_id"])
    account = done["result"]["calls"]
    assert out["kept"] == len(out["calls"]) == 3 < out["total"] == account["made"] + account["cached"]
    assert [c["index"] for c in out["calls"]] == [0, 1, 2]


def test_deleting_the_turn_deletes_its_calls(provider: Provider) -> None:
    assert provider.api.post("/v1/turns", json=small_turn("t-gone")).status_code == 201
    gone = [provider.trace("t-gone")["trace_id"], provider.trace("t-gone")["trace_id"]]
    kept = provider.trace("t-small-1")["trace_id"]
    assert kept_rows(provider.srv, gone) > 0 and kept_rows(provider.srv, [kept]) > 0
    assert provider.api.delete("/v1/turns/t-gone").status_code in (200, 204)
    assert kept_rows(provider.srv, gone) == 0
    assert kept_rows(provider.srv, [kept]) == len(provider.calls(kept)["calls"]) > 0
    assert provider.api.get(f"/v1/traces/{gone[0]}/calls").status_code == 404


def test_a_failed_trace_keeps_its_failed_calls_without_the_server_address(tmp_path: Path) -> None:
    where: dict[str, str] = {}

    def refuse(request: dict[str, Any]) -> FakeReply:
        return FakeReply.error(400, f"model fake-judge is not served at {where['base']}/chat/completions")

    with (
        FakeOpenAI(refuse, api_key=PROVIDER_KEY) as fake,
        InProcessApi(
            tmp_path, warm_up=False, judge_api_base=fake.base_url, judge_api_key=PROVIDER_KEY, judgement_cache=False
        ) as srv,
        srv.client(srv.admin_key, timeout=120) as api,
    ):
        where["base"] = fake.base_url
        api.post("/v1/turns", json=small_turn())
        quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0", "model": "openai/fake-judge"})
        started = api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
        done = api.get(started.headers["location"], params={"wait": "true"}).json()
        out = api.get(f"/v1/traces/{done['trace_id']}/calls").json()
        address = httpx.URL(fake.base_url).netloc.decode()
    assert done["status"] == "failed" and done["calls"]["made"] > 0
    calls = out["calls"]
    assert len(calls) == out["total"] == done["calls"]["made"] == len(fake.requests)
    for call in calls:
        assert call["outcome"] == "failed" and call["reply"] is None and call["parsed"] is None
        assert "not served at [provider]" in call["error"] and call["cost_usd"] == 0
    assert address not in json.dumps(out) and "127.0.0.1" not in json.dumps(out)


def test_an_interrupted_trace_keeps_its_calls_and_the_one_in_flight_as_failed(tmp_path: Path) -> None:
    judge = KeyedJudge()

    def answer(request: dict[str, Any]) -> str | FakeReply:
        user = json.dumps(request["messages"][1:])
        if (
            "strict judge of support" in json.dumps(request["messages"][:1])
            and "[s0]" not in user
            and "[s1]" not in user
        ):
            return FakeReply(delay=120, until_hangup=True)  # s(0) never answers: the service stops first
        return judge.openai(request)

    settings: dict[str, Any] = {"warm_up": False, "judgement_cache": False, "judge_api_key": PROVIDER_KEY}
    with FakeOpenAI(answer, api_key=PROVIDER_KEY) as fake:
        with (
            ApiServer(tmp_path, judge_api_base=fake.base_url, **settings) as srv,
            srv.client(srv.admin_key, timeout=120) as api,
        ):
            api.post("/v1/turns", json=small_turn())
            quote = api.post(
                "/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0", "model": "openai/fake-judge"}
            ).json()
            trace_id = api.post("/v1/traces", json={"quote_id": quote["quote_id"]}).json()["trace_id"]
            for _ in range(600):  # until every call but the held one is answered (at most a minute)
                if fake.answered == 5 and len(fake.requests) == 6:
                    break
                api.get(f"/v1/traces/{trace_id}", params={"wait": "true", "timeout": 0.1})
            assert (fake.answered, len(fake.requests)) == (5, 6)
        with ApiServer(tmp_path, judge_api_base=fake.base_url, **settings) as srv, srv.client(srv.admin_key) as api:
            done = api.get(f"/v1/traces/{trace_id}").json()
            out = api.get(f"/v1/traces/{trace_id}/calls").json()
    assert done["status"] == "interrupted" and done["calls"]["made"] == 6
    outcomes = Counter(c["outcome"] for c in out["calls"])
    assert out["total"] == out["kept"] == 6 and outcomes == {"answered": 5, "failed": 1}
    held = next(c for c in out["calls"] if c["outcome"] == "failed")
    assert held["mask"] == "no sources" and held["error"] == crud_calls.IN_FLIGHT_ERROR and held["reply"] is None
