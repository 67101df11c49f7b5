"""Strict JSON request bodies: ``NaN``, ``Infinity`` and ``-Infinity`` (and a number too large for a float,
which reads as infinity) are not JSON (RFC 8259), so a body holding one is refused with 422 naming the field.

Python's ``json`` accepts them and a stored value would come back as ``null`` — silently changed. The body
is checked once it has been read in full (inside the body cap); only a body in which such a token can occur
at all is parsed here, so ordinary requests pay one scan of their bytes.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from provenance_api.core.errors import InvalidInput
from provenance_api.http.problems import problem_response

# What can make Python's parser produce a non-finite float: the constants, or an exponent or integer part
# long enough to overflow. A match only means "parse it to be sure" (it may be inside a string).
_SUSPECT = re.compile(rb"NaN|Infinity|[eE][+-]?\d{3}|\d{300}")


class _NonFinite:
    """Stands where the parser met a non-finite number, so its place can be named."""

    def __init__(self, token: str) -> None:
        self.token = token


def _constant(token: str) -> _NonFinite:
    return _NonFinite(token)


def _number(text: str) -> float | _NonFinite:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def _find(value: Any, where: tuple[str, ...]) -> tuple[tuple[str, ...], str] | None:
    """(path, token) of the first non-finite number in ``value``, else None (iterative: no recursion limit)."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _NonFinite):
            return path, item.token
        if isinstance(item, dict):
            stack.extend((v, (*path, str(k))) for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((v, (*path, str(i))) for i, v in reversed(list(enumerate(item))))
    return None


def non_finite_problem(body: bytes) -> InvalidInput | None:
    """The 422 for a JSON body holding NaN, Infinity, -Infinity or an overflowing number; None otherwise
    (also for a body that is not JSON at all: the route's own validation names that)."""
    if not _SUSPECT.search(body):
        return None
    try:
        parsed = json.loads(body, parse_constant=_constant, parse_float=_number)
    except (ValueError, RecursionError):
        return None
    found = _find(parsed, ("body",))
    if found is None:
        return None
    path, token = found
    where = ".".join(path)
    return InvalidInput(
        f"{where}: {token} is not a JSON number (JSON has no NaN or Infinity, and a number must fit a "
        "double-precision float)",
        field=where,
        fix=f"send {where} as a finite number, or leave it out",
        extra={"errors": [{"field": where, "message": f"non-finite number {token}", "type": "finite_number"}]},
    )


def _json_body(scope: Scope) -> bool:
    """Whether the route will read the body as JSON: a JSON media type, or none at all (FastAPI parses it)."""
    for name, value in scope.get("headers") or []:
        if name == b"content-type":
            media: bytes = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or media.endswith(b"+json")
    return True


class StrictJsonMiddleware:
    """Refuse a JSON request body holding a non-finite number with 422 before any route reads it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _json_body(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[Message] = []
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        problem = non_finite_problem(b"".join(m.get("body", b"") for m in chunks if m["type"] == "http.request"))
        if problem is not None:
            await problem_response(problem, scope.get("path"))(scope, receive, send)
            return

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)
