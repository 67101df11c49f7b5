"""FastAPI dependencies: the service's shared objects and the authenticated caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from provenance_api.operations import request_limits
from provenance_api.operations.auth import Principal, authenticate
from provenance_api.operations.services import Services


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


async def get_free_tier_caller(request: Request, caller: Caller) -> Principal:
    """The caller of an endpoint that calls no model, counted against the free tier's request rate
    (429 with Retry-After above ``free_tier_rate_max_requests`` per ``free_tier_rate_window_seconds``)."""
    limiter = getattr(request.app.state, "free_tier_limiter", None)
    if limiter is None:
        limiter = request_limits.free_tier_limiter(get_services(request))
        request.app.state.free_tier_limiter = limiter
    await request_limits.check_free_tier_rate(limiter, caller)
    return caller


FreeTierCaller = Annotated[Principal, Depends(get_free_tier_caller)]
