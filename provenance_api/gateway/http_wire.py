"""HTTP/1.1 framing for the streamable-HTTP gateway, parsed as the bytes go by: where a message's head ends, what
its head says, where its body ends (``Content-Length``, ``chunked`` or the connection's end) and, for a copy, the
body's data and an event stream's events.

Nothing here writes to a socket: the relay forwards bytes and uses these to know where each request and response
begins and ends, to give the server its own ``Host``, and to hand the recorder a copy of what it forwarded. A
message these cannot read raises ``FramingError``; the relay then stops reading that connection and only copies it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["MAX_HEAD", "Body", "FramingError", "Head", "SseSplitter", "find_head_end", "parse_head"]

MAX_HEAD = 64 << 10
"""A head longer than this is not read (the connection is then only copied, as it came)."""
_MAX_LINE = 8 << 10
_HEAD_END = re.compile(rb"\r?\n\r?\n")


class FramingError(ValueError):
    """Bytes that are not the HTTP/1.1 message expected here."""


@dataclass(frozen=True)
class Head:
    """A request's or a response's head: its first line and its header fields, as they came."""

    first: bytes
    fields: tuple[tuple[bytes, bytes], ...]

    def get(self, name: bytes) -> bytes | None:
        """The last value of a field (names compared without case), or None."""
        found = None
        for key, value in self.fields:
            if key.lower() == name:
                found = value
        return found

    def has(self, name: bytes) -> bool:
        return any(key.lower() == name for key, _ in self.fields)

    def encode(self, host: bytes | None = None) -> bytes:
        """The head as bytes again, with ``Host`` set to ``host`` when given (the field added when missing)."""
        lines = [self.first]
        placed = host is None
        for key, value in self.fields:
            if host is not None and key.lower() == b"host":
                if placed:
                    continue
                value, placed = host, True
            lines.append(key + b": " + value)
        if not placed and host is not None:
            lines.insert(1, b"Host: " + host)
        return b"\r\n".join(lines) + b"\r\n\r\n"


def find_head_end(buffer: bytes | bytearray) -> int:
    """The index just past the blank line that ends a head, or -1 while it has not arrived."""
    found = _HEAD_END.search(buffer)
    return -1 if found is None else found.end()


def parse_head(raw: bytes) -> Head:
    lines = raw.rstrip(b"\r\n").split(b"\n")
    first = lines[0].rstrip(b"\r")
    if not first or first[:1].isspace():
        raise FramingError("no request or status line")
    fields: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        line = line.rstrip(b"\r")
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or b" " in name:
            raise FramingError("a header line without a name")
        fields.append((name, value.strip()))
    return Head(first, tuple(fields))


@dataclass
class Body:
    """One message's body as its bytes arrive: how many of them belong to it, their data, and when it ends."""

    mode: Literal["none", "length", "chunked", "close"]
    remaining: int = 0
    done: bool = False
    _state: Literal["size", "data", "data_end", "trailer"] = "size"
    _line: bytes = b""

    def __post_init__(self) -> None:
        self.done = self.mode == "none" or (self.mode == "length" and self.remaining == 0)

    @classmethod
    def of_request(cls, head: Head) -> Body:
        coding = head.get(b"transfer-encoding")
        if coding is not None:
            if coding.lower().rsplit(b",", 1)[-1].strip() != b"chunked":
                raise FramingError("a request body of unknown length")
            return cls("chunked")
        return cls._by_length(head, absent="none")

    @classmethod
    def of_response(cls, head: Head, status: int, method: bytes) -> Body:
        if method == b"HEAD" or status < 200 or status in (204, 304):
            return cls("none")
        coding = head.get(b"transfer-encoding")
        if coding is not None:
            chunked = coding.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
            return cls("chunked" if chunked else "close")
        return cls._by_length(head, absent="close")

    @classmethod
    def _by_length(cls, head: Head, absent: Literal["none", "close"]) -> Body:
        length = head.get(b"content-length")
        if length is None:
            return cls(absent)
        if not length.isdigit():
            raise FramingError("a Content-Length that is not a number")
        return cls("length", int(length))

    def feed(self, data: bytes) -> tuple[int, bytes]:
        """How many bytes of ``data`` are this body's (the rest begins the next message) and their decoded data."""
        if self.done:
            return 0, b""
        if self.mode == "close":
            return len(data), data
        if self.mode == "length":
            taken = min(len(data), self.remaining)
            self.remaining -= taken
            self.done = self.remaining == 0
            return taken, data[:taken]
        return self._chunked(data)

    def _chunked(self, data: bytes) -> tuple[int, bytes]:
        pos, out = 0, []
        while pos < len(data) and not self.done:
            if self._state == "data":
                taken = min(len(data) - pos, self.remaining)
                out.append(data[pos : pos + taken])
                pos += taken
                self.remaining -= taken
                if self.remaining == 0:
                    self._state = "data_end"
                continue
            end = data.find(b"\n", pos)
            if end < 0:
                self._line += data[pos:]
                if len(self._line) > _MAX_LINE:
                    raise FramingError("a chunk line too long")
                return len(data), b"".join(out)
            line = (self._line + data[pos:end]).rstrip(b"\r")
            self._line = b""
            pos = end + 1
            self._line_done(line)
        return pos, b"".join(out)

    def _line_done(self, line: bytes) -> None:
        if self._state == "size":
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise FramingError("a chunk size that is not hexadecimal") from None
            if size < 0:
                raise FramingError("a negative chunk size")
            self._state, self.remaining = ("trailer", 0) if size == 0 else ("data", size)
        elif self._state == "data_end":
            if line:
                raise FramingError("a chunk longer than its size")
            self._state = "size"
        elif not line:  # the blank line after the trailer fields
            self.done = True


class SseSplitter:
    """The ``data`` of each complete event in an event stream's chunks (lines joined by newlines)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._cr = b""  # a chunk's last byte when it is a CR: the next may begin with its LF

    def feed(self, chunk: bytes) -> list[bytes]:
        chunk, self._cr = self._cr + chunk, b""
        if chunk.endswith(b"\r"):
            chunk, self._cr = chunk[:-1], b"\r"
        self._buffer += chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *events, self._buffer = self._buffer.split(b"\n\n")
        out: list[bytes] = []
        for event in events:
            data = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
            if data:
                out.append(b"\n".join(data))
        return out
