"""Typed results: the trace, probe and verify results cross every border (jobs → storage → API → CLI) as
the pydantic models of ``estimator.results.models``, and the OpenAPI document shows their shapes.

The finding: results crossed the API as ``dict[str, Any]`` built by hand-written ``to_dict`` methods, and
``TraceOut.result`` / ``ProbeOut.result`` were free-form objects in ``/openapi.json``.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError
from support.api_server import InProcessApi, scripted_factory, small_turn
from support.fake_openai import FakeOpenAI

from estimator.corpus.units import Layer
from estimator.results.models import (
    BothTraceJobResultModel,
    ExpectedTraceJobResultModel,
    JobResult,
    JudgedTraceJobResultModel,
    LogprobTraceJobResultModel,
    ProbeResultModel,
    ProxyTraceResultModel,
    TraceJobResult,
    TraceResultModel,
    trace_job_result,
)
from provenance_api.cli.main import main
from provenance_api.storage import crud_traces
from provenance_api.storage.crud_traces import Progress, ResultAudit
from provenance_api.storage.session import Database

FIXTURE_A = str(Path(__file__).resolve().parents[2] / "fixtures" / "eo_worldview_turn.json")
NOTE = "Non-authoritative note: classification maps can change"
JOB_RESULT: TypeAdapter[TraceJobResult | ProbeResultModel] = TypeAdapter(JobResult)

# A trace result as the first version that served results stored it: no ``kind``, no ``alone`` on layers
# and sources, no ``redundancy``, only ``failed_billed`` beside the first call counts, no ``declared``.
EARLIER_TRACE_RESULT: dict[str, Any] = {
    "claim": "Order A-1 shipped on 2025-03-03 with DHL.",
    "estimator": "judged",
    "gamma": 7.0,
    "s_all": 8.0,
    "s_none": 1.0,
    "verdict": "attributed",
    "verdict_text": "attributed",
    "diagnosis": None,
    "contributing_layers": ["tools"],
    "layers": [
        {"layer": "tools", "delta": 7.0, "role": "grounds", "s_without": 1.0, "no_information": False},
        {"layer": "instructions", "delta": None, "role": "irrelevant", "s_without": None, "no_information": True},
    ],
    "sources": [
        {
            "source_id": "s0",
            "layer": "tools",
            "label": "lookup_order",
            "kind": "user_tool",
            "delta": 7.0,
            "role": "grounds",
            "s_without": 1.0,
            "no_information": False,
            "support": {
                "verdict": "supported",
                "quote": "shipped 2025-03-03 with carrier DHL",
                "line_start": 1,
                "line_end": 1,
                "confidence": 0.9,
                "downgraded": False,
                "reason": "states it",
                "calls": 1,
                "no_information": False,
            },
            "diagnosis": "grounded in your data",
        },
    ],
    "omitted": [],
    "unscorable": [],
    "round2_skipped_reason": None,
    "warnings": [],
    "calls": {"planned": 12, "made": 9, "saved": 1, "cached": 0, "failed": 0, "failed_billed": 0, "unspent": 3},
    "usage": {"input_tokens": 1200, "output_tokens": 40, "cached_input_tokens": 0},
    "cost_usd": 0.0002,
    "prompt_versions": {"judge": "v1"},
    "params": {"max_calls": 48},
    "model": "openai/fake-judge",
    "corpus_digest": "0" * 64,
}

# A probe result as stored before results said their ``kind``.
EARLIER_PROBE_RESULT: dict[str, Any] = {
    "verdict": "required",
    "note": None,
    "target_id": "s0",
    "anchors": ["2025-03-03", "dhl"],
    "baseline": 3,
    "without": 0,
    "k": 3,
    "calls": {"planned": 6, "made": 6, "failed": 0},
    "usage": {"input_tokens": 900, "output_tokens": 300, "cached_input_tokens": 0},
    "cost_usd": 0.0003,
    "prompt_version": "probe_regenerate@1",
    "model": "openai/fake-judge",
}


def _component(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The object schema behind ``schema``: follows a $ref, or the one non-null member of an anyOf."""
    if "anyOf" in schema:
        (schema,) = [s for s in schema["anyOf"] if s.get("type") != "null"]
    ref = schema.get("$ref")
    if ref is None:
        return schema
    found: dict[str, Any] = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return found


