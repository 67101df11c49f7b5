"""Observability: structured JSON logs with request and trace ids, and Prometheus metrics.

Every log line is one JSON object with ``request_id`` (from ``X-Request-ID`` or generated) and
``trace_id`` (the trace job a line belongs to) when they are known. Messages pass through the
same secret scrubbing as problem details, and values of credential-named environment variables
(``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``) are replaced wherever they appear, so
provider keys never reach a log. Tracebacks are never written.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from estimator.seams.llm import Usage
from provenance_api.core.errors import scrub_secrets

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
trace_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("trace_id", default=None)

_SECRET_ENV = re.compile(r"(?i)(api_?key|token|secret|password)")
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"})


def method_label(method: str) -> str:
    """The metric and log label of a request method: one of the standard methods, else ``OTHER``. A client
    chooses the method string, so taking it as a label would let anyone grow the label set without bound."""
    return method if method in HTTP_METHODS else "OTHER"


_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def _env_secrets() -> list[str]:
    return [v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= 8]


def redact(text: str) -> str:
    return scrub_secrets(text, _env_secrets())


class JsonFormatter(logging.Formatter):
    """One JSON object per line; never a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact(record.getMessage()),
        }
        for key, var in (("request_id", request_id_var), ("trace_id", trace_id_var)):
            value = var.get()
            if value:
                entry[key] = value
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                entry.setdefault(key, redact(value) if isinstance(value, str) else value)
        if record.exc_info and record.exc_info[1] is not None:
            entry["error"] = type(record.exc_info[1]).__name__
        return json.dumps(entry, ensure_ascii=False, default=str)


class _PlainFormatter(JsonFormatter):
    def format(self, record: logging.LogRecord) -> str:
        data = json.loads(super().format(record))
        extras = " ".join(f"{k}={v}" for k, v in data.items() if k not in {"ts", "level", "logger", "msg"})
        return f"{data['ts']} {data['level']:<7} {data['msg']}" + (f"  [{extras}]" if extras else "")


def configure_logging(level: str = "INFO", *, json_lines: bool = True) -> None:
    """Route every logger (uvicorn's, alembic's, litellm's) to one stderr handler."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else _PlainFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "alembic", "LiteLLM", "httpx"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)  # our middleware logs each request
    for noisy in ("httpx", "LiteLLM", "aiosqlite"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def log_fields(logger: logging.Logger, level: int, msg: str, **fields: Any) -> None:
    logger.log(level, msg, extra={"fields": fields})


class Metrics:
    """The service's Prometheus metrics, in a registry of its own (one per app)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "provenance_http_requests_total",
            "HTTP requests by route and status",
            ["method", "route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "provenance_http_request_seconds", "HTTP request duration", ["method", "route"], registry=r
        )
        self.traces = Counter("provenance_traces_total", "Trace jobs by outcome", ["outcome"], registry=r)
        self.traces_running = Gauge("provenance_traces_running", "Trace jobs running now", registry=r)
        self.model_calls = Counter(
            "provenance_model_calls_total",
            "Model calls by outcome (answered, failed, failed_billed)",
            ["outcome"],
            registry=r,
        )
        self.tokens = Counter("provenance_model_tokens_total", "Model tokens by direction", ["direction"], registry=r)
        self.cost = Counter(
            "provenance_model_cost_usd_total", "Provider-reported cost of model calls (USD)", registry=r
        )
        self.cache_hits = Counter(
            "provenance_cache_hits_total",
            "Calls avoided or discounted by a cache: memo (per-trace memo) or provider (provider prompt cache)",
            ["kind"],
            registry=r,
        )
        self.budget_refusals = Counter(
            "provenance_budget_refusals_total", "Traces refused by the call budget", registry=r
        )
        for outcome in ("succeeded", "failed", "interrupted"):
            self.traces.labels(outcome)
        for outcome in ("answered", "failed", "failed_billed"):
            self.model_calls.labels(outcome)

    def observe_usage(self, usage: Usage, *, cached: bool) -> None:
        self.tokens.labels("input").inc(usage.input_tokens)
        self.tokens.labels("output").inc(usage.output_tokens)
        self.tokens.labels("cached_input").inc(usage.cached_input_tokens)
        if usage.cost_usd:
            self.cost.inc(usage.cost_usd)
        if cached:
            self.cache_hits.labels("provider").inc()


_access = logging.getLogger("provenance_api.access")


class RequestContextMiddleware:
    """Request id in and out (``X-Request-ID``), one access log line and the request metrics."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = [500]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = list(message.get("headers") or [])
                headers.append((b"x-request-id", request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = scope.get("route")
            template = getattr(route, "path_format", None) or getattr(route, "path", None) or "unmatched"
            method = method_label(str(scope.get("method", "")))
            self.metrics.requests.labels(method, template, str(status[0])).inc()
            self.metrics.latency.labels(method, template).observe(elapsed)
            extra: dict[str, Any] = {}
            trace_id = (scope.get("path_params") or {}).get("trace_id")
            if trace_id:
                extra["trace_id"] = trace_id
            log_fields(
                _access,
                logging.INFO,
                f"{method} {template} {status[0]}",
                method=method,
                route=template,
                status=status[0],
                duration_ms=round(elapsed * 1000, 1),
                **extra,
            )
            request_id_var.reset(token)
