"""The service's shared objects, as every operation receives them (built by ``provenance_api.wiring``)."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from provenance_api.core.observability import Metrics
from provenance_api.core.settings import Settings
from provenance_api.jobs.runner import JobRunner, LLMFactory, ProgressHub, ScorerFactory, TraceContext
from provenance_api.operations import model_policy
from provenance_api.storage.limits import Limiter
from provenance_api.storage.session import Database


@dataclass(frozen=True)
class Services:
    """Everything a request may need, built once per app by ``create_app``."""

    settings: Settings
    db: Database
    limiter: Limiter
    runner: JobRunner
    hub: ProgressHub
    metrics: Metrics
    llm_factory: LLMFactory
    redis: Redis | None = None
    scorer_factory: ScorerFactory | None = None
    local_model: bool = False  # judge and scorer run in this process (``serve --local-model``)

    @property
    def trace_context(self) -> TraceContext:
        return TraceContext(
            db=self.db,
            limiter=self.limiter,
            metrics=self.metrics,
            hub=self.hub,
            llm_factory=self.llm_factory,
            api_base=self.settings.judge_api_base,
            scorer_factory=self.scorer_factory,
            pricing=model_policy.pricing(self.settings),
            otlp=self.settings.otlp_target,
            freshness=self.settings.freshness_policy,
        )