def _properties(doc: dict[str, Any], model: str, field: str) -> dict[str, Any]:
    schema = _component(doc, doc["components"]["schemas"][model]["properties"][field])
    assert "properties" in schema, f"{model}.{field} is a free-form object in the OpenAPI document: {schema}"
    props: dict[str, Any] = schema["properties"]
    return props


def test_the_openapi_document_describes_the_trace_probe_and_verify_results_not_free_form_objects(
    tmp_path: Path,
) -> None:
    with InProcessApi(tmp_path, warm_up=False) as srv, srv.client() as api:
        doc = api.get("/openapi.json").json()

    # the trace result is a union keyed on estimator: one component per estimator, each with the common fields
    schemas = doc["components"]["schemas"]
    (union,) = [s for s in schemas["TraceOut"]["properties"]["result"]["anyOf"] if s.get("type") != "null"]
    assert union["discriminator"]["propertyName"] == "estimator"
    variants = {e: ref.rsplit("/", 1)[1] for e, ref in union["discriminator"]["mapping"].items()}
    assert variants == {
        "judged": "JudgedTraceJobResultModel",
        "expected": "ExpectedTraceJobResultModel",
        "logprob": "LogprobTraceJobResultModel",
        "both": "BothTraceJobResultModel",
        "proxy": "ProxyTraceResultModel",
    }
    assert sorted(r["$ref"].rsplit("/", 1)[1] for r in union["oneOf"]) == sorted(variants.values())
    for estimator, name in variants.items():
        props, required = schemas[name]["properties"], set(schemas[name]["required"])
        assert props["estimator"]["const"] == estimator and "estimator" in required, name
        assert {"kind", "verdict", "gamma", "layers", "sources", "calls", "usage", "declared"} <= set(props), name
        assert "declared" not in required, name
    assert {"thresholds", "claim_tokens", "claim_token_logprobs", "scorer_model"} <= set(
        schemas[variants["logprob"]]["required"]
    )
    assert {"logprob", "agreement"} <= set(schemas[variants["both"]]["required"])
    assert {"proxy_model", "confirmed", "confirmation", "proxy"} <= set(schemas[variants["proxy"]]["required"])
    trace = schemas[variants["judged"]]["properties"]
    assert not {"logprob", "agreement", "units", "thresholds", "proxy_model", "proxy"} & set(trace)
    assert trace["kind"].get("const", trace["kind"].get("enum", [None])[0]) == "trace"
    assert set(trace["verdict"]["enum"]) == {"internal_knowledge", "redundant", "attributed", "no_information"}
    layer = _component(doc, trace["layers"]["items"])["properties"]
    assert {"layer", "delta", "role", "s_without", "no_information", "alone"} <= set(layer)
    source = _component(doc, trace["sources"]["items"])["properties"]
    assert {"source_id", "delta", "role", "support", "diagnosis"} <= set(source)
    assert {"verdict", "quote", "line_start", "line_end"} <= set(_component(doc, source["support"])["properties"])
    calls = _component(doc, trace["calls"])["properties"]
    assert {"planned", "made", "saved", "cached", "failed", "billed", "unspent"} <= set(calls)

    probe = _properties(doc, "ProbeOut", "result")
    assert {"kind", "verdict", "target_id", "anchors", "baseline", "without", "k", "calls"} <= set(probe)
    assert set(probe["verdict"]["enum"]) == {"required", "not_required", "inconclusive"}
    assert {"planned", "made", "failed"} <= set(_component(doc, probe["calls"])["properties"])

    declared = _properties(doc, "VerifySentenceOut", "declared")
    assert {"outcome", "declared", "credited", "grounding", "explanation"} <= set(declared)
    verify = doc["components"]["schemas"]["VerifyOut"]["properties"]
    assert {"all_grounded", "contradicted", "budget_refused"} <= set(_component(doc, verify["rule"])["enum"])

    quote = _properties(doc, "QuoteOut", "calls")
    assert {"round1", "round2", "redundancy", "spans", "probe"} <= set(quote)
    assert {"can_score", "how", "scoring_calls"} <= set(_properties(doc, "QuoteOut", "scoring"))

    # one job status and one calls block for traces, probes and the verification's traces
    statuses = [schemas[m]["properties"]["status"] for m in ("TraceOut", "ProbeOut")]
    assert all(s == statuses[0] for s in statuses)
    assert set(_component(doc, statuses[0])["enum"]) == {"queued", "running", "succeeded", "failed", "interrupted"}
    refs = {schemas[m]["properties"]["calls"]["$ref"] for m in ("TraceOut", "ProbeOut", "VerifyOut")}
    assert refs == {"#/components/schemas/JobCalls"}


