"""The application factory: ``create_app(settings, llm_factory=None, scorer_factory=None)``.

Startup runs the shipped migrations (``alembic upgrade head``), marks jobs a dead process left
running as ``interrupted``, and on a first start with no keys creates and prints the local admin
key. Shutdown interrupts the jobs still running (recording their billed calls).

The shared objects are built by ``provenance_api.wiring.build_services``; tests inject ``llm_factory``
and ``scorer_factory``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI

from provenance_api.core.observability import RequestContextMiddleware
from provenance_api.core.settings import Settings
from provenance_api.http import api_docs, problems
from provenance_api.http.body_limit import BodyLimitMiddleware
from provenance_api.http.routes import audit, glossary, health, imports, probes, quotes, sources, traces, turns, ui
from provenance_api.http.routes import calls as trace_calls
from provenance_api.http.routes import incidents as incident_routes
from provenance_api.http.strict_json import StrictJsonMiddleware
from provenance_api.jobs.runner import LLMFactory, ScorerFactory
from provenance_api.wiring import build_services, start_services, stop_services

log = logging.getLogger("provenance_api.http.app")

DESCRIPTION = """Point it at a stored turn of an LLM agent and a sentence of that turn's answer, and it tells
you which part of the agent's context caused the sentence. Store a turn, read its free tier (`segments`),
price a trace (`quotes`), then run it (`traces`); probe a source (`probes`); gate a whole answer
(`turns/{id}/verify`). Every `/v1` endpoint needs `Authorization: Bearer <key>`;
errors are RFC 9457 `application/problem+json`."""


def _version() -> str:
    try:
        return version("provenance-service")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


def create_app(
    settings: Settings | None = None,
    llm_factory: LLMFactory | None = None,
    scorer_factory: ScorerFactory | None = None,
    *,
    local_model: bool = False,
) -> FastAPI:
    """``local_model``: judge and scorer run in this process, so every model can score."""
    settings = settings or Settings()
    services = build_services(settings, llm_factory, scorer_factory=scorer_factory, local_model=local_model)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await start_services(services)
        try:
            yield
        finally:
            await stop_services(services)

    app = FastAPI(
        title="Response-provenance service",
        version=_version(),
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,  # served from packaged assets by api_docs (no CDN)
    )
    app.state.services = services
    problems.install(app)
    app.include_router(incident_routes.router)  # GET /v1/turns/{id}/incident: before turns' /{turn_id:path} catch-all
    for module in (turns, quotes, traces, probes, health, imports, sources):
        app.include_router(module.router)
    app.include_router(glossary.router)  # GET /v1/glossary: what each number means
    app.include_router(api_docs.router)  # /docs and /redoc, offline
    app.include_router(trace_calls.router)  # GET /v1/traces/{id}/calls: each model call of a trace
    app.include_router(audit.router)  # GET /v1/admin/audit/verify: walk a tenant's custody log (admin key)
    ui.install(app)  # the viewer at / (and its session cookie accepted by the API)
    # Outermost last: request id and access log → body limit → strict JSON (no NaN or Infinity) → guard for
    # unexpected errors → routes.
    app.add_middleware(problems.UnexpectedErrorGuard)
    app.add_middleware(StrictJsonMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestContextMiddleware, metrics=services.metrics)
    return app
