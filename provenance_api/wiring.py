"""Wiring: the one place that builds the service's shared objects from its settings.

The HTTP app, the CLI and the queue worker all call ``build_services``, so nothing below it imports the
layers above. The default judge is ``LiteLLMClient``, configured the litellm way: ``OPENAI_API_KEY``,
``OPENAI_API_BASE``, … from the environment, unless ``PROVENANCE_JUDGE_API_BASE`` /
``PROVENANCE_JUDGE_API_KEY`` override them. The default scorer (``estimator: logprob | both``) is a
``CompletionsScorer`` on ``PROVENANCE_SCORER_API_BASE`` (else the judge's base URL) and
``PROVENANCE_SCORER_MODEL``. Tests inject ``llm_factory`` and ``scorer_factory``.
"""

from __future__ import annotations

import logging
import sys
import threading

from arq.worker import Worker
from redis.asyncio import Redis

from estimator.seams.llm import LLM
from estimator.seams.scorer import Scorer
from provenance_api.core.errors import InvalidInput
from provenance_api.core.observability import Metrics, log_fields
from provenance_api.core.settings import Settings
from provenance_api.jobs.queue import ArqJobRunner, RedisProgressHub, build_worker, redis_client, reservation_ttl
from provenance_api.jobs.runner import (
    InProcessJobRunner,
    JobRunner,
    LLMFactory,
    ProgressHub,
    ScorerFactory,
    recover_interrupted,
)
from provenance_api.operations.auth import announce_admin_key, ensure_admin_key
from provenance_api.operations.services import Services
from provenance_api.providers.llm_cache import CachingLLM, JudgementCache
from provenance_api.storage import search_index
from provenance_api.storage.db_limits import DatabaseLimiter
from provenance_api.storage.judgement_cache import judgement_store
from provenance_api.storage.limits import Limiter
from provenance_api.storage.redis_limits import RedisLimiter
from provenance_api.storage.session import Database

log = logging.getLogger("provenance_api.wiring")


def default_llm_factory(settings: Settings, cache: JudgementCache | None = None) -> LLMFactory:
    """``LiteLLMClient`` per trace, behind the judgement cache when there is one."""
    key = settings.judge_api_key.get_secret_value() if settings.judge_api_key else None
    timeout = settings.judge_timeout_seconds
    shared = settings.judgement_cache_shared
    attempts = settings.provider_max_attempts or 4  # the judge's default: up to 3 retries

    def build(model: str, api_base: str | None) -> LLM:
        from provenance_api.providers.llm_litellm import LiteLLMClient

        client = LiteLLMClient(
            model, api_base=api_base, api_key=key, timeout=timeout, disclose_endpoint=False, max_attempts=attempts
        )
        # unscoped here: the trace runner scopes it to the job's tenant (CachingLLM.for_tenant)
        return client if cache is None else CachingLLM(client, cache, api_base=api_base, shared=shared)

    return build


def default_scorer_factory(settings: Settings) -> ScorerFactory:
    """``CompletionsScorer`` per trace on the scoring server (``/v1/completions`` with echo)."""
    key = settings.judge_api_key.get_secret_value() if settings.judge_api_key else None

    def build(model: str) -> Scorer:
        from provenance_api.providers.scorer_completions import CompletionsScorer

        base = settings.scorer_api_base or settings.judge_api_base
        if not base:
            raise InvalidInput(
                "no scoring server is configured",
                field="estimator",
                fix="set PROVENANCE_SCORER_API_BASE, or use estimator judged",
            )
        name = settings.scorer_model or model.split("/", 1)[-1]
        return CompletionsScorer(
            name,
            base,
            key,
            timeout=max(settings.judge_timeout_seconds, 600.0),
            disclose_endpoint=False,
            max_attempts=settings.provider_max_attempts or 3,  # the scoring server's default: up to 2 retries
        )

    return build


def judgement_cache(settings: Settings, redis: Redis | None) -> JudgementCache | None:
    """Redis when configured (shared by every process), else a SQLite file in the data directory; None when
    disabled. Entries are kept per tenant unless ``judgement_cache_shared``."""
    return judgement_store(settings, redis)