def test_a_real_trace_result_round_trips_through_storage_and_the_api_into_the_typed_model(tmp_path: Path) -> None:
    with InProcessApi(tmp_path, llm_factory=scripted_factory(), warm_up=False) as srv, srv.client(srv.admin_key) as api:
        assert api.post("/v1/turns", json=small_turn()).status_code == 201
        quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0"}).json()
        started = api.post("/v1/traces", json={"quote_id": quote["quote_id"]})
        assert started.status_code == 202, started.text
        trace_id = started.json()["trace_id"]
        done = api.get(f"/v1/traces/{trace_id}", params={"wait": "true"}).json()
        url = srv.settings.effective_database_url

    async def stored() -> dict[str, Any] | None:
        db = Database(url)
        try:
            return (await crud_traces.get_job(db, None, trace_id)).result
        finally:
            await db.dispose()

    row = asyncio.run(stored())
    assert done["status"] == "succeeded", done
    assert row is not None and row["kind"] == "trace"
    # the stored JSON is the model's dump, and the API serves it unchanged
    typed = JOB_RESULT.validate_python(row)
    assert isinstance(typed, JudgedTraceJobResultModel)
    assert typed.model_dump(mode="json") == row == done["result"]
    assert typed.verdict == done["result"]["verdict"] and typed.calls.made == done["calls"]["made"]
    assert typed.declared is not None and typed.declared.outcome in (
        "consistent",
        "conflated",
        "unsupported_citation",
        "none_declared",
    )
    assert [s.source_id for s in typed.sources] == [s["source_id"] for s in done["result"]["sources"]]
    # a judged trace has no log-probability trace or agreement: absent, not null
    assert "logprob" not in done["result"] and "agreement" not in done["result"]


