"""The provenance viewer: the page at ``/``, its assets at ``/static/*``, cookie sign-in, and the few
reads the page needs that ``/v1`` does not offer.

The page is plain HTML, CSS and JavaScript modules shipped in the package (``provenance_api/http/static``,
the modules in ``static/js``): no build step, no CDN, it works offline. Sign-in posts the API key once
(``POST /ui/session``); the key is then kept in an HttpOnly cookie that ``ui_auth`` accepts wherever a
Bearer header is accepted.

Viewer-only reads, tenant-scoped like every ``/v1`` read (another tenant's ids are 404):

- ``GET /ui/api/turns`` — the turn list of ``GET /v1/turns`` (search, filters, sort, total, cursor) with
  each turn's free-tier summary line, question and response excerpt;
- ``GET /ui/api/turns/{turn_id}/sources/{source_id}`` — one source's full text as lines, so a
  verified quote can be shown at its line numbers;
- ``GET /ui/api/turns/{turn_id}/traces`` — the turn's past traces, newest first.

None of these calls a model. They are left out of the OpenAPI schema: they serve this page only.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, FastAPI, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from estimator.corpus.turn import StoredTurn
from estimator.params import Params
from provenance_api.core.errors import NotFound, Unauthorized
from provenance_api.core.schemas import TurnSort, TurnSummary
from provenance_api.http import ui_auth
from provenance_api.http.deps import FreeTierCaller, Svc
from provenance_api.operations import listing, model_policy, records
from provenance_api.operations.auth import (
    authenticate,
    close_viewer_session,
    open_viewer_session,
    rotate_viewer_session,
    session_principal,
)
from provenance_api.operations.tracing import job_calls
from provenance_api.providers import free_tier

router = APIRouter(include_in_schema=False)

TurnId = Annotated[str, PathParam(min_length=1, max_length=256)]
SourceId = Annotated[str, PathParam(min_length=1, max_length=32)]

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
_ASSET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.(html|js|css|svg|png)$")
_FOLDERS = ("", "js")  # static/ itself and its JavaScript modules; static/vendor is served by api_docs
MAX_TRACES_LISTED = 100
EXCERPT_CHARS = 160


# --------------------------------------------------------------------------- the page and its assets


@lru_cache(maxsize=64)
def _asset(name: str, folder: str = "") -> tuple[bytes, str, str] | None:
    """(content, media type, ETag) of a shipped asset in ``static/`` or one of its folders, or None."""
    if folder not in _FOLDERS or not _ASSET_NAME.match(name):
        return None
    base = resources.files("provenance_api.http").joinpath("static")
    path = base.joinpath(folder, name) if folder else base.joinpath(name)
    if not path.is_file():
        return None
    content = path.read_bytes()
    suffix = name[name.rfind(".") :]
    etag = '"' + hashlib.sha256(content).hexdigest()[:32] + '"'
    return content, _MEDIA_TYPES[suffix], etag


def _serve(request: Request, name: str, folder: str = "") -> Response:
    asset = _asset(name, folder)
    if asset is None:
        raise NotFound(f"no asset {name!r}", field="path", fix="open / for the viewer")
    content, media_type, etag = asset
    headers = {**SECURITY_HEADERS, "ETag": etag, "Cache-Control": "no-cache"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(content, media_type=media_type, headers=headers)


@router.get("/")
async def index(request: Request) -> Response:
    return _serve(request, "index.html")


@router.get("/static/{name}")
async def static_asset(request: Request, name: str) -> Response:
    return _serve(request, name)


@router.get("/static/js/{name}")
async def static_module(request: Request, name: str) -> Response:
    """One of the page's JavaScript modules (``<script type="module">`` and its imports, same origin)."""
    return _serve(request, name, "js")


@router.get("/favicon.ico")
async def favicon(request: Request) -> Response:
    return _serve(request, "favicon.svg")


# --------------------------------------------------------------------------- sign-in


class SignIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    api_key: str = Field(min_length=1, max_length=512)


def _no_store(response: Response) -> Response:
    response.headers["Cache-Control"] = "no-store"
    return response


def _session_body(tenant: str, user: str, admin: bool, svc: Svc) -> dict[str, Any]:
    settings = svc.settings
    return {
        "signed_in": True,
        "tenant": tenant,
        "user": user,
        "admin": admin,
        "default_model": settings.default_model or free_tier.FALLBACK_MODEL,
        # the judge models this tenant may choose (the default first): the cost gate offers these alone
        "allowed_models": list(model_policy.allowed_models(settings, tenant)),
    }


