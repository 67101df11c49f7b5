"""Honest failures: a scoring server that cannot return log-probabilities, and a trace that measured nothing.

Reported: ``--estimator logprob`` against an OpenAI-compatible server whose ``/v1/completions`` answers without
log-probabilities said "can score: yes (verified on the first call)", every scoring call failed with
``KeyError: 'logprobs'``, each one billed, and the trace ended ``succeeded`` (exit 0) because its span checks
answered. Now:

* before consent, one probe call (outside the trace: not counted, not billed in it) checks the server; the gate
  says what it found, and a server that cannot score is refused with the flag to fix (exit 1, nothing of the
  trace spent); where no probe is made (the service's quote) the gate says "unverified", never "yes";
* an answer without log-probabilities is a failed call naming the cause and the setting, not a ``KeyError`` and
  not an answered score;
* a trace that measured nothing — every call failed, or every call of one of its scalars (the scorer's, or the
  judge's measurements) — is a failed trace for every estimator: the job ends ``failed`` with the cause and the fix,
  the CLI exits 1 with both, and neither ever shows it as a result.

Everything runs the real clients (litellm for the judge, ``CompletionsScorer`` for the scorer) against ``Scoring``
(``support.scoring_server``): ``FakeOpenAI`` with a ``/v1/completions`` beside it that echoes the prompt's
log-probabilities as llama.cpp's server does — for its first ``echoed`` requests, then (or always) without any, as
the reporter's server did.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_server import SMALL_CLAIM, InProcessApi, KeyedJudge, small_turn
from support.cli_run import run_cli
from support.fake_openai import FakeReply
from support.scoring_server import Scoring

from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.ledger import CallLedger
from estimator.loo.logprob_cost import EstimatorChoice
from estimator.seams.llm import LLMError, LLMRequest, LLMResponse, Message, ScriptedLLM
from estimator.seams.scorer import ScorerError, ScriptedScorer
from estimator.trace import planned_calls, run_trace
from estimator.trace_failure import ScoringTally, TraceFailure, failed_trace
from provenance_api.providers import free_tier

ESTIMATORS = ("judged", "expected", "logprob", "both", "proxy")
NO_LOGPROBS = "answered without echoed log-probabilities"  # the failed call's cause, in the scorer's words
JUDGE_DOWN = "model fake is not loaded"


@pytest.fixture
def turn_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "turn.json"
    path.write_text(json.dumps(small_turn()), encoding="utf-8")
    return path


def trace_cli(capsys: pytest.CaptureFixture[str], turn: Path, server: Scoring, estimator: str) -> tuple[int, Any, str]:
    """``provenance trace`` of the small turn's claim on ``server`` (judge and scorer), --json, no cache."""
    scorer = ["--scorer-api-base", server.base_url, "--scorer-model", "qwen"] if estimator == "proxy" else []
    return run_cli(
        capsys,
        "trace",
        str(turn),
        SMALL_CLAIM,
        "--model",
        "openai/fake",
        "--api-base",
        server.base_url,
        "--api-key",
        "test-key",
        "--estimator",
        estimator,
        *scorer,
        "--yes",
        "--json",
        "--no-cache",
    )


@contextmanager
def service(tmp_path: Path, server: Scoring) -> Iterator[httpx.Client]:
    """A tenant's client of the service on ``server`` (judge and scorer over the real clients), the small turn
    stored."""
    with (
        InProcessApi(
            tmp_path / "data",
            warm_up=False,
            judgement_cache=False,
            judge_api_base=server.base_url,
            judge_api_key="test-key",
            judge_timeout_seconds=20,
            provider_max_attempts=1,
            scorer_api_base=server.base_url,
            scorer_model="qwen",
        ) as srv,
        srv.client(srv.key("acme", "ann")) as api,
    ):
        assert api.post("/v1/turns", json=small_turn()).status_code == 201
        yield api


def trace_api(api: httpx.Client, estimator: str) -> dict[str, Any]:
    quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0", "estimator": estimator})
    assert quote.status_code == 201, quote.text
    started = api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
    assert started.status_code == 202, started.text
    done: dict[str, Any] = api.get(f"/v1/traces/{started.json()['trace_id']}", params={"wait": "true"}).json()
    return done


def gate_line(err: str, label: str) -> str:
    return next(line for line in err.splitlines() if line.startswith(label))


