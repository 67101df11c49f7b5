"""Fault suite: traces over a flaky provider either answer as the fault-free run does or say they could not.

The provider is a real HTTP server on loopback (``FakeOpenAI``) running a scripted judge whose correct
answers are known (``FencedJudge``), with faults injected at 10 % 429 + Retry-After, 5 % 5xx (and
resets), 5 % answers past the client's timeout and 5 % malformed outputs (empty and malformed bodies,
non-digit answers, fabricated quotes, truncated answers). The judge is the service's own
``LiteLLMClient`` (retries, fallbacks, counters), one per trace, tagged with a request header so the
provider counts per trace.

For every one of ≥ 200 traces over the fixtures:
* each verdict (the claim's, every layer's and source's role, every span check's label) equals the
  fault-free run's, or the difference is disclosed: the measurement it rests on is marked
  no-information (with a warning saying why), a span check is downgraded, or the verdict itself is
  ``no_information``;
* every quote returned verifies against its source and lies within its line span;
* calls made ≤ the quoted plan;
* billed calls the client recorded == the calls the provider answered for that trace, and every
  attempt the client counted reached the provider.

A smaller variant runs the same faults through the HTTP API, where a trace may also end ``failed``
with a reason.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.api_server import ApiServer, load_fixture, small_turn
from support.fake_openai import TAG_HEADER
from support.fault_provider import FaultInjector, FaultRates, FencedJudge, by_tag, faulty_provider

from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus, Unit
from estimator.free_tier.segment import segment_response
from estimator.loo.judged import trace_claim
from estimator.params import DEFAULT_PARAMS
from estimator.results.models import TraceResultModel
from estimator.seams.llm import ScriptedLLM
from estimator.spans.verify import verify_quote
from provenance_api.providers import free_tier
from provenance_api.providers.llm_litellm import LiteLLMClient, aclose_litellm

pytestmark = pytest.mark.timeout(300)

FIXTURES = ("eo_worldview_turn.json", "failures_turn.json", "fallback_path_turn.json", "ndvi_parametric_turn.json")
MODEL = "openai/fake-judge"
PROVIDER_KEY = "sk-fault-suite-key-000"
TRACES = 200
CONCURRENT_TRACES = 16
CLIENT_TIMEOUT = 2.0  # slow answers are held until the client gives up; a prompt one never misses this
SEED = 20250611
ABSENT_KEY = "a phrase that no source contains 9f3a"


@dataclass(frozen=True)
class Scenario:
    name: str
    claim: str
    query: str
    corpus: Corpus
    keys: tuple[str, ...]


def _unique_phrase(corpus: Corpus, layer_units: list[Unit]) -> str | None:
    """A phrase of one unit of the layer (early in it, so within every cut) that no other unit holds."""
    for unit in layer_units:
        for line in unit.text[:1500].split("\n"):
            phrase = line.strip()[:32]
            if len(phrase) >= 16 and sum(phrase in u.text for u in corpus.units) == 1:
                return phrase
    return None


def scenarios() -> list[Scenario]:
    """Per fixture: the claim carried by one source of each layer in turn, and by no source."""
    out: list[Scenario] = []
    for name in FIXTURES:
        turn = StoredTurn.model_validate(load_fixture(name))
        corpus = free_tier.corpus_for(turn)
        claim = segment_response(turn.response)[0].text
        query = turn.effective_query()
        for layer in corpus.layers_present():
            phrase = _unique_phrase(corpus, list(corpus.in_layer(layer)))
            if phrase is not None:
                out.append(Scenario(f"{name}:{layer.value}", claim, query, corpus, (phrase,)))
        out.append(Scenario(f"{name}:none", claim, query, corpus, (ABSENT_KEY,)))
    return out


# ----------------------------------------------------------------------------- comparing with the clean run


def verdicts(result: TraceResultModel) -> dict[str, str]:
    """Every verdict of a result, by what it is about."""
    out: dict[str, str] = {"verdict": result.verdict}
    out.update({f"layer:{s.layer.value}": s.role for s in result.layers})
    out.update({f"role:{s.source_id}": str(s.role) for s in result.sources if s.role is not None})
    out.update({f"support:{s.source_id}": s.support.verdict for s in result.sources if s.support is not None})
    return out


def disclosed(result: TraceResultModel, what: str) -> bool:
    """Whether a difference in ``what`` is disclosed as coming from a failed measurement."""
    kind, _, ident = what.partition(":")
    if kind == "verdict":  # the claim's verdict may only fall back to "no information", never to another one
        return result.verdict == "no_information"
    if kind == "layer":
        return any(ls.layer.value == ident and ls.no_information for ls in result.layers)
    source = next((s for s in result.sources if s.source_id == ident), None)
    if kind == "role":
        # a source not tested here (its layer's measurement failed) or tested on a failed measurement
        layer_failed = any(ls.no_information for ls in result.layers)
        return (
            source is None
            or (source.role is None and layer_failed)
            or source.no_information
            or result.verdict == "no_information"
        )
    assert kind == "support"
    return (
        source is not None
        and source.support is not None
        and (source.support.no_information or source.support.downgraded)
    )


def undisclosed_differences(clean: TraceResultModel, faulty: TraceResultModel) -> list[str]:
    ours, theirs = verdicts(faulty), verdicts(clean)
    out: list[str] = []
    for what in sorted(set(ours) | set(theirs)):
        if ours.get(what) != theirs.get(what) and not disclosed(faulty, what):
            out.append(f"{what}: {theirs.get(what)} → {ours.get(what)}")
    return out


def check_disclosures(result: TraceResultModel) -> None:
    """A drop computed from a failed measurement is marked no-information and explained."""
    for ls in result.layers:
        if math.isnan(ls.s_without) or math.isnan(result.s_all):
            assert ls.no_information and ls.delta == 0.0 and ls.role == "irrelevant", ls
    for s in result.sources:
        if s.s_without is not None and math.isnan(s.s_without):
            assert s.no_information and s.delta == 0.0 and s.role == "irrelevant", s
    failed = sum(ls.no_information for ls in result.layers) + sum(s.no_information for s in result.sources)
    explained = [w for w in result.warnings if w.startswith("No information")]
    assert not failed or explained, result.warnings
    if result.verdict == "no_information":
        assert explained, result.warnings
    json.dumps(result.to_dict(), allow_nan=False)  # NaN is never shown as a number


def check_quotes(result: TraceResultModel, corpus: Corpus) -> None:
    for s in result.sources:
        if s.support is None or s.support.quote is None:
            continue
        text = corpus.by_id(s.source_id).text
        check = verify_quote(s.support.quote, text)
        assert check.verified, (s.source_id, s.support.quote)
        assert s.support.line_start is not None and s.support.line_end is not None
        assert 1 <= s.support.line_start <= s.support.line_end <= len(text.split("\n"))
        span = "\n".join(text.split("\n")[s.support.line_start - 1 : s.support.line_end])
        assert verify_quote(s.support.quote, span).verified, (s.source_id, s.support.quote)


# ----------------------------------------------------------------------------- estimator level, 200 traces


def clean_results(items: list[Scenario]) -> dict[str, TraceResultModel]:
    async def run() -> dict[str, TraceResultModel]:
        out: dict[str, TraceResultModel] = {}
        for sc in items:
            llm = ScriptedLLM(FencedJudge(sc.keys).scripted, model=MODEL)
            out[sc.name] = await trace_claim(
                llm, sc.claim, sc.query, sc.corpus, params=DEFAULT_PARAMS, tokenizer=free_tier.tokenizer()
            )
        return out

    return anyio.run(run)


@dataclass
class Outcome:
    scenario: Scenario
    tag: str
    result: TraceResultModel | None
    client: LiteLLMClient
    error: BaseException | None = None


@pytest.mark.slow  # scale: 200 traces under injected faults, each against its clean run
def test_two_hundred_traces_under_faults_answer_correctly_or_disclose(tmp_path: Path) -> None:
    items = scenarios()
    assert len({sc.corpus.digest for sc in items}) == len(FIXTURES) and len(items) >= 12
    clean = clean_results(items)
    # the scenarios cover the verdicts worth protecting
    assert {"attributed", "internal_knowledge"} <= {r.verdict for r in clean.values()}

    plan = [(items[i % len(items)], f"trace-{i:03d}") for i in range(TRACES)]
    judges = {tag: FencedJudge(sc.keys) for sc, tag in plan}  # scenarios of one fixture differ only here
    injector = FaultInjector(FaultRates.suite(), by_tag(judges), seed=SEED)
    provider = faulty_provider(injector, api_key=PROVIDER_KEY)
    outcomes: list[Outcome] = []

    async def one(sc: Scenario, tag: str, limiter: anyio.CapacityLimiter) -> None:
        client = LiteLLMClient(
            MODEL,
            api_base=provider.base_url,
            api_key=PROVIDER_KEY,
            timeout=CLIENT_TIMEOUT,
            max_attempts=4,
            backoff_base=0.01,
            backoff_max=0.2,
            extra_headers={TAG_HEADER: tag},
        )
        async with limiter:
            try:
                result = await trace_claim(
                    client, sc.claim, sc.query, sc.corpus, params=DEFAULT_PARAMS, tokenizer=free_tier.tokenizer()
                )
            except Exception as exc:  # the estimator must not raise on provider faults: recorded, asserted
                outcomes.append(Outcome(sc, tag, None, client, exc))
                return
        outcomes.append(Outcome(sc, tag, result, client))

    async def run_all() -> None:
        limiter = anyio.CapacityLimiter(CONCURRENT_TRACES)
        try:
            async with anyio.create_task_group() as tg:
                for sc, tag in plan:
                    tg.start_soon(one, sc, tag, limiter)
        finally:
            await aclose_litellm()

    with provider:
        anyio.run(run_all)
        answered = provider.answered_by_tag
        requests = provider.requests_by_tag
        assert not provider.script_errors, provider.script_errors[:3]

    assert len(outcomes) == TRACES
    errors = [(o.tag, repr(o.error)) for o in outcomes if o.error is not None]
    assert not errors, errors[:5]

    same = degraded = unread = late = 0
    problems: list[str] = []
    for o in outcomes:
        assert o.result is not None
        r = o.result
        assert r.calls.made <= r.calls.planned, (o.tag, r.calls)
        # every call billed is one the provider answered; an answer the client did not bill is one it had given
        # up on (its 2 s timeout ran out while the answer was on its way, when the machine is loaded): one of
        # its failed attempts, never an answer it received and failed to count
        sent = answered.get(o.tag, 0)
        failed_attempts = o.client.calls_attempted - o.client.calls_answered
        assert o.client.calls_billed <= sent <= o.client.calls_billed + failed_attempts, (
            o.tag,
            o.client.counters(),
            sent,
            injector.injected_by_tag.get(o.tag),
        )
        late += sent - o.client.calls_billed
        # every request the provider read was an attempt the client counted; an attempt it never read is one the
        # client gave up on first (its 2 s timeout, when the machine is loaded), never one it failed to count
        received = requests.get(o.tag, 0)
        assert answered.get(o.tag, 0) <= received <= o.client.calls_attempted, (o.tag, o.client.counters(), received)
        unread += o.client.calls_attempted - received
        assert r.calls.made - r.calls.failed <= o.client.calls_billed
        check_disclosures(r)
        check_quotes(r, o.scenario.corpus)
        diffs = undisclosed_differences(clean[o.scenario.name], r)
        if diffs:
            problems.append(f"{o.tag} {o.scenario.name}: {diffs}")
        if verdicts(r) == verdicts(clean[o.scenario.name]):
            same += 1
        else:
            degraded += 1
    assert not problems, problems[:10]

    kinds = injector.injected
    # the faults really happened, every kind of them, and the retries absorbed most
    assert set(kinds) >= {
        "429",
        "500",
        "503",
        "reset",
        "timeout",
        "empty_body",
        "malformed_json",
        "non_digit",
        "fabricated_quote",
        "truncated",
    }, kinds
    assert sum(kinds.values()) >= 0.15 * sum(requests.values())
    assert same >= TRACES // 2, (same, degraded)
    print(
        f"\n{TRACES} traces: {same} identical to the fault-free run, {degraded} degraded with disclosure; "
        f"faults injected {dict(sorted(kinds.items()))} over {sum(requests.values())} requests; "
        f"{unread} attempts given up by the client before the provider read them, {late} answered after it had"
    )


# ----------------------------------------------------------------------------- service level


CLAIM_LINE = re.compile(r"CLAIM:\n(?:<<<DATA-[0-9a-f]{16}>>>\n)?(.*)")  # the claim's data region, if fenced


def claim_tag(headers: Any, payload: dict[str, Any] | None) -> str | None:
    """The service's judge sends no tag header: a trace is told by its claim, which every prompt carries."""
    for message in (payload or {}).get("messages") or []:
        found = CLAIM_LINE.search(str(message.get("content", "")))
        if found:
            return found.group(1).strip()
    return None