@router.get("/ui/session")
async def session_state(request: Request, svc: Svc) -> Response:
    """Who the cookie (or header) signs in as; ``signed_in: false`` (not a 401) when nobody, so the
    page can ask for a key without an error. A cookie token older than the rotation age is replaced."""
    try:
        token = ui_auth.cookie_token(request)
        if token is None:
            header = request.headers.get("authorization")
            if not header:
                return _no_store(JSONResponse({"signed_in": False}))
            caller = await authenticate(svc.db, header)
            return _no_store(JSONResponse(_session_body(caller.tenant, caller.user, caller.admin, svc)))
        caller, record = await session_principal(svc.db, token)
    except Unauthorized:
        response = _no_store(JSONResponse({"signed_in": False}))
        ui_auth.clear_session(response, request)
        return response
    response = _no_store(JSONResponse(_session_body(caller.tenant, caller.user, caller.admin, svc)))
    age = (_now() - record.rotated_at).total_seconds()
    if age >= svc.settings.viewer_session_rotate_seconds:
        fresh = await rotate_viewer_session(svc.db, token)
        if fresh is not None:
            left = int((record.expires_at - _now()).total_seconds())
            ui_auth.set_session(response, request, fresh, max(1, left))
    return response


@router.post("/ui/session")
async def sign_in(request: Request, svc: Svc, body: SignIn) -> Response:
    """Check the key once and open a server-side session; the cookie holds the session's random token,
    never the key. The key is taken from the body only. An earlier session of this browser is closed."""
    if not ui_auth.same_origin(request):
        raise ui_auth.CrossSiteRequest("sign in from this service's own page", field="Origin")
    key = body.api_key.strip()
    caller = await authenticate(svc.db, f"Bearer {key}")
    earlier = ui_auth.session_token(request)
    if earlier is not None:
        await close_viewer_session(svc.db, earlier)
    ttl = svc.settings.viewer_session_seconds
    token = await open_viewer_session(svc.db, caller, ttl)
    response = _no_store(JSONResponse(_session_body(caller.tenant, caller.user, caller.admin, svc)))
    ui_auth.set_session(response, request, token, ttl)
    return response


@router.post("/ui/logout")
async def sign_out(request: Request, svc: Svc) -> Response:
    """End the session server-side (its token stops working everywhere) and clear the cookie."""
    if not ui_auth.same_origin(request):
        raise ui_auth.CrossSiteRequest("sign out from this service's own page", field="Origin")
    token = ui_auth.session_token(request)
    if token is not None:
        await close_viewer_session(svc.db, token)
    response = _no_store(JSONResponse({"signed_in": False}))
    ui_auth.clear_session(response, request)
    return response


# --------------------------------------------------------------------------- turns list


class _Memo:
    """A small LRU memo of per-turn-content facts (keyed by the turn's digest and the params)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.items: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()
        self.lock = threading.Lock()  # filled from worker threads

    def get(self, key: tuple[str, str]) -> tuple[str, str] | None:
        with self.lock:
            value = self.items.get(key)
            if value is not None:
                self.items.move_to_end(key)
            return value

    def put(self, key: tuple[str, str], value: tuple[str, str]) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)


_MEMO = _Memo()


def _summary_line(turn: StoredTurn, digest: str, params: Params) -> str:
    """The turn's free-tier summary line, computed once per content."""
    key = (digest, params.model_dump_json())
    found = _MEMO.get(key)
    if found is None:
        found = (free_tier.gate_view(turn, params).report.summary.line(), "")
        _MEMO.put(key, found)
    return found[0]


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1].rstrip() + "…"


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _turn_item(record: records.TurnRecord, summary: str, listed: TurnSummary) -> dict[str, Any]:
    turn = record.turn
    return {
        "turn_id": turn.turn_id,
        "agent": turn.agent,
        "model": turn.model,
        "created_at": _iso(turn.created_at),
        "stored_at": _iso(record.stored_at),
        "summary": summary,
        "query": _excerpt(turn.effective_query()),
        "excerpt": _excerpt(turn.response),
        "traceable": listed.traceable,
        "traces": listed.traces,
    }


def _unreadable_item(row: TurnSummary, exc: Exception) -> dict[str, Any]:
    return {
        "turn_id": row.turn_id,
        "agent": row.agent,
        "model": row.model,
        "created_at": _iso(row.created_at),
        "stored_at": _iso(row.stored_at),
        "summary": f"cannot be read ({type(exc).__name__}): delete and store it again",
        "query": "",
        "excerpt": "",
        "unreadable": True,
        "traceable": row.traceable,
        "traces": row.traces,
    }