def test_results_stored_by_an_earlier_version_still_validate_and_are_served(tmp_path: Path) -> None:
    with InProcessApi(tmp_path, warm_up=False) as srv:
        key = srv.key("tenant-old", "ann")
        with srv.client(key) as api:
            assert api.post("/v1/turns", json=small_turn()).status_code == 201
            trace_quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0"}).json()
            probe_quote = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0", "probe": True}).json()

            async def store_earlier_results() -> tuple[str, str]:
                db = Database(srv.settings.effective_database_url)
                ids = []
                try:
                    for quote_id, result, kind in (
                        (trace_quote["quote_id"], EARLIER_TRACE_RESULT, "trace"),
                        (probe_quote["quote_id"], EARLIER_PROBE_RESULT, "probe"),
                    ):
                        quote = await crud_traces.get_quote(db, "tenant-old", quote_id)
                        job = await crud_traces.create_job(
                            db,
                            quote,
                            max_cost_usd=None,
                            kind=kind,  # type: ignore[arg-type]
                            source_id="s0" if kind == "probe" else None,
                        )
                        assert await crud_traces.mark_running(db, job.id)
                        audit = ResultAudit(
                            turn_digest="t",
                            claim_digest="c",
                            query_digest="q",
                            corpus_digest="0" * 64,
                            prompt_versions={},
                            params={},
                            model=quote.model,
                            result=result,
                            calls_planned=job.calls_planned,
                            calls_made=6,
                            calls_billed=6,
                            input_tokens=0,
                            output_tokens=0,
                            cost_usd=None,
                        )
                        await crud_traces.finish_succeeded(db, job, audit, Progress(6, 6))
                        ids.append(job.id)
                finally:
                    await db.dispose()
                return ids[0], ids[1]

            trace_id, probe_id = asyncio.run(store_earlier_results())
            trace = api.get(f"/v1/traces/{trace_id}")
            probe = api.get(f"/v1/probes/{probe_id}")

    assert trace.status_code == 200, trace.text
    served = trace.json()["result"]
    assert served["kind"] == "trace" and served["verdict"] == "attributed"
    assert served["layers"][0]["alone"] is None and served["redundancy"] == []
    assert served["calls"]["billed"] == 0 and served["calls"]["unspent"] == 3
    assert served["layers"][1]["delta"] is None  # no information stays null, never a number
    assert "declared" not in served
    # a result stored before token counts could be estimated reads as reported by the provider (not estimated)
    assert served["usage"].pop("estimated") is False
    for key_, value in EARLIER_TRACE_RESULT.items():  # every field of the earlier shape is served unchanged
        assert served[key_] == value or key_ in ("layers", "sources", "calls"), key_
    assert probe.status_code == 200, probe.text
    served_probe = probe.json()["result"]
    assert served_probe["usage"].pop("estimated") is False
    assert served_probe == {"kind": "probe", **EARLIER_PROBE_RESULT}
    # stored without ``kind``, each is told apart by its fields
    assert isinstance(JOB_RESULT.validate_python(EARLIER_TRACE_RESULT), JudgedTraceJobResultModel)
    assert isinstance(JOB_RESULT.validate_python(EARLIER_PROBE_RESULT), ProbeResultModel)


def _judge(request: dict[str, Any]) -> str:
    system = request["messages"][0]["content"]
    if "strict judge of support" in system:
        user = request["messages"][-1]["content"]
        return "5" if "] instructions §" in user else "1"  # any rule of the agent's instructions shown
    return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "nothing"})


def test_the_cli_trace_json_validates_against_the_same_model(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAI(_judge) as srv:
        code = main(
            [
                "trace",
                FIXTURE_A,
                NOTE,
                "--model",
                "openai/fake",
                "--api-base",
                srv.base_url,
                "--api-key",
                "test-key",
                "--yes",
                "--json",
            ]
        )
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    typed = TraceResultModel.model_validate(data)
    assert typed.model_dump(mode="json") == data  # nothing of the printed contract is outside the model
    assert isinstance(JOB_RESULT.validate_python(data), JudgedTraceJobResultModel)  # the service's result type too
    assert typed.calls.made <= typed.calls.planned and typed.layers


def test_a_score_without_information_is_nan_in_memory_null_in_json_and_validates_back() -> None:
    """One score type for every score field: NaN in memory (the estimator does arithmetic on it), null in
    JSON, and validating null gives NaN back; a score that may not have been measured at all validates
    null to None. A result stored without the fields added since reads with their defaults."""
    typed = trace_job_result(EARLIER_TRACE_RESULT)
    unmeasured = typed.layer(Layer.INSTRUCTIONS)
    assert math.isnan(unmeasured.delta) and math.isnan(unmeasured.s_without) and unmeasured.alone is None
    assert typed.sources[0].alone is None and typed.redundancy == () and typed.declared is None
    assert (typed.kind, typed.usage.estimated, typed.calls.billed, typed.calls.refused) == ("trace", False, 0, 0)
    assert typed.layer(Layer.TOOLS).delta - 7.0 == 0.0  # numbers stay numbers

    dumped = typed.model_dump(mode="json")
    assert dumped["layers"][1]["delta"] is None and dumped["layers"][1]["s_without"] is None
    json.dumps(dumped, allow_nan=False)
    assert trace_job_result(dumped).model_dump(mode="json") == dumped

    lost = typed.model_copy(update={"gamma": math.nan, "s_all": math.inf})
    lost_json = lost.model_dump(mode="json")
    assert lost_json["gamma"] is None and lost_json["s_all"] is None
    assert math.isnan(TraceResultModel.model_validate(lost_json).gamma)

    probe = ProbeResultModel.model_validate(EARLIER_PROBE_RESULT)
    assert probe.kind == "probe" and probe.calls.made == 6 and probe.usage.estimated is False


# Trace results as the version before the union stored them (``TraceOutcome.to_model`` with the declared audit,
# ``model_dump(mode="json")``), one per estimator, written by that version from the method tests' standard
# corpus with their scripted judge and scorer: under ``both`` the row says ``estimator`` judged, with
# ``logprob`` and ``agreement`` beside the judged trace.
BEFORE_UNION: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "stored" / "trace_results_before_union.json").read_text("utf-8")
)
VARIANTS: dict[str, type[TraceResultModel]] = {
    "judged": JudgedTraceJobResultModel,
    "expected": ExpectedTraceJobResultModel,
    "logprob": LogprobTraceJobResultModel,
    "both": BothTraceJobResultModel,
    "proxy_confirmed": ProxyTraceResultModel,
    "proxy_fallback": ProxyTraceResultModel,
}


