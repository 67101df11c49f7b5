"""OpenTelemetry spans of a finished trace, sent over OTLP/HTTP, following the GenAI semantic conventions.

One span for the trace (``provenance.trace``, or ``provenance.probe``) and, under it, one ``CLIENT`` span per
model call (``chat <model>`` for a judge or span-check call, ``text_completion <model>`` for a scoring call),
each with the call's real start and end. Attributes (beside ``service.name=provenance-service``):

- the trace: ``provenance.trace.id``, ``.kind``, ``.status``, ``.reason``, ``provenance.tenant``,
  ``provenance.turn.id``, ``provenance.claim``, ``provenance.verdict``, ``provenance.estimator``,
  ``provenance.gamma`` (Γ), ``provenance.model``, ``provenance.calls.{planned,made,cached,billed,failed}``,
  ``provenance.cost_usd`` (what was billed), and ``gen_ai.request.model``/``gen_ai.provider.name``;
- each call: ``gen_ai.operation.name``, ``gen_ai.request.model``, ``gen_ai.provider.name`` (and the older
  ``gen_ai.system``), ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``, ``error.type`` when it
  failed, and ``provenance.call.{index,stage,mask,kind,outcome,cached,parsed}``.

Phoenix reads OpenInference attributes, so these are set too: ``openinference.span.kind`` (``CHAIN`` for the
trace, ``LLM`` for a call), ``llm.model_name``, ``llm.provider``, ``llm.token_count.{prompt,completion,total}``.
No prompt or reply text is exported (``GET /v1/traces/{id}/calls`` has them).

Spans go through the SDK's ``BatchSpanProcessor``: ``export`` only builds them in memory and queues them; a
background thread sends batches, and a failed send is logged by the SDK and dropped, never raised. Each
target (URL and headers) has one provider for the process, flushed at exit. This module is imported only when
an endpoint is configured.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from typing import Literal

from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue
from pydantic import BaseModel, ConfigDict

from estimator.ledger import CallRecord
from provenance_api.core.observability import redact
from provenance_api.core.settings import OtlpTarget

__all__ = ["CallSpan", "TraceSpan", "TraceSpanExporter", "call_spans", "exporter_for", "flush_all"]

SERVICE = "provenance-service"
SCOPE = "provenance_api"
EXPORT_TIMEOUT_SECONDS = 5.0  # one send; a dead endpoint delays nothing but the exporter's own thread
IN_FLIGHT_ERROR = "no answer: the trace stopped while this call was in flight"
_PROVIDERS = {  # litellm's provider prefix → the GenAI conventions' gen_ai.provider.name, where they differ
    "azure": "azure.ai.openai",
    "bedrock": "aws.bedrock",
    "gemini": "gcp.gemini",
    "vertex_ai": "gcp.vertex_ai",
    "mistral": "mistral_ai",
    "xai": "x_ai",
}


class TraceSpan(BaseModel):
    """The finished trace (or probe) job, as its span states it."""

    model_config = ConfigDict(frozen=True)

    trace_id: str
    kind: Literal["trace", "probe"] = "trace"
    tenant: str
    turn_id: str
    claim: str
    model: str
    status: str
    reason: str | None = None
    verdict: str | None = None
    estimator: str | None = None
    gamma: float | None = None
    calls_planned: int
    calls_made: int
    calls_cached: int
    calls_billed: int
    calls_failed: int
    cost_usd: float | None = None
    started_at: datetime
    finished_at: datetime


class CallSpan(BaseModel):
    """One model call of the trace, as its span states it."""

    model_config = ConfigDict(frozen=True)

    index: int
    kind: Literal["chat", "score"]
    stage: str
    mask: str
    outcome: Literal["answered", "cached", "failed", "failed_billed", "refused"]
    started_at: datetime
    seconds: float
    input_tokens: int = 0
    output_tokens: int = 0
    parsed: float | None = None
    error: str | None = None


def call_spans(records: Sequence[CallRecord]) -> list[CallSpan]:
    """The ledger's call records as spans' inputs, in the order sent (a call cut off in flight: failed)."""
    out: list[CallSpan] = []
    for record in sorted(records, key=lambda r: r.index):
        in_flight = record.outcome == "sending"
        out.append(
            CallSpan(
                index=record.index,
                kind=record.kind,
                stage=record.stage,
                mask=record.mask,
                outcome="failed" if record.outcome == "sending" else record.outcome,
                started_at=record.started_at,
                seconds=record.seconds,
                input_tokens=record.usage.input_tokens,
                output_tokens=record.usage.output_tokens,
                parsed=record.parsed,
                error=IN_FLIGHT_ERROR if in_flight else record.error,
            )
        )
    return out


def _ns(moment: datetime) -> int:
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    whole = aware.replace(microsecond=0)
    return int(whole.timestamp()) * 1_000_000_000 + aware.microsecond * 1_000


def _model(name: str) -> tuple[str, str]:
    """(gen_ai.provider.name, gen_ai.request.model) of a litellm model name such as ``openai/gpt-4o-mini``."""
    prefix, _, bare = name.partition("/")
    if not bare:
        return "openai", name  # litellm's default provider for a bare name
    return _PROVIDERS.get(prefix, prefix), bare


def _model_attributes(model: str) -> dict[str, AttributeValue]:
    provider, bare = _model(model)
    return {
        "gen_ai.request.model": bare,
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "llm.model_name": bare,
        "llm.provider": provider,
        "llm.system": provider,
    }


def _trace_attributes(trace: TraceSpan) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "openinference.span.kind": "CHAIN",
        "provenance.trace.id": trace.trace_id,
        "provenance.trace.kind": trace.kind,
        "provenance.trace.status": trace.status,
        "provenance.tenant": trace.tenant,
        "provenance.turn.id": trace.turn_id,
        "provenance.claim": trace.claim,
        "provenance.model": trace.model,
        "provenance.calls.planned": trace.calls_planned,
        "provenance.calls.made": trace.calls_made,
        "provenance.calls.cached": trace.calls_cached,
        "provenance.calls.billed": trace.calls_billed,
        "provenance.calls.failed": trace.calls_failed,
        **_model_attributes(trace.model),
    }
    optional: dict[str, AttributeValue | None] = {
        "provenance.trace.reason": trace.reason,
        "provenance.verdict": trace.verdict,
        "provenance.estimator": trace.estimator,
        "provenance.gamma": trace.gamma,
        "provenance.cost_usd": trace.cost_usd,
    }
    attributes.update({key: value for key, value in optional.items() if value is not None})
    return attributes


def _operation(call: CallSpan) -> str:
    return "chat" if call.kind == "chat" else "text_completion"  # scoring: /v1/completions with echoed logprobs


def _call_attributes(call: CallSpan, model: str) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": _operation(call),
        **_model_attributes(model),
        "gen_ai.usage.input_tokens": call.input_tokens,
        "gen_ai.usage.output_tokens": call.output_tokens,
        "openinference.span.kind": "LLM",
        "llm.token_count.prompt": call.input_tokens,
        "llm.token_count.completion": call.output_tokens,
        "llm.token_count.total": call.input_tokens + call.output_tokens,
        "provenance.call.index": call.index,
        "provenance.call.stage": call.stage,
        "provenance.call.mask": call.mask,
        "provenance.call.kind": call.kind,
        "provenance.call.outcome": call.outcome,
        "provenance.call.cached": call.outcome == "cached",
    }
    if call.parsed is not None:
        attributes["provenance.call.parsed"] = call.parsed
    if call.outcome in ("failed", "failed_billed", "refused"):
        attributes["error.type"] = call.outcome
    return attributes


class TraceSpanExporter:
    """One OTLP target's tracer provider: spans built on the caller's thread, sent in batches on the SDK's."""

    def __init__(self, target: OtlpTarget) -> None:
        resource = Resource.create({})
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):  # OTEL_SERVICE_NAME wins
            resource = resource.merge(Resource({SERVICE_NAME: SERVICE}))
        resource = resource.merge(Resource({SERVICE_VERSION: _version()}))
        exporter = OTLPSpanExporter(
            endpoint=target.traces_url, headers=dict(target.headers) or None, timeout=EXPORT_TIMEOUT_SECONDS
        )
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer(SCOPE, _version())

    def export(self, trace: TraceSpan, calls: Sequence[CallSpan]) -> None:
        """Queue the trace's span and its calls' spans (returns at once; the send happens in the background)."""
        ends = [c.started_at + timedelta(seconds=max(0.0, c.seconds)) for c in calls]
        starts = [c.started_at for c in calls]
        start = min([trace.started_at, *starts])
        end = max([trace.finished_at, *ends])
        root = self.tracer.start_span(
            f"provenance.{trace.kind}",
            kind=SpanKind.INTERNAL,
            attributes=_trace_attributes(trace),
            start_time=_ns(start),
        )
        if trace.status == "succeeded":
            root.set_status(Status(StatusCode.OK))
        else:
            root.set_status(Status(StatusCode.ERROR, redact(trace.reason or trace.status)[:300]))
        parent = trace_api.set_span_in_context(root)
        for call, call_end in zip(calls, ends, strict=True):
            span = self.tracer.start_span(
                f"{_operation(call)} {_model(trace.model)[1]}",
                context=parent,
                kind=SpanKind.CLIENT,
                attributes=_call_attributes(call, trace.model),
                start_time=_ns(call.started_at),
            )
            if call.error is not None and call.outcome != "answered":
                span.set_status(Status(StatusCode.ERROR, redact(call.error)[:300]))
            span.end(end_time=_ns(call_end))
        root.end(end_time=_ns(end))

    def flush(self, timeout_seconds: float = 30.0) -> bool:
        """Send what is queued now; True when every span was sent (or dropped after a failed send)."""
        return self.provider.force_flush(int(timeout_seconds * 1000))


_EXPORTERS: dict[OtlpTarget, TraceSpanExporter] = {}
_LOCK = threading.Lock()


def exporter_for(target: OtlpTarget) -> TraceSpanExporter:
    """The process's exporter for ``target`` (built on first use)."""
    with _LOCK:
        found = _EXPORTERS.get(target)
        if found is None:
            found = _EXPORTERS[target] = TraceSpanExporter(target)
        return found


def flush_all(timeout_seconds: float = 30.0) -> bool:
    """Send every exporter's queued spans now (tests; the SDK also flushes at process exit)."""
    with _LOCK:
        exporters = list(_EXPORTERS.values())
    return all(e.flush(timeout_seconds) for e in exporters)


def _version() -> str:
    try:
        return version("provenance-service")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"
