"""FastAPI dependencies: the service's shared objects and the authenticated caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

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
