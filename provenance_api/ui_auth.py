"""Cookie sign-in for the viewer: the API key kept in an HttpOnly cookie, accepted like a Bearer header.

The viewer's sign-in (``POST /ui/session``) checks the key and stores it in an ``HttpOnly``,
``SameSite=Strict`` cookie, so page scripts never hold it and it never appears in a URL. Every
request the page then makes — including ``EventSource``, which cannot send headers — carries the
cookie instead of ``Authorization``. ``authorization()`` turns either into the one credential the
service's ``authenticate`` reads; an explicit ``Authorization`` header always wins.

A cookie is sent by the browser on its own, so a request authenticated by it must come from this
origin: an unsafe method (POST, …) whose ``Origin`` or ``Sec-Fetch-Site`` says another site sent it
is refused (403), in addition to ``SameSite=Strict``.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, FastAPI, Request, Response

from .auth import Principal, authenticate
from .db.session import Database
from .errors import ProvenanceError

COOKIE_NAME = "provenance_session"
COOKIE_MAX_AGE = 8 * 3600
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


def session_key(request: Request) -> str | None:
    """The API key held in the session cookie, if any."""
    value = request.cookies.get(COOKIE_NAME)
    return value.strip() or None if value else None


def authorization(request: Request) -> str | None:
    """The request's credential as an ``Authorization`` value: the header when sent, else the session
    cookie as ``Bearer <key>``. Raises CrossSiteRequest for a cookie on a cross-site unsafe request."""
    header = request.headers.get("authorization")
    if header:
        return header
    key = session_key(request)
    if key is None:
        return None
    if request.method.upper() not in SAFE_METHODS and not same_origin(request):
        raise CrossSiteRequest(
            "a request signed in by cookie must come from this service's own page",
            field="Origin",
            fix="send 'Authorization: Bearer <key>' from other origins",
        )
    return f"Bearer {key}"


async def get_principal(request: Request) -> Principal:
    """The caller, authenticated by the ``Authorization`` header or the viewer's session cookie."""
    db: Database = request.app.state.services.db
    return await authenticate(db, authorization(request))


CookieOrBearer = Annotated[Principal, Depends(get_principal)]


def set_session(response: Response, request: Request, key: str) -> None:
    response.set_cookie(
        COOKIE_NAME,
        key,
        max_age=COOKIE_MAX_AGE,
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
    from .deps import get_principal as bearer_principal  # here: deps may import this module

    app.dependency_overrides.setdefault(bearer_principal, get_principal)
