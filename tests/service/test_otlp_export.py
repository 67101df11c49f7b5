"""OpenTelemetry export of finished traces, against a real OTLP/HTTP receiver on loopback.

The receiver is a plain HTTP server that accepts ``POST /v1/traces`` protobuf bodies and decodes them with
OpenTelemetry's own ``ExportTraceServiceRequest``. A trace runs through the real service (its judge behind an
OpenAI-compatible server, reached through litellm and the judgement cache); its spans must carry what the API
reports: one ``provenance.trace`` span, one child span per model call of ``GET /v1/traces/{id}/calls`` with the
right parent, the GenAI attribute names, the calls' own token counts, outcomes and start and end times. With no
endpoint configured nothing is sent and the exporter is never imported; with a dead endpoint the trace is not
affected."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from pydantic import ValidationError
from support.api_server import SMALL_CLAIM, TEST_PRICES, InProcessApi, KeyedJudge, free_port, small_turn
from support.fake_openai import FakeOpenAI
from support.otlp_receiver import attributes, otlp_receiver

from provenance_api.core.settings import Settings
from provenance_api.providers import otel_export

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[2]
JUDGE_KEY = "sk-otlp-judge-key-0123456789"
AUTH = "Basic cGstbGYtdGVzdDpzay1sZi10ZXN0"  # what a Langfuse user sends: base64(public:secret)


def ns(iso: str) -> int:
    moment = datetime.fromisoformat(iso)
    return int(moment.replace(microsecond=0).timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


# --------------------------------------------------------------------------- the service


def run_trace(api: httpx.Client, sentence: str = SMALL_CLAIM) -> dict[str, Any]:
    quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": sentence})
    assert quote.status_code == 201, quote.text
    started = api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
    assert started.status_code == 202, started.text
    while True:
        done: dict[str, Any] = api.get(started.headers["location"], params={"wait": "true"}).json()
        if done["status"] in ("succeeded", "failed", "interrupted"):
            return done


@contextmanager
def service(tmp_path: Path, **settings: Any) -> Iterator[httpx.Client]:
    judge = KeyedJudge()
    with (
        FakeOpenAI(judge.openai, api_key=JUDGE_KEY) as provider,
        InProcessApi(
            tmp_path / "data", judge_api_base=provider.base_url, judge_api_key=JUDGE_KEY, warm_up=False, **settings
        ) as srv,
        srv.client(srv.admin_key, timeout=120) as api,
    ):
        assert api.post("/v1/turns", json=small_turn()).status_code == 201
        yield api


# --------------------------------------------------------------------------- the tests


def test_each_trace_exports_its_span_and_one_child_per_model_call(tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        with service(tmp_path, otlp_endpoint=receiver.base_url, otlp_headers={"Authorization": AUTH}) as api:
            first = run_trace(api)
            second = run_trace(api)  # the same claim again: its measurements come from the judgement cache
            calls = {t["trace_id"]: api.get(f"/v1/traces/{t['trace_id']}/calls").json() for t in (first, second)}
        assert otel_export.flush_all()
        receiver.wait_for_spans(2 + sum(c["total"] for c in calls.values()))

        assert set(receiver.paths) == {"/v1/traces"}  # the base URL got OTLP's traces path
        assert all(r.headers["authorization"] == AUTH for r in receiver.exports)
        assert all(r.headers["content-type"] == "application/x-protobuf" for r in receiver.exports)
        spans = receiver.spans()
        assert {(res["service.name"], scope) for res, scope, _ in spans} == {("provenance-service", "provenance_api")}
        roots = {
            attributes(s.attributes)["provenance.trace.id"]: s for _, _, s in spans if s.name == "provenance.trace"
        }
        assert set(roots) == {first["trace_id"], second["trace_id"]}

        for done in (first, second):
            assert done["status"] == "succeeded", done
            result, listed = done["result"], calls[done["trace_id"]]
            root = roots[done["trace_id"]]
            top = attributes(root.attributes)
            assert root.kind == Span.SPAN_KIND_INTERNAL and root.parent_span_id == b""
            assert root.status.code == Status.STATUS_CODE_OK
            assert top["provenance.turn.id"] == "t-small-1" and top["provenance.claim"] == SMALL_CLAIM
            assert top["provenance.verdict"] == result["verdict"] and top["provenance.estimator"] == result["estimator"]
            assert top["provenance.gamma"] == result["gamma"] and top["provenance.model"] == done["model"]
            assert top["gen_ai.request.model"] == "fake-judge" and top["gen_ai.provider.name"] == "openai"
            for word in ("planned", "made", "cached", "billed", "failed"):
                assert top[f"provenance.calls.{word}"] == done["calls"][word], word
            # the cost the result states; when it has none (a judge litellm cannot price), what its answered calls
            # were billed at the operator's price
            answered = [c for c in listed["calls"] if c["outcome"] == "answered"]
            price = TEST_PRICES["openai/fake-judge"]
            billed = (
                sum(
                    c["input_tokens"] * price["input_per_mtok"] + c["output_tokens"] * price["output_per_mtok"]
                    for c in answered
                )
                / 1e6
            )
            stated = result["cost_usd"] if result["cost_usd"] is not None else billed
            assert top["provenance.cost_usd"] == pytest.approx(stated, rel=1e-9, abs=1e-12)
            assert (billed > 0) == (done["calls"]["billed"] > 0)

            children = sorted(
                (s for _, _, s in spans if s.parent_span_id == root.span_id),
                key=lambda s: attributes(s.attributes)["provenance.call.index"],
            )
            assert listed["total"] == listed["kept"] == len(children) > 0
            for span, call in zip(children, listed["calls"], strict=True):
                got = attributes(span.attributes)
                assert span.trace_id == root.trace_id and span.kind == Span.SPAN_KIND_CLIENT
                assert span.name == "chat fake-judge"
                assert got["gen_ai.operation.name"] == "chat"
                assert got["gen_ai.request.model"] == "fake-judge"
                assert got["gen_ai.provider.name"] == got["gen_ai.system"] == "openai"
                assert got["gen_ai.usage.input_tokens"] == call["input_tokens"]
                assert got["gen_ai.usage.output_tokens"] == call["output_tokens"]
                assert got["provenance.call.index"] == call["index"]
                assert got["provenance.call.stage"] == call["stage"] and got["provenance.call.mask"] == call["mask"]
                assert got["provenance.call.outcome"] == call["outcome"]
                assert got["provenance.call.cached"] == (call["outcome"] == "cached")
                assert got.get("provenance.call.parsed") == call["parsed"]
                assert span.start_time_unix_nano == ns(call["started_at"])
                assert span.end_time_unix_nano - span.start_time_unix_nano == pytest.approx(
                    call["seconds"] * 1e9, abs=1_000
                )
                assert root.start_time_unix_nano <= span.start_time_unix_nano
                assert span.end_time_unix_nano <= root.end_time_unix_nano
            assert sum(c["input_tokens"] for c in answered) == result["usage"]["input_tokens"]
            assert sum(c["output_tokens"] for c in answered) == result["usage"]["output_tokens"]

        # the first trace sent its calls; the second was answered from the cache, and its spans say so
        first_outcomes = {
            attributes(s.attributes)["provenance.call.outcome"]
            for _, _, s in spans
            if s.parent_span_id == roots[first["trace_id"]].span_id
        }
        second_outcomes = {
            attributes(s.attributes)["provenance.call.outcome"]
            for _, _, s in spans
            if s.parent_span_id == roots[second["trace_id"]].span_id
        }
        assert first_outcomes == {"answered"} and "cached" in second_outcomes
        assert second["calls"]["cached"] > 0


@contextmanager
def silent_endpoint() -> Iterator[str]:
    """A loopback port that takes connections and never answers them (a collector that hangs)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)  # connections complete in the backlog; nothing ever reads them
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_an_endpoint_that_hangs_or_is_gone_never_touches_the_trace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spans are sent on the SDK's own thread: traces end (and the next ones run) while the collector hangs,
    and the failed send is logged, not raised."""
    caplog.set_level(logging.WARNING)
    monkeypatch.setattr(otel_export, "EXPORT_TIMEOUT_SECONDS", 1.0)  # the hang is given up sooner; same path
    with silent_endpoint() as hanging:
        with service(tmp_path / "hangs", otlp_endpoint=hanging) as api:
            done = [run_trace(api), run_trace(api)]
        otel_export.flush_all()  # returns once the batch was given up after the exporter's timeout
    assert [d["status"] for d in done] == ["succeeded", "succeeded"]
    failed = [r for r in caplog.records if r.name.startswith("opentelemetry.exporter") and r.levelno >= logging.ERROR]
    assert failed and "Failed to export" in failed[0].getMessage()
    with service(tmp_path / "gone", otlp_endpoint=f"http://127.0.0.1:{free_port()}") as api:
        assert run_trace(api)["status"] == "succeeded"  # nothing listens there at all


UNCONFIGURED = textwrap.dedent("""
    import json, sys, tempfile
    from pathlib import Path
    from support.api_server import SMALL_CLAIM, ApiServer, scripted_factory, small_turn
    with ApiServer(Path(tempfile.mkdtemp()), llm_factory=scripted_factory(), warm_up=False) as srv, \\
            srv.client(srv.admin_key, timeout=120) as api:
        api.post("/v1/turns", json=small_turn())
        quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": SMALL_CLAIM}).json()
        started = api.post("/v1/traces", json={"quote_id": quote["quote_id"]})
        done = api.get(started.headers["location"], params={"wait": "true"}).json()
    loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))
                    or m in ("provenance_api.providers.otel_export", "provenance_api.jobs.trace_spans"))
    print(json.dumps({"status": done["status"], "made": done["calls"]["made"], "loaded": loaded}))
