"""One decision whether a trace may run (``operations.trace_plan.decide``), for ``provenance trace`` and the
service alike; and the setting a failed trace asks the user to fix, read from the provider error's type.

The command line and the API refuse the same bad request (``proxy`` with no local model or scoring endpoint to
rank with) as the decision does: the same kind of refusal and reason, the field as each surface spells it
(``--estimator``, ``estimator``), and that surface's fix. The fix of a trace whose every call failed comes from
the type of the last provider error: an error whose message names another setting still maps by its type."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from support.api_server import SMALL_CLAIM, InProcessApi, scripted_factory, small_turn
from support.fake_openai import FakeOpenAI, FakeReply

from estimator.seams.llm import LLMError
from estimator.seams.scorer import ScorerError
from estimator.trace_failure import TraceFailure
from provenance_api.cli.main import main
from provenance_api.cli.style import Style
from provenance_api.cli.trace import _failed
from provenance_api.core.errors import (
    InvalidInput,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
)
from provenance_api.importers.turn_files import load_turn_file
from provenance_api.operations import trace_plan

NO_RANKER = "no local scoring model or scoring endpoint is configured"  # proxy_capability's reason
KEY_FIX = (
    "give the judge's provider a key: the provider's usual variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, …) "
    "or --api-key with --api-base"
)
GENERIC_FIX = "check --model, --api-base and the provider's key; the error above is the provider's own"


def _judge(request: dict[str, object]) -> str:
    return "5"


def test_the_cli_and_the_service_refuse_the_same_request_by_the_one_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "turn.json"
    path.write_text(json.dumps(small_turn()), encoding="utf-8")
    turn = load_turn_file(str(path))

    with FakeOpenAI(_judge) as judge:
        code = main(
            [
                "trace",
                str(path),
                SMALL_CLAIM,
                "--model",
                "openai/fake",
                "--api-base",
                judge.base_url,
                "--api-key",
                "test-key",
                "--estimator",
                "proxy",
                "--yes",
                "--no-log",
                "--json",
            ]
        )
        sent = judge.requests
    out, _ = capsys.readouterr()
    cli = json.loads(out)["error"]
    assert code == 2 and sent == []
    cli_decision = trace_plan.decide(
        turn,
        SMALL_CLAIM,
        "proxy",
        "openai/fake",
        surface=trace_plan.cli_surface(local_model=False, api_base=judge.base_url, scorer_api_base=None),
    )

    with (
        InProcessApi(tmp_path / "service", llm_factory=scripted_factory(), warm_up=False) as srv,
        srv.client(srv.admin_key) as api,
    ):
        assert api.post("/v1/turns", json=small_turn()).status_code == 201
        quoted = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "estimator": "proxy"})
        started = api.post(
            "/v1/traces",
            json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM, "estimator": "proxy", "max_cost_usd": 10},
        )
        surface = trace_plan.service_surface(srv.settings, srv.settings.admin_tenant, local_model=False)
    service_decision = trace_plan.decide(turn, SMALL_CLAIM, "proxy", None, surface=surface)
    assert quoted.status_code == started.status_code == 422, quoted.text
    api_problem = quoted.json()
    for key in ("type", "field", "fix", "detail"):  # quoting and starting inline refuse alike
        assert api_problem[key] == started.json()[key], key

    cli_refusal, service_refusal = cli_decision.refusal, service_decision.refusal
    assert cli_refusal is not None and service_refusal is not None
    assert not cli_decision.may_run and not service_decision.may_run
    assert cli_refusal.kind == service_refusal.kind == "proxy-scorer"
    # each surface shows exactly what the one decision said, spelled its own way
    assert (cli["field"], cli["fix"], cli["detail"]) == (cli_refusal.field, cli_refusal.fix, cli_refusal.detail)
    assert (api_problem["field"], api_problem["fix"], api_problem["detail"]) == (
        service_refusal.field,
        service_refusal.fix,
        service_refusal.detail,
    )
    assert cli["type"] == api_problem["type"] == "urn:provenance:problem:invalid-input"
    assert (cli["field"], api_problem["field"]) == ("--estimator", "estimator")
    assert cli["detail"].endswith(NO_RANKER) and api_problem["detail"].endswith(NO_RANKER)
    assert "--local-model FILE.gguf" in cli["fix"] and "PROVENANCE_SCORER_API_BASE" in api_problem["fix"]
    # the gate itself is shared: the same gated sentence and the same planned calls
    assert cli_decision.selection == service_decision.selection
    assert cli_decision.planned == service_decision.planned


def test_only_the_operator_policy_refuses_a_model_the_users_own_key_runs(tmp_path: Path) -> None:
    path = tmp_path / "turn.json"
    path.write_text(json.dumps(small_turn()), encoding="utf-8")
    turn = load_turn_file(str(path))
    own = trace_plan.decide(
        turn,
        SMALL_CLAIM,
        "judged",
        "openai/not-on-any-list",
        surface=trace_plan.cli_surface(local_model=False, api_base=None, scorer_api_base=None),
    )
    assert own.may_run and own.model == "openai/not-on-any-list" and own.choice.source == "explicit"
    with InProcessApi(tmp_path / "service", llm_factory=scripted_factory(), warm_up=False) as srv:
        surface = trace_plan.service_surface(srv.settings, srv.settings.admin_tenant, local_model=False)
    with pytest.raises(InvalidInput) as refused:
        trace_plan.decide(turn, SMALL_CLAIM, "judged", "openai/not-on-any-list", surface=surface)
    assert refused.value.field == "model" and "PROVENANCE_ALLOWED_MODELS" in (refused.value.fix or "")


@pytest.mark.parametrize(
    ("error", "setting"),
    [
        # each message names a different setting than the error's type: the type decides
        (ProviderAuthError("could not connect: connection refused, timed out resolving the host"), "key"),
        (ProviderUnavailable("HTTP 401 unauthorized: invalid api_key, authentication credentials"), "endpoint"),
        (ProviderTimeout("401 invalid api key"), "endpoint"),
        (ProviderUnavailable("connection refused", provider_status=503), None),  # it answered: reachable
        (ProviderBadRequest("401 unauthorized api key; connection refused; timeout"), None),
        (ProviderError("authentication failed, connection refused"), None),
        (LLMError("401 invalid api key"), None),
        (ScorerError("could not connect: connection refused"), None),
        (None, None),
    ],
)
def test_a_provider_error_maps_to_its_setting_by_type(error: BaseException | None, setting: str | None) -> None:
    assert trace_plan.failure_fix(error, api_base="http://127.0.0.1:9/v1").setting == setting


def test_the_same_message_under_two_types_asks_for_two_settings() -> None:
    text = "the provider said: 401 unauthorized, connection refused"
    key = trace_plan.failure_fix(ProviderAuthError(text), api_base=None)
    endpoint = trace_plan.failure_fix(ProviderTimeout(text), api_base="http://127.0.0.1:9/v1")
    assert key.fix == KEY_FIX
    assert endpoint.fix == (
        "check that --api-base http://127.0.0.1:9/v1 answers, or pass --api-base for a reachable "
        "OpenAI-compatible server"
    )
    assert trace_plan.failure_fix(ProviderBadRequest(text), api_base=None).fix == GENERIC_FIX


def test_the_cli_reports_a_failed_trace_by_the_error_type(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(json=True, api_base=None)
    failure = "every model call failed (3 calls); last error: HTTP 401 invalid api key"
    error = ProviderUnavailable("HTTP 401 invalid api key")
    code = _failed(args, TraceFailure(failure, scorer=False, judge=True, error=error), Style(False))
    out, err = capsys.readouterr()
    assert code == 1 and json.loads(out) == {
        "status": "failed",
        "error": failure,
        "fix": "check that the provider's endpoint (OPENAI_API_BASE, …) answers, or pass --api-base for a "
        "reachable OpenAI-compatible server",
    }
    assert "fix: check that the provider's endpoint" in err


def test_a_trace_refused_by_its_provider_names_the_key_whatever_the_message_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "turn.json"
    path.write_text(json.dumps(small_turn()), encoding="utf-8")
    with FakeOpenAI(lambda request: FakeReply.error(401, "connection refused while resolving the host")) as srv:
        code = main(
            [
                "trace",
                str(path),
                SMALL_CLAIM,
                "--model",
                "openai/fake",
                "--api-base",
                srv.base_url,
                "--api-key",
                "wrong",
                "--yes",
                "--no-log",
                "--no-cache",
                "--json",
            ]
        )
    out, _ = capsys.readouterr()
    failed = json.loads(out)
    assert code == 1 and failed["status"] == "failed" and failed["fix"] == KEY_FIX
