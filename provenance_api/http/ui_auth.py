"""Cookie sign-in for the viewer: a server-side session whose random token rides in an HttpOnly cookie.

The viewer's sign-in (``POST /ui/session``) checks the API key once and opens a session in the database;
the ``HttpOnly``, ``SameSite=Strict`` cookie holds only the session's random token (never the key), so page
scripts never hold a credential and none appears in a URL. Sessions are short-lived
(``PROVENANCE_VIEWER_SESSION_SECONDS``), their token is rotated when older than
``PROVENANCE_VIEWER_SESSION_ROTATE_SECONDS`` (on the page's session check), signing out deletes the session
server-side, and revoking the key ends every session opened with it. Every request the page makes —
including ``EventSource``, which cannot send headers — carries the cookie instead of ``Authorization``; an
explicit ``Authorization`` header always wins.

A cookie is sent by the browser on its own, so a request authenticated by it must come from this
origin: an unsafe method (POST, …) whose ``Origin`` or ``Sec-Fetch-Site`` says another site sent it
is refused (403), in addition to ``SameSite=Strict``.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, FastAPI, Request, Response

from provenance_api.core.errors import ProvenanceError
from provenance_api.operations.auth import Principal, authenticate, session_principal
from provenance_api.operations.services import Services

COOKIE_NAME = "provenance_session"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class CrossSiteRequest(ProvenanceError):
    """A cookie-authenticated request that another site made the browser send."""

    status = 403
    type_slug = "cross-site-request"
    title = "Forbidden"


def same_origin(request: Request) -> bool:
    """Whether the browser says this request comes from the page's own origin (or does not say)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return origin != "null" and urlsplit(origin).netloc.lower() == host.lower()


def session_token(request: Request) -> str | None:
    """The viewer session token held in the cookie, if any."""
    value = request.cookies.get(COOKIE_NAME)
    return value.strip() or None if value else None


def cookie_token(request: Request) -> str | None:
    """The session token when the request is signed in by cookie (no ``Authorization`` header). Raises
    CrossSiteRequest for a cookie on a cross-site unsafe request."""
    if request.headers.get("authorization"):
        return None
    token = session_token(request)
    if token is not None and request.method.upper() not in SAFE_METHODS and not same_origin(request):
        raise CrossSiteRequest(
            "a request signed in by cookie must come from this service's own page",
            field="Origin",
            fix="send 'Authorization: Bearer <key>' from other origins",
        )
    return token


async def get_principal(request: Request) -> Principal:
    """The caller, authenticated by the ``Authorization`` header or the viewer's session cookie."""
    services: Services = request.app.state.services
    db = services.db
    token = cookie_token(request)
    if token is None:
        return await authenticate(db, request.headers.get("authorization"))
    principal, _ = await session_principal(db, token)
    return principal


CookieOrBearer = Annotated[Principal, Depends(get_principal)]


def set_session(response: Response, request: Request, token: str, max_age: int) -> None:
    response.set_cookie(
        COOKIE_NAME,
        token,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_session(response: Response, request: Request) -> None:
    response.delete_cookie(
        COOKIE_NAME, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https"
    )


def accept_cookie(app: FastAPI) -> None:
    """Make every route that depends on ``deps.get_principal`` accept the session cookie too.

    Uses FastAPI's dependency-override hook, so the routes and their OpenAPI (Bearer) stay as they
    are. Not needed once ``deps.get_principal`` reads ``ui_auth.authorization(request)`` itself."""
    from provenance_api.http.deps import get_principal as bearer_principal  # here: deps may import this module

    app.dependency_overrides.setdefault(bearer_principal, get_principal)