# --------------------------------------------------------------------------- (a) probed before consent


def test_a_server_without_logprobs_is_refused_before_consent_after_one_unbilled_probe(
    turn_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Scoring(echoed=0) as server:
        code, out, err = trace_cli(capsys, turn_file, server, "logprob")
        chats = server.requests
    assert code == 1, (out, err)
    assert len(server.completions) == 1 and chats == []  # the probe, and nothing of the trace
    line = gate_line(err, "Can score")
    assert line.startswith("Can score         no (") and NO_LOGPROBS in line, line
    assert "verified on the first call" not in err
    problem = out["error"]
    assert problem["field"] == "--api-base" and "--scorer-api-base" in problem["fix"]
    assert "--estimator judged" in problem["fix"] and NO_LOGPROBS in problem["detail"]
    assert "KeyError" not in json.dumps(out)
    listed, traces, _ = run_cli(capsys, "traces", "--json")  # nothing was logged: no trace ran
    assert listed == 0 and traces["items"] == [], traces


def test_a_server_that_scores_is_verified_by_the_probe_and_the_probe_is_not_in_the_trace(
    turn_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Scoring() as server:
        code, out, err = trace_cli(capsys, turn_file, server, "logprob")
        probed_and_scored = len(server.completions)
    assert code == 0, err
    line = gate_line(err, "Can score")
    assert line.startswith("Can score         yes (") and "verified by a probe call before the trace" in line, line
    assert out["estimator"] == "logprob" and out["verdict"] == "attributed"
    scoring_calls = out["calls"]["made"] - out["calls"]["failed"] - span_calls(out)
    assert probed_and_scored == scoring_calls + 1  # the probe is the one the trace does not count


def span_calls(result: dict[str, Any]) -> int:
    return sum(1 for s in result["sources"] if s.get("support") is not None)


def test_without_a_probe_the_gate_says_unverified_never_yes(
    turn_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Scoring() as server:
        code, _, err = trace_cli(capsys, turn_file, server, "judged")  # a judged trace probes no scorer
    assert code == 0, err
    assert gate_line(err, "Can score").startswith("Can score         unverified (")
    assert gate_line(err, "Expected digit").startswith("Expected digit    unverified (")


def test_a_judge_without_top_logprobs_is_refused_for_expected_before_consent(
    turn_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Scoring() as server:
        server.ignore_logprobs = True  # a server that drops the parameter: answers, without any
        code, out, err = trace_cli(capsys, turn_file, server, "expected")
        sent = server.requests
    assert code == 1, (out, err)
    assert len(sent) == 1 and sent[0]["logprobs"] is True  # the probe alone
    assert gate_line(err, "Expected digit").startswith("Expected digit    no (")
    assert out["error"]["field"] == "--estimator" and "--estimator judged" in out["error"]["fix"]


def test_a_judge_with_top_logprobs_is_verified_for_expected(
    turn_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Scoring() as server:
        code, out, err = trace_cli(capsys, turn_file, server, "expected")
        sent = len(server.requests)
    assert code == 0, err
    line = gate_line(err, "Expected digit")
    assert line.startswith("Expected digit    yes (") and "verified by a probe call before the trace" in line, line
    assert out["estimator"] == "expected" and sent == out["calls"]["made"] + 1  # the probe is not the trace's


def test_the_service_quote_says_unverified_for_a_configured_scoring_server(tmp_path: Path) -> None:
    with (
        Scoring() as server,
        InProcessApi(tmp_path / "data", warm_up=False, scorer_api_base=server.base_url) as srv,
        srv.client(srv.admin_key) as api,
    ):
        assert api.post("/v1/turns", json=small_turn()).status_code == 201
        for estimator in ("judged", "logprob", "both"):
            quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0", "estimator": estimator})
            assert quote.status_code == 201, quote.text
            reason = quote.json()["scoring"]["reason"]
            assert "unverified" in reason and "verified on the first call" not in reason, reason
        assert server.completions == []  # a quote makes no call


# --------------------------------------------------------------------------- (b) no logprobs: a failed call


def test_an_answer_without_logprobs_is_a_failed_call_naming_the_cause_and_the_setting(tmp_path: Path) -> None:
    with Scoring(echoed=0) as server, service(tmp_path, server) as api:
        done = trace_api(api, "logprob")
        calls = api.get(f"/v1/traces/{done['trace_id']}/calls").json()["calls"]
    scores = [c for c in calls if c["kind"] == "score"]
    assert scores and all(c["outcome"] == "failed_billed" and c["parsed"] is None for c in scores), scores
    for call in scores:
        assert NO_LOGPROBS in call["error"] and "PROVENANCE_SCORER_API_BASE" in call["error"], call["error"]
        assert "KeyError" not in call["error"] and call["cost_usd"] == 0.0
    assert done["calls"]["failed"] >= len(scores)


# --------------------------------------------------------------------------- (c) measured nothing: failed


FAILING: dict[str, tuple[str, str]] = {
    # estimator: (what fails, a word of the fix the CLI names)
    "judged": ("judge", "--api-base"),
    "expected": ("judge", "--api-base"),
    "logprob": ("scorer", "--scorer-api-base"),
    "both": ("scorer", "--scorer-api-base"),
    "proxy": ("scorer", "--scorer-api-base"),
}


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_a_cli_trace_that_measured_nothing_exits_1_with_the_cause_and_the_fix(
    estimator: str, turn_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    what, fix_word = FAILING[estimator]
    server = Scoring(echoed=1) if what == "scorer" else Scoring(judge_error=JUDGE_DOWN)  # the probe answers, no more
    if estimator == "expected":  # the probe (the first chat call) answers with top log-probabilities; the rest fail
        server = Scoring()
        server.faults = lambda index, request: None if index == 0 else FakeReply.error(400, JUDGE_DOWN)
    with server:
        code, out, err = trace_cli(capsys, turn_file, server, estimator)
    assert code == 1, (estimator, out, err)
    assert out["status"] == "failed" and "verdict" not in out and "gamma" not in out, out
    assert out["error"].startswith(("nothing was measured", "every model call failed")), out["error"]
    cause = NO_LOGPROBS if what == "scorer" else JUDGE_DOWN
    assert cause in out["error"] and fix_word in out["fix"], out
    assert "trace failed" in err and "fix:" in err
    code, shown, _ = run_cli(capsys, "traces", "--json")  # logged as failed, never as a result
    assert code == 0 and [t["status"] for t in shown["items"]] == ["failed"], shown
    assert shown["items"][0]["verdict"] is None


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_a_service_trace_that_measured_nothing_is_a_failed_job_never_a_result(estimator: str, tmp_path: Path) -> None:
    what, _ = FAILING[estimator]
    server = Scoring(echoed=0) if what == "scorer" else Scoring(judge_error=JUDGE_DOWN)
    with server, service(tmp_path, server) as api:
        done = trace_api(api, estimator)
        listed = api.get("/v1/traces", params={"status": "succeeded"}).json()
        exported = api.get(f"/v1/traces/{done['trace_id']}/export", params={"format": "markdown"}).text
    assert done["status"] == "failed" and done["result"] is None, done
    reason = done["reason"]
    cause = NO_LOGPROBS if what == "scorer" else JUDGE_DOWN
    assert cause in reason and " — fix: " in reason, reason
    if what == "scorer":
        assert "PROVENANCE_SCORER_API_BASE" in reason.split(" — fix: ")[1] and "estimator judged" in reason
    assert listed["total"] == 0 and listed["items"] == []
    assert "failed" in exported.lower() and "attributed" not in exported


def test_span_checks_that_answered_do_not_make_a_result_of_a_trace_whose_scores_all_failed(tmp_path: Path) -> None:
    """The reported case exactly: the judge answers every span check, every scoring call fails."""
    with Scoring(echoed=0) as server, service(tmp_path, server) as api:
        done = trace_api(api, "logprob")
        calls = api.get(f"/v1/traces/{done['trace_id']}/calls").json()["calls"]
    spans = [c for c in calls if c["kind"] == "chat"]
    assert spans and all(c["outcome"] == "answered" for c in spans)  # the judge was fine
    assert done["status"] == "failed" and done["result"] is None
    assert done["reason"].startswith("nothing was measured: no scoring call gave a log-probability"), done["reason"]


# --------------------------------------------------------------------------- the rule itself, on scripted models


def small_corpus() -> Corpus:
    return free_tier.corpus_for(StoredTurn.model_validate(small_turn()))


def span_checks_fail(request: LLMRequest) -> LLMResponse:
    """The keyed judge, whose span checks (every call but the judge's digit) fail."""
    if "strict judge of support" not in request.messages[0].content:
        raise LLMError("span check refused")
    return KeyedJudge().scripted(request)


async def traced(estimator: EstimatorChoice, llm: ScriptedLLM, scorer: ScriptedScorer | None) -> TraceFailure | None:
    corpus = small_corpus()
    ledger = CallLedger(planned=planned_calls(estimator, corpus), concurrency=4)
    tally = None if scorer is None else ScoringTally(scorer)
    await run_trace(estimator, SMALL_CLAIM, "Where is my order A-1?", corpus, llm=llm, scorer=tally, ledger=ledger)
    return failed_trace(ledger, tally)


async def test_scores_that_all_fail_fail_the_trace_though_every_span_check_answered() -> None:
    def no_score(messages: Sequence[Message], target: str) -> float:
        raise ScorerError("no logprobs here")

    failure = await traced("logprob", ScriptedLLM(KeyedJudge().scripted), ScriptedScorer(no_score))
    assert failure is not None and failure.scorer and not failure.judge
    assert failure.reason.startswith("nothing was measured: no scoring call gave a log-probability")
    assert "no logprobs here" in failure.reason


async def test_some_scores_measured_is_a_result_not_a_failure() -> None:
    seen: list[int] = []

    def every_other(messages: Sequence[Message], target: str) -> float:
        seen.append(1)
        if len(seen) % 2:
            raise ScorerError("this one failed")
        return -10.0

    assert await traced("logprob", ScriptedLLM(KeyedJudge().scripted), ScriptedScorer(every_other)) is None
    assert await traced("both", ScriptedLLM(KeyedJudge().scripted), ScriptedScorer(lambda m, t: -5.0)) is None


async def test_span_checks_that_fail_beside_measurements_that_answered_are_not_a_failed_trace() -> None:
    assert await traced("judged", ScriptedLLM(span_checks_fail), None) is None


async def test_a_scorer_that_answers_without_a_finite_value_measured_nothing() -> None:
    failure = await traced("logprob", ScriptedLLM(KeyedJudge().scripted), ScriptedScorer(lambda m, t: math.nan))
    assert failure is not None and failure.scorer
    assert "answered without one" in failure.reason


def test_a_service_expected_trace_whose_judge_sends_no_top_logprobs_is_failed_naming_the_setting(
    tmp_path: Path,
) -> None:
    """The service makes no probe before a trace: a judge server that drops ``logprobs`` answers every
    measurement with a digit and nothing under it. That measured nothing: a failed job, never "no information"."""
    server = Scoring()
    server.ignore_logprobs = True
    with server, service(tmp_path, server) as api:
        done = trace_api(api, "expected")
    assert done["status"] == "failed" and done["result"] is None, done
    reason = done["reason"]
    assert reason.startswith("nothing was measured: no judge call of the measurements gave a value"), reason
    assert "returned no top log-probabilities" in reason and "estimator judged" in reason.split(" — fix: ")[1]


async def test_a_judge_whose_answers_are_never_a_digit_measured_nothing() -> None:
    def prose(request: LLMRequest) -> LLMResponse:
        if "strict judge of support" in request.messages[0].content:
            return LLMResponse(text="It depends on the sources.")
        return KeyedJudge().scripted(request)

    failure = await traced("judged", ScriptedLLM(prose), None)
    assert failure is not None and failure.judge and failure.unvalued and not failure.scorer
    assert "answered without one" in failure.reason and "not a single digit 1–9" in failure.reason


async def test_expected_with_digits_but_no_alternatives_measured_nothing_and_with_them_is_a_result() -> None:
    failure = await traced("expected", ScriptedLLM(KeyedJudge().scripted), None)  # digits, no top_logprobs
    assert failure is not None and failure.unvalued
    assert "returned no top log-probabilities" in failure.reason

    def with_alternatives(request: LLMRequest) -> LLMResponse:
        answer = KeyedJudge().scripted(request)
        if request.top_logprobs is None:
            return answer
        return LLMResponse(text=answer.text, usage=answer.usage, top_logprobs=[{answer.text: -0.1, "5": -3.0}])

    assert await traced("expected", ScriptedLLM(with_alternatives), None) is None
