"""FastAPI dependencies: the service's shared objects and the authenticated caller."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from redis.asyncio import Redis

from .auth import Principal, authenticate
from .db.session import Database
from .jobs import JobRunner, LLMFactory, ProgressHub, ScorerFactory, TraceContext
from .limits import Limiter
from .observability import Metrics
from .settings import Settings


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
        )


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key: `provenance keys create --tenant T --user U` prints one.",
)


async def get_principal(
    request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    return await authenticate(get_services(request).db, request.headers.get("authorization"))


Svc = Annotated[Services, Depends(get_services)]
Caller = Annotated[Principal, Depends(get_principal)]
