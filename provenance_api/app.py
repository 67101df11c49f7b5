"""The application factory: ``create_app(settings, llm_factory=None, scorer_factory=None)``.

Startup runs the shipped migrations (``alembic upgrade head``), marks jobs a dead process left
running as ``interrupted``, and on a first start with no keys creates and prints the local admin
key. Shutdown interrupts the jobs still running (recording their billed calls).

The default judge is ``LiteLLMClient``, configured the litellm way: ``OPENAI_API_KEY``,
``OPENAI_API_BASE``, … from the environment, unless ``PROVENANCE_JUDGE_API_BASE`` /
``PROVENANCE_JUDGE_API_KEY`` override them. The default scorer (``estimator: logprob | both``) is a
``CompletionsScorer`` on ``PROVENANCE_SCORER_API_BASE`` (else the judge's base URL) and
``PROVENANCE_SCORER_MODEL``. Tests inject ``llm_factory`` and ``scorer_factory``.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI
from redis.asyncio import Redis

from estimator.llm import LLM
from estimator.scorer import Scorer

from . import problems
from .auth import announce_admin_key, ensure_admin_key
from .db import search_index
from .db.session import Database
from .db_limits import DatabaseLimiter
from .deps import Services
from .errors import InvalidInput
from .job_queue import ArqJobRunner, RedisProgressHub, redis_client, reservation_ttl
from .jobs import InProcessJobRunner, JobRunner, LLMFactory, ProgressHub, ScorerFactory, recover_interrupted
from .limits import BodyLimitMiddleware, Limiter
from .llm_cache import CachingLLM, JudgementCache, RedisJudgementCache, SqliteJudgementCache
from .observability import Metrics, RequestContextMiddleware, log_fields
from .redis_limits import RedisLimiter
from .routes import health, imports, probes, quotes, sources, traces, turns, ui
from .settings import Settings

log = logging.getLogger("provenance_api.app")

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


def default_llm_factory(settings: Settings, cache: JudgementCache | None = None) -> LLMFactory:
    """``LiteLLMClient`` per trace, behind the judgement cache when there is one."""
    key = settings.judge_api_key.get_secret_value() if settings.judge_api_key else None
    timeout = settings.judge_timeout_seconds

    def build(model: str, api_base: str | None) -> LLM:
        from .llm_litellm import LiteLLMClient

        client = LiteLLMClient(model, api_base=api_base, api_key=key, timeout=timeout, disclose_endpoint=False)
        return client if cache is None else CachingLLM(client, cache, api_base=api_base)

    return build


def default_scorer_factory(settings: Settings) -> ScorerFactory:
    """``CompletionsScorer`` per trace on the scoring server (``/v1/completions`` with echo)."""
    key = settings.judge_api_key.get_secret_value() if settings.judge_api_key else None

    def build(model: str) -> Scorer:
        from .scorer_completions import CompletionsScorer

        base = settings.scorer_api_base or settings.judge_api_base
        if not base:
            raise InvalidInput("no scoring server is configured", field="estimator",
                               fix="set PROVENANCE_SCORER_API_BASE, or use estimator judged")
        name = settings.scorer_model or model.split("/", 1)[-1]
        return CompletionsScorer(name, base, key, timeout=max(settings.judge_timeout_seconds, 600.0))

    return build


def judgement_cache(settings: Settings, redis: Redis | None) -> JudgementCache | None:
    """Redis when configured (shared), else a SQLite file in the data directory; None when disabled."""
    if not settings.judgement_cache:
        return None
    ttl = settings.judgement_cache_ttl_seconds
    if redis is not None:
        return RedisJudgementCache(redis, ttl, prefix=settings.redis_prefix)
    return SqliteJudgementCache(settings.owner_only_file("judgements.db"), ttl)


def build_services(settings: Settings, llm_factory: LLMFactory | None = None, *, worker: bool = False,
                   scorer_factory: ScorerFactory | None = None, local_model: bool = False) -> Services:
    """The service's shared objects: embedded (SQLite, in-process limiter, runner and cache) by default,
    Redis-backed limiter, cache, job queue and progress when ``PROVENANCE_REDIS_URL`` is set."""
    params = settings.base_params
    redis = redis_client(settings.redis_url) if settings.redis_url else None
    db = Database(settings.effective_database_url)
    limiter: Limiter
    runner: JobRunner
    hub: ProgressHub
    if redis is not None:
        limiter = RedisLimiter(redis, params.rate_max_calls, params.rate_window_seconds, prefix=settings.redis_prefix)
        runner = ArqJobRunner(settings.redis_url or "", settings.redis_prefix, reservation_ttl(settings))
        hub = RedisProgressHub(redis, settings.redis_prefix)
    else:  # in the database, so a restart remembers what was spent in the window
        limiter = DatabaseLimiter(db, params.rate_max_calls, params.rate_window_seconds)
        runner = InProcessJobRunner(settings.worker_max_jobs if worker else settings.max_running_traces)
        hub = ProgressHub()
    return Services(
        settings=settings,
        db=db,
        limiter=limiter,
        runner=runner,
        hub=hub,
        metrics=Metrics(),
        llm_factory=llm_factory or default_llm_factory(settings, judgement_cache(settings, redis)),
        redis=redis,
        scorer_factory=scorer_factory or default_scorer_factory(settings),
        local_model=local_model,
    )


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


def create_app(settings: Settings | None = None, llm_factory: LLMFactory | None = None,
               scorer_factory: ScorerFactory | None = None, *, local_model: bool = False) -> FastAPI:
    """``local_model``: judge and scorer run in this process, so every model can score."""
    settings = settings or Settings()
    params = settings.base_params
    services = build_services(settings, llm_factory, scorer_factory=scorer_factory, local_model=local_model)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings.ensure_data_dir()
        await services.db.migrate()
        indexed = await search_index.backfill(services.db)  # turns stored before the search index existed
        if indexed:
            log_fields(log, logging.INFO, "search index backfilled", turns=indexed)
        if services.redis is None:  # with Redis, workers run the jobs and reap the dead ones
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
            if isinstance(services.hub, RedisProgressHub):
                await services.hub.close()
            if services.redis is not None:
                await services.redis.aclose()
            await _close_provider_clients()
            await services.db.dispose()
            log_fields(log, logging.INFO, "service stopped")

    app = FastAPI(
        title="Response-provenance service", version=_version(), description=DESCRIPTION, lifespan=lifespan
    )
    app.state.services = services
    problems.install(app)
    for module in (turns, quotes, traces, probes, health, imports, sources):
        app.include_router(module.router)
    ui.install(app)  # the viewer at / (and its session cookie accepted by the API)
    # Outermost last: request id and access log → body limit → guard for unexpected errors → routes.
    app.add_middleware(problems.UnexpectedErrorGuard)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestContextMiddleware, metrics=services.metrics)
    return app
