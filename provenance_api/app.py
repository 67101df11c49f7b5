"""The application factory: ``create_app(settings, llm_factory=None)``.

Startup runs the shipped migrations (``alembic upgrade head``), marks jobs a dead process left
running as ``interrupted``, and on a first start with no keys creates and prints the local admin
key. Shutdown interrupts the jobs still running (recording their billed calls).

The default judge is ``LiteLLMClient``, configured the litellm way: ``OPENAI_API_KEY``,
``OPENAI_API_BASE``, … from the environment, unless ``PROVENANCE_JUDGE_API_BASE`` /
``PROVENANCE_JUDGE_API_KEY`` override them. Tests inject ``llm_factory``.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI

from estimator.llm import LLM

from . import problems
from .auth import announce_admin_key, ensure_admin_key
from .db.session import Database
from .deps import Services
from .jobs import InProcessJobRunner, LLMFactory, ProgressHub, recover_interrupted
from .limits import BodyLimitMiddleware, InProcessLimiter
from .observability import Metrics, RequestContextMiddleware, log_fields
from .routes import health, imports, quotes, traces, turns, ui
from .settings import Settings

log = logging.getLogger("provenance_api.app")

DESCRIPTION = """Point it at a stored turn of an LLM agent and a sentence of that turn's answer, and it tells
you which part of the agent's context caused the sentence. Store a turn, read its free tier (`segments`),
price a trace (`quotes`), then run it (`traces`). Every `/v1` endpoint needs `Authorization: Bearer <key>`;
errors are RFC 9457 `application/problem+json`."""


def _version() -> str:
    try:
        return version("provenance-service")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


def default_llm_factory(settings: Settings) -> LLMFactory:
    key = settings.judge_api_key.get_secret_value() if settings.judge_api_key else None
    timeout = settings.judge_timeout_seconds

    def build(model: str, api_base: str | None) -> LLM:
        from .llm_litellm import LiteLLMClient

        return LiteLLMClient(model, api_base=api_base, api_key=key, timeout=timeout)

    return build


def _warm_up() -> None:
    """Load the tokenizer and litellm (seconds of imports) before the first quote needs them."""
    from . import free_tier
    from .llm_litellm import load_litellm

    free_tier.tokenizer().count("warm up")
    load_litellm()


async def _close_provider_clients() -> None:
    """End litellm's loop-bound background work, if a trace loaded it."""
    if "provenance_api.llm_litellm" in sys.modules:
        from .llm_litellm import aclose_litellm

        await aclose_litellm(close_http_clients=True)


def create_app(settings: Settings | None = None, llm_factory: LLMFactory | None = None) -> FastAPI:
    settings = settings or Settings()
    params = settings.base_params
    services = Services(
        settings=settings,
        db=Database(settings.effective_database_url),
        limiter=InProcessLimiter(params.rate_max_calls, params.rate_window_seconds),
        runner=InProcessJobRunner(settings.max_running_traces),
        hub=ProgressHub(),
        metrics=Metrics(),
        llm_factory=llm_factory or default_llm_factory(settings),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings.ensure_data_dir()
        await services.db.migrate()
        await recover_interrupted(services.db)
        key = await ensure_admin_key(services.db, settings)
        if key is not None:
            announce_admin_key(key, settings.admin_key_file)
        if settings.warm_up:
            threading.Thread(target=_warm_up, name="warm-up", daemon=True).start()
        log_fields(
            log,
            logging.INFO,
            "service started",
            data_dir=str(settings.data_dir),
            rate_max_calls=params.rate_max_calls,
            rate_window_seconds=params.rate_window_seconds,
        )
        try:
            yield
        finally:
            await services.runner.stop()
            await _close_provider_clients()
            await services.db.dispose()
            log_fields(log, logging.INFO, "service stopped")

    app = FastAPI(
        title="Response-provenance service", version=_version(), description=DESCRIPTION, lifespan=lifespan
    )
    app.state.services = services
    problems.install(app)
    for module in (turns, quotes, traces, health, imports):
        app.include_router(module.router)
    ui.install(app)  # the viewer at / (and its session cookie accepted by the API)
    # Outermost last: request id and access log → body limit → guard for unexpected errors → routes.
    app.add_middleware(problems.UnexpectedErrorGuard)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestContextMiddleware, metrics=services.metrics)
    return app