def _without(row: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in keys}


def test_results_stored_before_the_union_load_as_the_variant_of_their_estimator() -> None:
    assert set(BEFORE_UNION) == set(VARIANTS)
    assert BEFORE_UNION["both"]["estimator"] == "judged" and "logprob" in BEFORE_UNION["both"]
    for name, row in BEFORE_UNION.items():
        typed = trace_job_result(row)
        assert type(typed) is VARIANTS[name], name
        assert isinstance(JOB_RESULT.validate_python(row), VARIANTS[name]), name  # as a job result too
        # the same JSON back, except that a both trace now says both
        said = "both" if name == "both" else row["estimator"]
        assert typed.model_dump(mode="json") == {**row, "estimator": said}, name
    both = trace_job_result(BEFORE_UNION["both"])
    assert isinstance(both, BothTraceJobResultModel)
    assert both.logprob.estimator == "logprob" and both.logprob.units == "nats"
    assert both.verdict == both.agreement.judged.verdict and both.declared is not None

    # rows without ``estimator`` (stored before it was written): judged, unless their members say otherwise
    for name, expected in (
        ("judged", JudgedTraceJobResultModel),
        ("both", BothTraceJobResultModel),
        ("proxy_confirmed", ProxyTraceResultModel),
        ("proxy_fallback", ProxyTraceResultModel),
    ):
        typed = trace_job_result(_without(BEFORE_UNION[name], "estimator"))
        assert type(typed) is expected, name
    assert trace_job_result(_without(EARLIER_TRACE_RESULT, "estimator")).estimator == "judged"
    # a proxy row that says judged is read by its members
    proxy_said_judged = {**BEFORE_UNION["proxy_fallback"], "estimator": "judged"}
    assert trace_job_result(proxy_said_judged).estimator == "proxy"
    # a row that names its estimator is not second-guessed: expected stays expected
    assert type(trace_job_result(BEFORE_UNION["expected"])) is ExpectedTraceJobResultModel


def test_each_variant_round_trips_through_its_json() -> None:
    seen: set[str] = set()
    for name, row in BEFORE_UNION.items():
        typed = trace_job_result(row)
        dumped = typed.model_dump(mode="json")
        json.dumps(dumped, allow_nan=False)
        again = trace_job_result(dumped)
        assert type(again) is type(typed) and again.model_dump(mode="json") == dumped, name
        assert trace_job_result(typed) is typed  # a variant is taken as it is
        assert dumped["estimator"] == typed.estimator
        seen.add(typed.estimator)
    assert seen == {"judged", "expected", "logprob", "both", "proxy"}
    # members that were not produced stay absent, not null
    assert not {"logprob", "agreement", "units", "proxy"} & set(trace_job_result(BEFORE_UNION["judged"]).to_dict())
    fallback = trace_job_result(BEFORE_UNION["proxy_fallback"]).to_dict()
    assert fallback["confirmed"] is False and "units" not in fallback and "thresholds" not in fallback


