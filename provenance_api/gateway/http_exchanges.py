"""One connection's HTTP exchanges, read as they go by: the agent's requests on their way to the server (each head
given the server's ``Host``, the rest passed on as it came) and a copy of the server's responses, read after they
were forwarded. Each response is paired with its request (HTTP/1.1 answers in order on a connection); a POST whose
body holds a ``tools/call`` is handed to the recorder, and so is its response: a JSON body whole, an event stream
event by event. Bytes that are not HTTP leave the rest of the connection copied, not read.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from provenance_api.gateway.http_wire import (
    MAX_HEAD,
    Body,
    FramingError,
    Head,
    SseSplitter,
    find_head_end,
    parse_head,
)
from provenance_api.gateway.recorder import Recorder

__all__ = ["MAX_COPY", "Exchange", "Requests", "Responses"]

MAX_COPY = 64 << 20
"""A tools/call body or JSON response longer than this is forwarded whole but not looked at."""


@dataclass
class Exchange:
    """One request on a connection and the response that answers it (HTTP/1.1 answers in order)."""

    key: str
    method: bytes
    watched: bool = False


class Requests:
    """The agent's bytes on their way to the server: each request head gets the server's ``Host``, the rest goes on
    as it came. Notes each request as an exchange and hands a ``tools/call`` body to the recorder."""

    def __init__(self, host: bytes, recorder: Recorder, number: int, exchanges: deque[Exchange]) -> None:
        self.host, self.recorder, self.number, self.exchanges = host, recorder, number, exchanges
        self.mode = "head"  # then "body"; "copy" once the bytes are not requests it can read
        self.buffer = b""
        self.body = Body("none")
        self.copy: bytearray | None = None
        self.current: Exchange | None = None
        self.count = 0

    def feed(self, data: bytes) -> bytes:
        """The bytes to send to the server for ``data`` (what can be sent now)."""
        if self.mode == "copy":
            return data
        out: list[bytes] = []
        data, self.buffer = self.buffer + data, b""
        while data:
            if self.mode == "copy":
                out.append(data)
                break
            if self.mode == "body":
                data = self._body(data, out)
                continue
            end = find_head_end(data)
            if end < 0:
                if len(data) > MAX_HEAD:
                    self.mode = "copy"
                    out.append(data)
                else:
                    self.buffer = data
                break
            data = self._head(data[:end], data[end:], out)
        return b"".join(out)

    def _head(self, raw: bytes, rest: bytes, out: list[bytes]) -> bytes:
        if raw.strip() == b"":  # blank lines between requests are allowed and ignored
            out.append(raw)
            return rest
        try:
            head = parse_head(raw)
            self.body = Body.of_request(head)
        except FramingError:
            self.mode = "copy"  # not a request we can read: the server answers it as it would directly
            out.append(raw)
            return rest
        method = head.first.split(b" ", 1)[0]
        self.current = Exchange(f"http-{self.number}-{self.count}", method)
        self.count += 1
        self.exchanges.append(self.current)
        self.copy = bytearray() if method == b"POST" else None
        out.append(head.encode(self.host))
        upgrade = method == b"CONNECT" or head.has(b"upgrade")
        self.mode = "copy" if upgrade else "body"
        if self.body.done and not upgrade:
            self._request_done()
        return rest

    def _body(self, data: bytes, out: list[bytes]) -> bytes:
        try:
            taken, payload = self.body.feed(data)
        except FramingError:
            self.mode = "copy"
            out.append(data)
            return b""
        out.append(data[:taken])
        if self.copy is not None:
            if len(self.copy) + len(payload) <= MAX_COPY:
                self.copy += payload
            else:
                self.copy = None
        if self.body.done:
            self._request_done()
        return data[taken:]

    def _request_done(self) -> None:
        self.mode = "head"
        if self.current is not None and self.copy is not None and b"tools/call" in self.copy:
            self.current.watched = True
            self.recorder.offer("request", bytes(self.copy), self.current.key)
        self.copy = None


class Responses:
    """A copy of the server's bytes, read after they were forwarded: each response paired with its exchange, and
    the results of the watched ones handed to the recorder."""

    def __init__(self, recorder: Recorder, exchanges: deque[Exchange]) -> None:
        self.recorder, self.exchanges = recorder, exchanges
        self.blind = False
        self.buffer = b""
        self.body: Body | None = None
        self.current: Exchange | None = None
        self.events: SseSplitter | None = None
        self.whole: bytearray | None = None

    def feed(self, data: bytes) -> None:
        """Never raises: bytes it cannot read leave the rest of the connection unread (the copy must never break
        the relay it follows)."""
        if self.blind:
            return
        try:
            self._feed(data)
        except Exception:
            self.blind = True

    def _feed(self, data: bytes) -> None:
        data, self.buffer = self.buffer + data, b""
        while data and not self.blind:
            if self.body is not None:
                taken, payload = self.body.feed(data)
                self._payload(payload)
                data = data[taken:]
                if self.body.done:
                    self._response_done()
                continue
            end = find_head_end(data)
            if end < 0:
                if len(data) > MAX_HEAD:
                    raise FramingError("a response head too long")
                self.buffer = data
                return
            self._head(parse_head(data[:end]))
            data = data[end:]

    def _head(self, head: Head) -> None:
        version, _, rest = head.first.partition(b" ")
        if not version.startswith(b"HTTP/") or not rest[:3].isdigit():
            raise FramingError("no status line")
        status = int(rest[:3])
        if status == 101:
            self.blind = True  # the connection becomes something else: only copied from here on
            return
        exchange = self.exchanges.popleft() if status >= 200 and self.exchanges else None
        self.body = Body.of_response(head, status, exchange.method if exchange else b"")
        self.current = exchange if exchange is not None and exchange.watched else None
        self.events, self.whole = None, None
        if self.current is not None:
            if head.get(b"content-encoding") not in (None, b"identity"):
                self.recorder.miss(1, "a compressed response is forwarded but not read")
                self.current = None
            elif (head.get(b"content-type") or b"").split(b";")[0].strip().lower() == b"text/event-stream":
                self.events = SseSplitter()
            else:
                self.whole = bytearray()
        if self.body.done:
            self._response_done()

    def _payload(self, payload: bytes) -> None:
        if self.current is None or not payload:
            return
        if self.events is not None:
            for data in self.events.feed(payload):
                self.recorder.offer("response", data, self.current.key)
        elif self.whole is not None:
            if len(self.whole) + len(payload) <= MAX_COPY:
                self.whole += payload
            else:
                self.whole = None
                self.recorder.miss(1, "a response too long to read is forwarded but not read")

    def _response_done(self) -> None:
        if self.current is not None and self.whole:
            self.recorder.offer("response", bytes(self.whole), self.current.key)
        self.body, self.current, self.events, self.whole = None, None, None, None
