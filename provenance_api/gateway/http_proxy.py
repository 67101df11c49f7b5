"""The streamable-HTTP gateway: ``provenance gateway --http URL`` listens on a local port and relays every
connection to the MCP server at URL, byte for byte, both ways.

Each connection the agent opens gets one connection to the server, kept as long as the agent keeps its own
(keep-alive as the agent and the server agree it). Bytes are written on as they are read, in the same step,
never buffered for a whole message, never re-chunked or decoded. The one change is the ``Host`` field of each
request head, which names the server instead of the gateway; for that the relay reads where each request's head
and body end. A copy of what went by is looked at afterwards: a POST whose body holds a ``tools/call`` is handed
to the recorder, and so is its response (a JSON body whole, an event stream event by event); a compressed
response is forwarded but not read (counted as not recorded).

The reading of each connection's exchanges is ``http_exchanges``'s; the framing ``http_wire``'s.

When the server fails, the agent sees what it would see without the gateway: a response broken mid-way is broken
towards the agent too; a server that closes the connection without answering closes the agent's; bytes that are
not HTTP are copied as they came (the relay stops reading that connection). Only a server that cannot be reached
is answered by the gateway, with ``502 Bad Gateway``: the agent did reach the gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import ssl
import sys
from collections import deque
from urllib.parse import urlsplit

from provenance_api.gateway.http_exchanges import Exchange, Requests, Responses
from provenance_api.gateway.http_wire import find_head_end
from provenance_api.gateway.recorder import Recorder

__all__ = ["HttpGateway", "run_http"]

_HIGH_WATER = 1 << 20


class HttpGateway:
    """Where the server is, how to reach it, and the recorder that gets the copies."""

    def __init__(self, upstream: str, recorder: Recorder) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {upstream}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.host_field = parts.netloc.rpartition("@")[2].encode("idna")
        self.tls = ssl.create_default_context() if parts.scheme == "https" else None
        self.recorder = recorder
        self.connections: set[_AgentSide] = set()
        self._ids = itertools.count()

    def protocol(self) -> _AgentSide:
        return _AgentSide(self, next(self._ids))

    def close_all(self) -> None:
        for side in list(self.connections):
            side.abort()


class _AgentSide(asyncio.Protocol):
    """The connection from the agent; opens its own to the server and relays both ways."""

    def __init__(self, gateway: HttpGateway, number: int) -> None:
        self.gateway = gateway
        self.exchanges: deque[Exchange] = deque()
        self.requests = Requests(gateway.host_field, gateway.recorder, number, self.exchanges)
        self.agent: asyncio.Transport | None = None
        self.server: _ServerSide | None = None
        self.early: list[bytes] = []
        self.agent_eof = False
        self.refused: str | None = None
        self.connecting: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.agent = transport
        transport.set_write_buffer_limits(high=_HIGH_WATER)
        self.gateway.connections.add(self)
        self.connecting = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        gateway, loop = self.gateway, asyncio.get_running_loop()
        try:
            transport, server = await loop.create_connection(
                lambda: _ServerSide(self), gateway.host, gateway.port, ssl=gateway.tls
            )
        except (OSError, ssl.SSLError) as exc:
            self.refused = type(exc).__name__
            self._answer_refused()
            return
        if self.agent is None or self.agent.is_closing():
            transport.abort()
            return
        self.server = server
        early, self.early = b"".join(self.early), []
        if early:
            self._forward(early)
        if self.agent_eof:
            self._server_eof()

    def data_received(self, data: bytes) -> None:
        if self.server is not None:
            self._forward(data)
        else:
            self.early.append(data)
            if self.refused is not None:
                self._answer_refused()

    def _forward(self, data: bytes) -> None:
        assert self.server is not None and self.server.transport is not None
        out = self.requests.feed(data)
        if out:
            self.server.transport.write(out)

    def eof_received(self) -> bool:
        self.agent_eof = True
        if self.refused is not None:
            self._answer_refused()
        elif self.server is not None:
            self._server_eof()
        return True  # keep the connection open for the answer

    def _server_eof(self) -> None:
        transport = self.server.transport if self.server is not None else None
        if transport is None or transport.is_closing():
            return
        if transport.can_write_eof():
            transport.write_eof()
        else:
            transport.close()

    def _answer_refused(self) -> None:
        """Once the agent's request head is in (or it stopped sending): 502, then the connection is closed."""
        if self.agent is None or self.agent.is_closing():
            return
        if not self.agent_eof and find_head_end(b"".join(self.early)) < 0:
            return
        text = f"the MCP server did not answer the gateway: {self.refused}\n".encode()
        self.agent.write(
            b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: " + str(len(text)).encode() + b"\r\nconnection: close\r\n\r\n" + text
        )
        self.agent.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.gateway.connections.discard(self)
        self.agent = None
        server = self.server.transport if self.server is not None else None
        if server is not None:
            if exc is None:
                server.close()
            else:
                server.abort()

    def pause_writing(self) -> None:  # the agent reads slower than the server sends
        if self.server is not None and self.server.transport is not None:
            self.server.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.server is not None and self.server.transport is not None:
            self.server.transport.resume_reading()

    def abort(self) -> None:
        if self.agent is not None:
            self.agent.abort()


class _ServerSide(asyncio.Protocol):
    """The gateway's connection to the server for one agent connection."""

    def __init__(self, agent: _AgentSide) -> None:
        self.agent = agent
        self.transport: asyncio.Transport | None = None
        self.responses = Responses(agent.gateway.recorder, agent.exchanges)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=_HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        agent = self.agent.agent
        if agent is None or agent.is_closing():
            return
        agent.write(data)  # forwarded first; the copy is read after
        self.responses.feed(data)

    def eof_received(self) -> bool:
        if self.agent.agent is not None:
            self.agent.agent.close()  # what is buffered is still written, then the agent's connection ends
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        agent, self.transport = self.agent.agent, None
        if agent is not None:
            if exc is None:
                agent.close()
            else:
                agent.abort()  # a reset is passed on as a reset

    def pause_writing(self) -> None:  # the server reads slower than the agent sends
        if self.agent.agent is not None:
            self.agent.agent.pause_reading()

    def resume_writing(self) -> None:
        if self.agent.agent is not None:
            self.agent.agent.resume_reading()


async def run_http(upstream: str, host: str, port: int, recorder: Recorder) -> int:
    """Serve the gateway on ``host:port`` (0: any free port) until SIGTERM or SIGINT; says where on stderr. The
    signals end the serving only, never the process, so what is queued is still recorded before it exits."""
    try:
        gateway = HttpGateway(upstream, recorder)
    except ValueError as exc:
        sys.stderr.write(f"provenance gateway: cannot relay: {exc}\n")
        return 2
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    try:
        server = await loop.create_server(gateway.protocol, host, port)
    except OSError as exc:
        sys.stderr.write(f"provenance gateway: cannot listen on {host}:{port}: {exc.strerror or exc}\n")
        return 1
    recorder.start()
    bound = server.sockets[0].getsockname()
    path = urlsplit(upstream).path or "/"
    sys.stderr.write(f"provenance gateway: listening on http://{host}:{bound[1]}{path} for {upstream}\n")
    sys.stderr.flush()
    try:
        await stop.wait()
    finally:
        server.close()
        gateway.close_all()
        await recorder.stop()
    return 0