def test_a_variant_without_its_own_fields_is_rejected() -> None:
    logprob = {**BEFORE_UNION["logprob"]}
    del logprob["thresholds"]
    with pytest.raises(ValidationError, match="thresholds"):
        trace_job_result(logprob)
    with pytest.raises(ValidationError, match="agreement"):
        trace_job_result({**_without(BEFORE_UNION["both"], "agreement"), "estimator": "both"})
    with pytest.raises(ValidationError, match="proxy_model"):
        trace_job_result(_without(BEFORE_UNION["proxy_confirmed"], "proxy_model"))
    with pytest.raises(ValidationError, match="estimator"):
        trace_job_result({**BEFORE_UNION["judged"], "estimator": "guess"})


def test_an_earlier_both_result_is_served_as_both_and_rendered_as_its_judged_trace(tmp_path: Path) -> None:
    """Served, a both trace says both; the Markdown export describes its top-level scores as before, as a
    judged trace's (the same lines as the same trace stored under judged)."""
    judged_only = {**_without(BEFORE_UNION["both"], "logprob", "agreement"), "estimator": "judged"}
    with InProcessApi(tmp_path, warm_up=False) as srv, srv.client(srv.key("tenant-old", "ann")) as api:
        assert api.post("/v1/turns", json=small_turn()).status_code == 201
        rows = [BEFORE_UNION["both"], judged_only, BEFORE_UNION["proxy_confirmed"]]
        quoted = [api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0"}).json() for _ in rows]
        stored = _store_results(srv.settings.effective_database_url, [q["quote_id"] for q in quoted], rows)
        both_id, judged_id, proxy_id = asyncio.run(stored)
        served = {i: api.get(f"/v1/traces/{i}").json()["result"] for i in (both_id, judged_id, proxy_id)}
        markdown = {
            i: api.get(f"/v1/traces/{i}/export", params={"format": "markdown"}).text
            for i in (both_id, judged_id, proxy_id)
        }
    assert served[both_id] == {**BEFORE_UNION["both"], "estimator": "both"}
    assert served[judged_id] == judged_only and served[proxy_id] == BEFORE_UNION["proxy_confirmed"]

    def lines(trace_id: str, start: str) -> list[str]:
        return [line for line in markdown[trace_id].splitlines() if line.startswith(start)]

    for start in ("- Estimator:", "**Γ ="):
        assert lines(both_id, start) == lines(judged_id, start) and len(lines(both_id, start)) == 1, start
    assert "points" in lines(both_id, "**Γ =")[0] and "nats" in lines(proxy_id, "**Γ =")[0]
    assert lines(proxy_id, "- Estimator:") != lines(judged_id, "- Estimator:")


async def _store_results(url: str, quote_ids: list[str], results: list[dict[str, Any]]) -> list[str]:
    """Finish one trace job per quote with its result, stored as given (as an earlier version wrote it)."""
    db = Database(url)
    ids = []
    try:
        for quote_id, result in zip(quote_ids, results, strict=True):
            quote = await crud_traces.get_quote(db, "tenant-old", quote_id)
            job = await crud_traces.create_job(db, quote, max_cost_usd=None)
            assert await crud_traces.mark_running(db, job.id)
            audit = ResultAudit(
                turn_digest="t",
                claim_digest="c",
                query_digest="q",
                corpus_digest=result["corpus_digest"],
                prompt_versions=result["prompt_versions"],
                params=result["params"],
                model=result["model"],
                result=result,
                calls_planned=job.calls_planned,
                calls_made=result["calls"]["made"],
                calls_billed=result["calls"]["billed"],
                input_tokens=0,
                output_tokens=0,
                cost_usd=None,
            )
            await crud_traces.finish_succeeded(db, job, audit, Progress(result["calls"]["made"], 0))
            ids.append(job.id)
    finally:
        await db.dispose()
    return ids
