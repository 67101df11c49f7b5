"""The request body cap: a body over ``max_body_bytes`` is refused with 413 before a route reads it."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from provenance_api.core.errors import PayloadTooLarge


class BodyLimitMiddleware:
    """Refuse a request body over ``max_bytes`` with 413 before any route reads it (by
    ``Content-Length`` when given, else by counting the chunks as they arrive)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(
            f"the request body is larger than this server's limit of {self.max_bytes:,} bytes",
            fix="send a smaller body (store long turns once, then refer to them by turn_id)",
            extra={"max_bytes": self.max_bytes},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from provenance_api.http.problems import problem_response

        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await problem_response(self._too_large(), scope.get("path"))(scope, receive, send)
            return
        chunks: list[Message] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                chunks.append(message)
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await problem_response(self._too_large(), scope.get("path"))(scope, receive, send)
                return
            chunks.append(message)
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)