def build_services(
    settings: Settings,
    llm_factory: LLMFactory | None = None,
    *,
    worker: bool = False,
    scorer_factory: ScorerFactory | None = None,
    local_model: bool = False,
) -> Services:
    """The service's shared objects: embedded (SQLite, in-process limiter, runner and cache) by default,
    Redis-backed limiter, cache, job queue and progress when ``PROVENANCE_REDIS_URL`` is set."""
    params = settings.base_params
    redis = redis_client(settings.redis_url) if settings.redis_url else None
    db = Database(settings.effective_database_url)
    limiter: Limiter
    runner: JobRunner
    hub: ProgressHub
    if redis is not None:
        limiter = RedisLimiter(
            redis,
            params.rate_max_calls,
            params.rate_window_seconds,
            prefix=settings.redis_prefix,
            max_usd_per_user=settings.budget_usd_per_user,
            max_usd_per_tenant=settings.budget_usd_per_tenant,
        )
        runner = ArqJobRunner(settings.redis_url or "", settings.redis_prefix, reservation_ttl(settings))
        hub = RedisProgressHub(redis, settings.redis_prefix)
    else:  # in the database, so a restart remembers what was spent in the window
        limiter = DatabaseLimiter(
            db,
            params.rate_max_calls,
            params.rate_window_seconds,
            max_usd_per_user=settings.budget_usd_per_user,
            max_usd_per_tenant=settings.budget_usd_per_tenant,
        )
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


def warm_up() -> None:
    """Load the tokenizer and litellm (seconds of imports) before the first quote needs them."""
    from provenance_api.providers import free_tier
    from provenance_api.providers.llm_litellm import load_litellm

    free_tier.tokenizer().count("warm up")
    load_litellm()


async def close_provider_clients() -> None:
    """End litellm's loop-bound background work, if a trace loaded it."""
    if "provenance_api.providers.llm_litellm" in sys.modules:
        from provenance_api.providers.llm_litellm import aclose_litellm

        await aclose_litellm(close_http_clients=True)


def queue_worker(settings: Settings, llm_factory: LLMFactory | None = None) -> Worker:
    """The queue worker (``provenance worker``), its services built here like the API's."""
    return build_worker(
        settings,
        lambda: build_services(settings, llm_factory, worker=True),
        warm_up=warm_up if settings.warm_up and llm_factory is None else None,
    )


async def start_services(services: Services) -> None:
    """Startup: the shipped migrations (``alembic upgrade head``), the database's identity, the search index
    backfill, jobs a dead process left running marked ``interrupted``, and on a first start with no keys the local
    admin key."""
    settings = services.settings
    params = settings.base_params
    settings.ensure_data_dir()
    await services.db.migrate()
    await services.db.establish_identity()  # from here on, a database replaced under the service is noticed
    indexed = await search_index.backfill(services.db)  # turns stored before the search index existed
    if indexed:
        log_fields(log, logging.INFO, "search index backfilled", turns=indexed)
    if services.redis is None:  # with Redis, workers run the jobs and reap the dead ones
        await recover_interrupted(services.db, services.limiter)
    key = await ensure_admin_key(services.db, settings)
    if key is not None:
        announce_admin_key(key, settings.admin_key_file)
    if settings.warm_up:
        threading.Thread(target=warm_up, name="warm-up", daemon=True).start()
    log_fields(
        log,
        logging.INFO,
        "service started",
        data_dir=str(settings.data_dir),
        rate_max_calls=params.rate_max_calls,
        rate_window_seconds=params.rate_window_seconds,
    )


async def stop_services(services: Services) -> None:
    """Shutdown: interrupt the jobs still running (recording their billed calls), then close everything."""
    await services.runner.stop()
    if isinstance(services.hub, RedisProgressHub):
        await services.hub.close()
    if services.redis is not None:
        await services.redis.aclose()
    await close_provider_clients()
    await services.db.dispose()
    log_fields(log, logging.INFO, "service stopped")
