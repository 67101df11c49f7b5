"""The streamable-HTTP gateway: ``provenance gateway --http URL`` listens on a local port and relays every request
to the MCP server at URL, and every response back, unchanged.

A request keeps its method, path, query, headers (``Mcp-Session-Id``, ``Mcp-Protocol-Version``, ``Mcp-Param-*``,
authorisation …; only hop-by-hop headers and ``Host`` are the connection's own) and body; a response keeps its
status, headers and body bytes as the server sent them (``aiter_raw``: not decoded, not re-chunked into events),
streamed to the agent as they arrive. A POST whose body holds a ``tools/call`` has its response copied to the
recorder after each piece is forwarded: a JSON body whole, an event stream event by event.

When the server fails: a connection that breaks mid-response is broken towards the agent too (the response is
aborted, as the server's own was); a server that cannot be reached or sends no response is answered with
``502 Bad Gateway`` — the one case the agent sees the gateway, because it did reach the gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import httpx
import uvicorn

from provenance_api.gateway.recorder import Recorder

__all__ = ["HttpGateway", "SseSplitter", "run_http"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
    }
)
_RESPONSE_DROP = frozenset({"connection", "keep-alive", "transfer-encoding", "trailer", "upgrade"})


class SseSplitter:
    """The ``data`` of each complete event in an event stream's chunks (lines joined by newlines)."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *events, self._buffer = self._buffer.split(b"\n\n")
        out: list[bytes] = []
        for event in events:
            data = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
            if data:
                out.append(b"\n".join(data))
        return out


class HttpGateway:
    """An ASGI app that relays to ``upstream``'s origin, keeping each request's own path."""

    def __init__(self, upstream: str, recorder: Recorder, client: httpx.AsyncClient | None = None) -> None:
        parts = urlsplit(upstream)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.recorder = recorder
        self.client = client or httpx.AsyncClient(timeout=None, follow_redirects=False)
        self._ids = itertools.count()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await _body(receive)
        connection = f"http-{next(self._ids)}"
        watched = scope["method"] == "POST" and b"tools/call" in body
        if watched:
            self.recorder.offer("request", body, connection)
        target = self.origin + scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_BY_HOP]
        request = self.client.build_request(scope["method"], target, headers=headers, content=body)
        try:
            response = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            await _bad_gateway(send, exc)
            return
        try:
            await self._relay(response, send, connection if watched else None)
        finally:
            await response.aclose()

    async def _relay(self, response: httpx.Response, send: Send, connection: str | None) -> None:
        headers = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in response.headers.multi_items()
            if k.lower() not in _RESPONSE_DROP
        ]
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        readable = connection is not None and response.headers.get("content-encoding", "identity") == "identity"
        if connection is not None and not readable:
            self.recorder.miss(1, "a compressed response is forwarded but not read")
        events = SseSplitter() if kind == "text/event-stream" else None
        whole = bytearray()
        async for chunk in response.aiter_raw():  # a break mid-response propagates: the agent's is broken too
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if not readable or connection is None:
                continue
            if events is not None:
                for data in events.feed(chunk):
                    self.recorder.offer("response", data, connection)
            else:
                whole += chunk
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        if readable and connection is not None and events is None and whole:
            self.recorder.offer("response", bytes(whole), connection)


async def _body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def _bad_gateway(send: Send, exc: httpx.HTTPError) -> None:
    text = f"the MCP server did not answer the gateway: {type(exc).__name__}\n".encode()
    await send(
        {
            "type": "http.response.start",
            "status": 502,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(text)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": text, "more_body": False})


async def run_http(upstream: str, host: str, port: int, recorder: Recorder) -> int:
    """Serve the gateway on ``host:port`` (0: any free port) until SIGTERM or SIGINT; says where on stderr. The
    signals end the serving only, never the process, so what is queued is still recorded before it exits."""
    app = HttpGateway(upstream, recorder)
    config = uvicorn.Config(app, host=host, port=port, lifespan="off", log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    loop = asyncio.get_running_loop()

    def stop() -> None:
        server.should_exit = True

    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop)
    recorder.start()
    serving = asyncio.create_task(server.serve())
    while not server.started and not serving.done():
        await asyncio.sleep(0.05)
    if server.started:
        bound = server.servers[0].sockets[0].getsockname()
        path = urlsplit(upstream).path or "/"
        sys.stderr.write(f"provenance gateway: listening on http://{host}:{bound[1]}{path} for {upstream}\n")
        sys.stderr.flush()
    try:
        await serving
    finally:
        await app.client.aclose()
        await recorder.stop()
    return 0 if server.started else 1