SERVICE_KEY = "with carrier DHL"


async def clean_trace(judge: FencedJudge, claim: str, query: str, corpus: Corpus) -> TraceResultModel:
    return await trace_claim(
        ScriptedLLM(judge.scripted, model=MODEL),
        claim,
        query,
        corpus,
        params=DEFAULT_PARAMS,
        tokenizer=free_tier.tokenizer(),
    )


def service_turns() -> Iterator[tuple[dict[str, Any], str]]:
    """(turn, claim): distinct claims; the key in the tool return, in both layers, or nowhere."""
    for i in range(12):
        claim = f"Order A-{i} shipped on 2025-03-03 with DHL."
        changes: dict[str, Any] = {"response": claim + " Would you like the tracking number?"}
        tool_return = f"Order A-{i} shipped 2025-03-03 with carrier DHL, tracking 99812."
        if i % 3 == 1:
            changes["system_prompt"] = "You are a support agent. Always write with carrier DHL for DHL."
        elif i % 3 == 2:
            tool_return = f"Order A-{i} shipped 2025-03-03, tracking 99812."
        turn = small_turn(f"t-fault-{i}", **changes)
        turn["response_payload"]["tool_calls"][0]["response"] = tool_return
        yield turn, claim


def test_service_traces_under_faults_succeed_correctly_or_fail_with_a_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = FencedJudge([SERVICE_KEY])
    injector = FaultInjector(FaultRates.suite(retry_after=0.05), judge.tagged, seed=SEED)
    turns = list(service_turns())
    with faulty_provider(injector, api_key=PROVIDER_KEY, tagger=claim_tag) as provider:
        monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
        monkeypatch.setenv("OPENAI_API_BASE", provider.base_url)
        with (
            ApiServer(tmp_path, warm_up=False, judge_timeout_seconds=CLIENT_TIMEOUT, max_running_traces=6) as srv,
            srv.client(srv.admin_key, timeout=120) as api,
        ):
            started: list[tuple[dict[str, Any], str, str]] = []
            for turn, claim in turns:
                assert api.post("/v1/turns", json=turn).status_code == 201
                q = api.post("/v1/quotes", json={"turn_id": turn["turn_id"], "sentence": claim, "model": MODEL})
                assert q.status_code == 201, q.text
                t = api.post("/v1/traces", json={"quote_id": q.json()["quote_id"]})
                assert t.status_code == 202, t.text
                started.append((turn, claim, t.headers["location"]))
            done = []
            for turn, claim, location in started:
                state = api.get(location, params={"wait": "true", "timeout": 120}).json()
                while state["status"] in ("queued", "running"):
                    state = api.get(location, params={"wait": "true", "timeout": 120}).json()
                done.append((turn, claim, state))
        answered = provider.answered_by_tag
    assert not provider.script_errors

    outcomes: Counter[str] = Counter()
    for turn, claim, state in done:
        assert state["status"] in ("succeeded", "failed"), state
        calls = state["calls"]
        assert calls["made"] <= calls["planned"], calls
        assert calls["billed"] == answered.get(claim, 0), (claim, calls, answered.get(claim))
        if state["status"] == "failed":
            assert state["reason"] and state["result"] is None
            outcomes["failed"] += 1
            continue
        stored = StoredTurn.model_validate(turn)
        corpus = free_tier.corpus_for(stored)
        expected = anyio.run(clean_trace, judge, claim, stored.effective_query(), corpus)
        got, want = state["result"], expected.to_dict()
        assert got["calls"]["made"] == calls["made"]
        if got["verdict"] != want["verdict"]:
            assert got["verdict"] == "no_information", (claim, got["verdict"], want["verdict"])
            assert any(w.startswith("No information") for w in got["warnings"]), got["warnings"]
            outcomes["degraded"] += 1
        else:
            outcomes["same"] += 1
        for source in got["sources"]:
            support = source["support"]
            if support and support["quote"]:
                assert verify_quote(support["quote"], corpus.by_id(source["source_id"]).text).verified
    assert sum(injector.injected.values()) > 0
    assert outcomes["same"] >= len(turns) // 2, outcomes