""")


@pytest.mark.slow  # a child process (the service) importing what it imports, to see what it loaded
def test_with_no_endpoint_nothing_is_sent_and_the_exporter_is_never_imported() -> None:
    with otlp_receiver() as receiver:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROVENANCE_OTLP")}
        # OpenTelemetry's own variables do not turn the export on: only PROVENANCE_OTLP_ENDPOINT does
        env |= {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.base_url,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.base_url + "/v1/traces",
            "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)]),
        }
        run = subprocess.run(
            [sys.executable, "-c", UNCONFIGURED],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=150,
            check=False,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        report = json.loads(run.stdout.strip().splitlines()[-1])
        assert report["status"] == "succeeded" and report["made"] > 0
        assert report["loaded"] == []
        assert receiver.exports == []  # the process has exited: anything it sent would be here


def test_the_endpoint_setting_is_checked_and_gets_the_traces_path() -> None:
    assert Settings(otlp_endpoint=None).otlp_target is None
    assert Settings(otlp_endpoint="  ").otlp_target is None
    base = Settings(otlp_endpoint="https://cloud.langfuse.com/api/public/otel/").otlp_target
    assert base is not None and base.traces_url == "https://cloud.langfuse.com/api/public/otel/v1/traces"
    secret = "px-secret-0123"
    full = Settings(otlp_endpoint="http://localhost:6006/v1/traces", otlp_headers={"api_key": secret}).otlp_target
    assert full is not None and full.traces_url == "http://localhost:6006/v1/traces"
    assert full.headers == (("api_key", secret),)
    assert secret not in repr(Settings(otlp_headers={"api_key": secret}))  # headers are secrets
    for wrong in ("localhost:4318", "ftp://collector/v1/traces", "http://"):
        with pytest.raises(ValidationError, match="PROVENANCE_OTLP_ENDPOINT must be an http"):
            Settings(otlp_endpoint=wrong)