@router.get("/ui/api/turns")
async def ui_turns(
    svc: Svc,
    caller: FreeTierCaller,  # deps.get_principal accepts the session cookie here (ui_auth.accept_cookie)
    q: Annotated[str, Query(max_length=200)] = "",
    model: Annotated[str | None, Query(max_length=256)] = None,
    agent: Annotated[str | None, Query(max_length=256)] = None,
    since: Annotated[datetime | None, Query()] = None,
    until: Annotated[datetime | None, Query()] = None,
    min_traceable: Annotated[int | None, Query(ge=0, le=100_000)] = None,
    sort: Annotated[TurnSort, Query()] = "-stored_at",
    limit: Annotated[int, Query(ge=1, le=100)] = 25,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> Response:
    """``GET /v1/turns`` (the same search, filters, sort, total and cursor) with what the page shows of each
    turn: the free-tier summary line, the question and the start of the response. A turn that cannot be read
    or rendered is listed, flagged, never a 500."""
    params = svc.settings.base_params
    query = listing.TurnQuery(
        q=q, model=model, agent=agent, since=since, until=until, min_traceable=min_traceable, sort=sort
    )
    page = await listing.turn_list(svc, caller, query, limit, cursor)
    items: list[dict[str, Any]] = []
    for row in page.items:
        try:
            record = await records.get_turn(svc, caller, row.turn_id)
            line = await anyio.to_thread.run_sync(_summary_line, record.turn, record.digest, params)
        except (ValueError, RecursionError) as exc:
            items.append(_unreadable_item(row, exc))
            continue
        items.append(_turn_item(record, line, row))
    return _no_store(JSONResponse({"items": items, "total": page.total, "next_cursor": page.next_cursor}))


# --------------------------------------------------------------------------- one source's text


def _source_view(turn: StoredTurn, params: Params, source_id: str) -> dict[str, Any] | None:
    corpus = free_tier.corpus_for(turn, params)
    try:
        unit = corpus.by_id(source_id)
    except KeyError:
        return None
    return {
        "id": unit.id,
        "layer": unit.layer.value,
        "kind": unit.kind,
        "tool": unit.tool,
        "label": unit.label,
        "tokens": unit.evidence.tokens,
        "unversioned": unit.unversioned,
        "turns_ago": unit.turns_ago,
        "header": unit.header,  # the call or role line shown above the text to the model; not numbered
        "lines": unit.lines,
    }


@router.get("/ui/api/turns/{turn_id}/sources/{source_id}")
async def ui_source(svc: Svc, caller: FreeTierCaller, turn_id: TurnId, source_id: SourceId) -> Response:
    """A source's full, untruncated text split into lines (numbered from 1, as quotes are)."""
    record = await records.get_turn(svc, caller, turn_id)
    view = await anyio.to_thread.run_sync(_source_view, record.turn, svc.settings.base_params, source_id)
    if view is None:
        raise NotFound(
            f"turn {turn_id!r} has no source {source_id!r}",
            field="source_id",
            fix=f"list the turn's sources with GET /v1/turns/{turn_id}/sources",
        )
    return _no_store(JSONResponse(view))


# --------------------------------------------------------------------------- past traces of a turn


def _trace_summary(job: records.JobRecord) -> dict[str, Any]:
    result = job.result if job.status == "succeeded" else None
    return {
        "trace_id": job.id,
        "status": job.status,
        "claim": job.claim,
        "segment_id": job.segment_id,
        "model": job.model,
        "created_at": _iso(job.created_at),
        "finished_at": _iso(job.finished_at),
        "calls": job_calls(job).model_dump(),
        "reason": job.reason,
        "verdict": None if result is None else result.get("verdict"),
        "verdict_text": None if result is None else result.get("verdict_text"),
    }


@router.get("/ui/api/turns/{turn_id}/traces")
async def ui_turn_traces(svc: Svc, caller: FreeTierCaller, turn_id: TurnId) -> Response:
    """The turn's traces (this tenant's only), newest first, with their verdicts when they succeeded."""
    jobs = await records.traces_of_turn(svc, caller, turn_id, MAX_TRACES_LISTED)
    return _no_store(JSONResponse({"turn_id": turn_id, "items": [_trace_summary(j) for j in jobs]}))


def install(app: FastAPI) -> None:
    """Serve the viewer and let the API accept its session cookie as well as a Bearer header."""
    app.include_router(router)
    ui_auth.accept_cookie(app)
