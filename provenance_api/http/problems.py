"""The one mapping from errors to HTTP: RFC 9457 ``application/problem+json``.

Everything funnels into ``problem_response``: a ``ProvenanceError`` as it is; a request that
fails validation as ``InvalidInput`` naming the offending field (``body.sentence``,
``query.limit``) and how to fix it; routing errors (404/405) as their hierarchy members; any
other exception as a bare 500 with the request id — never a stack trace, an exception message
or a secret.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from provenance_api.core.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    ProvenanceError,
    Unauthorized,
)
from provenance_api.core.observability import log_fields, request_id_var
from provenance_api.http.api_errors import Gone, MethodNotAllowed
from provenance_api.storage.errors import (
    RecordConflict,
    RecordExpired,
    RecordInvalid,
    RecordMissing,
    RecordUnreadable,
    StorageError,
    StorageUnavailable,
)

PROBLEM_JSON = "application/problem+json"
log = logging.getLogger("provenance_api.core.errors")


def problem_response(exc: ProvenanceError, instance: str | None = None) -> JSONResponse:
    body = exc.to_problem(instance)
    request_id = request_id_var.get()
    if request_id:
        body.setdefault("request_id", request_id)
    headers = dict(exc.headers())
    if isinstance(exc, Unauthorized):
        headers.setdefault("WWW-Authenticate", 'Bearer realm="provenance"')
    return JSONResponse(body, status_code=exc.status, headers=headers, media_type=PROBLEM_JSON)


# What the caller can do about each storage outcome, by record kind; the one place storage meets HTTP.
_STORAGE_FIXES: dict[tuple[type[StorageError], str], str] = {
    (RecordMissing, "turn"): "store the turn with POST /v1/turns first, or list stored turns with GET /v1/turns",
    (RecordMissing, "quote"): "create one with POST /v1/quotes",
    (RecordMissing, "trace"): "start one with POST /v1/traces",
    (RecordMissing, "probe"): "start one with POST /v1/probes",
    (RecordExpired, "quote"): "request a new quote with POST /v1/quotes",
    (RecordConflict, "quote"): "request a new quote with POST /v1/quotes",
    (RecordConflict, "turn"): "store the changed turn under a new turn_id, or resend the stored content unchanged",
    (RecordInvalid, "turn"): "send valid Unicode: pair every surrogate escape, or replace the character",
    (RecordInvalid, "cursor"): "use next_cursor from the previous page, or start again without a cursor",
    (RecordInvalid, "turn_body"): "trim the turn's largest parts (tool returns, earlier messages) or split the "
    "conversation; the operator sets the limit with PROVENANCE_MAX_BODY_BYTES",
    (RecordUnreadable, "turn"): "delete it with DELETE /v1/turns/{turn_id}, then store it again within the limits",
    (RecordConflict, "trace"): "wait for the trace to end (GET /v1/traces/{job_id}?wait=true), then delete again",
    (RecordConflict, "probe"): "wait for the probe to end (GET /v1/probes/{job_id}?wait=true), then delete again",
    (RecordMissing, "import_batch"): "use the batch_id an import returned (POST /v1/imports); a batch that "
    "created no turn has nothing to delete",
}
_STORAGE_PROBLEMS: dict[type[StorageError], type[ProvenanceError]] = {
    RecordMissing: NotFound,
    RecordExpired: Gone,
    RecordConflict: Conflict,
    RecordInvalid: InvalidInput,
    RecordUnreadable: Conflict,
}


class StorageUnavailableProblem(ProvenanceError):
    """The database cannot durably take the request's data now (disk full, damaged, replaced, unreachable…):
    a 503 naming the cause, with ``Retry-After`` when waiting may help."""

    status = 503
    type_slug = "storage-unavailable"
    title = "Storage unavailable"

    def __init__(self, detail: str, *, cause: str, retry_after: float | None, fix: str) -> None:
        extra: dict[str, Any] = {"cause": cause}
        if retry_after is not None:
            extra["retry_after"] = int(retry_after)
        super().__init__(detail, fix=fix, extra=extra)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {} if self.retry_after is None else {"Retry-After": str(max(1, int(self.retry_after)))}


_RESTART = "; until then no write is taken, so nothing is acknowledged that a restart would lose"
# What a caller and the operator can do about each cause of StorageUnavailable (never a path or a host).
_UNAVAILABLE_FIXES: dict[str, str] = {
    "disk-full": "retry later; the operator must free space on the disk holding the service's database",
    "io-error": "retry later; if it persists the operator must check the disk holding the service's database",
    "corrupt": "the operator must restore the service's database from a backup and restart the service" + _RESTART,
    "not-a-database": "the operator must restore the service's database from a backup and restart the service"
    + _RESTART,
    "read-only": "retry later; the operator must make the service's database writable again (file, directory, "
    "mount or primary server)",
    "missing": "retry later; the operator must put the service's database file back in its data directory",
    "replaced": "the operator must put the service's own database back and restart the service" + _RESTART,
    "wal-lost": "the operator must restart the service (what the removed log held was copied into the database)"
    + _RESTART,
    "busy": "retry after the Retry-After seconds",
    "unreachable": "retry later; the operator must check that the database server is up and reachable",
}


def storage_problem(exc: StorageError) -> ProvenanceError:
    """A storage outcome as the problem a caller sees: 404, 410, 409, 422 or 503, with what to do about it."""
    if isinstance(exc, StorageUnavailable):
        return StorageUnavailableProblem(
            exc.detail,
            cause=exc.cause,
            retry_after=exc.retry_after,
            fix=_UNAVAILABLE_FIXES.get(exc.cause, "retry later"),
        )
    problem = _STORAGE_PROBLEMS.get(type(exc), ProvenanceError)
    fix = _STORAGE_FIXES.get((type(exc), exc.record))
    if fix is not None:  # a fix may name the record: {turn_id}, {job_id} from the error's extra members
        for key in ("turn_id", "job_id"):
            if isinstance(exc.extra.get(key), str):
                fix = fix.replace(
                    "{" + key + "}", quote(exc.extra[key], safe="") if key == "turn_id" else exc.extra[key]
                )
    return problem(exc.detail, field=exc.field, fix=fix, extra=exc.extra or None)


def _field(loc: Any) -> str:
    return ".".join(str(p) for p in loc) or "body"


def validation_problem(exc: RequestValidationError) -> InvalidInput:
    errors = list(exc.errors())
    first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request", "type": "value_error"}
    where = _field(first.get("loc", ()))
    kind = str(first.get("type", ""))
    if kind == "json_invalid":
        fix = "send a valid JSON body with Content-Type: application/json"
    elif kind == "missing":
        fix = f"add the required field {where}"
    elif kind == "extra_forbidden":
        fix = f"remove the unknown field {where}"
    else:
        fix = f"correct {where}: {first.get('msg', '')}".rstrip(": ")
    details = [
        {"field": _field(e.get("loc", ())), "message": str(e.get("msg", "")), "type": str(e.get("type", ""))}
        for e in errors[:20]
    ]
    return InvalidInput(
        f"{where}: {first.get('msg', 'invalid value')}", field=where, fix=fix, extra={"errors": details}
    )


def http_problem(exc: StarletteHTTPException) -> ProvenanceError:
    if exc.status_code == 404:
        return NotFound("no such endpoint", fix="see /docs for the endpoints of this service")
    if exc.status_code == 405:
        return MethodNotAllowed("this endpoint does not accept that method", fix="see /docs")
    if exc.status_code == 413:
        return PayloadTooLarge(str(exc.detail))
    if exc.status_code == 401:
        return Unauthorized(str(exc.detail))
    if exc.status_code in (400, 422):
        return InvalidInput(
            "the request body could not be read as JSON",
            field="body",
            fix="send a UTF-8 JSON body with Content-Type: application/json",
        )
    return ProvenanceError()


async def _on_provenance_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProvenanceError)
    return problem_response(exc, request.url.path)


async def _on_storage_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StorageError)
    if isinstance(exc, StorageUnavailable):
        log_fields(log, logging.ERROR, "storage unavailable", cause=exc.cause, path=request.url.path)
    return problem_response(storage_problem(exc), request.url.path)


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return problem_response(validation_problem(exc), request.url.path)


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    return problem_response(http_problem(exc), request.url.path)


def install(app: FastAPI) -> None:
    """Register the handlers and the guard for unexpected exceptions."""
    app.add_exception_handler(ProvenanceError, _on_provenance_error)
    app.add_exception_handler(StorageError, _on_storage_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)


class UnexpectedErrorGuard:
    """Innermost safety net: an exception nothing handled becomes a bare 500 problem. It is logged
    by type only — no message, no traceback — and not re-raised, so no server logs one either."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = [False]

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                started[0] = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            log_fields(
                log,
                logging.ERROR,
                "unhandled error while serving a request",
                error=type(exc).__name__,
                path=scope.get("path"),
                response_started=started[0],
            )
            if started[0]:
                return
            internal = ProvenanceError(
                "the service failed while handling this request; it has been logged with the request id",
                fix="retry later; report the request id if it persists",
            )
            await problem_response(internal, scope.get("path"))(scope, receive, send)
