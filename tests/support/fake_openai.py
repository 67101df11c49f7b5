"""A small OpenAI-compatible HTTP server for tests and benchmarks.

It is a plain asyncio HTTP/1.1 server (keep-alive, ``Content-Length`` and chunked request
bodies) running on 127.0.0.1, on a free port, in a background thread, so clients talk to it
over real sockets exactly as they would to a provider::

    with FakeOpenAI(lambda req: "hello") as srv:
        client = SomeClient(api_base=srv.base_url)      # "http://127.0.0.1:PORT/v1"
        ...
        assert srv.answered == 1

Endpoints: ``POST /v1/chat/completions`` (non-streaming) and ``GET /v1/models``.

``script(request_json) -> str | FakeReply`` decides each answer (it runs on the server's event
loop, so keep it quick; ask for latency with ``FakeReply.delay``; an exception it raises is
answered as a 500 and kept in ``script_errors``). A ``FakeReply`` can carry
faults: an HTTP error status (429 with ``Retry-After``, 500, 503, ...), a connection reset,
a delay, an empty or malformed body, a body without choices, and explicit usage numbers.
``faults`` injects faults by request index (a list, ``None`` entries meaning "no fault", or a
callable ``(index, request_json) -> FakeReply | None``); a fault whose ``text`` is None
answers with the script's text after the fault's delay, so ``FakeReply(delay=2)`` means
"answer normally, but late".

Observations (thread-safe to read once the client's calls returned):
``requests`` (chat-completion bodies, in arrival order), ``records`` (every HTTP request with
path, headers and arrival time), ``answered`` (200 answers that carried usage, i.e. billed),
``max_in_flight`` (peak concurrent chat-completion requests).

Per-client observations: ``tagger(headers, request_json) -> str | None`` names the client of each
chat request (by default the ``X-Fake-Tag`` request header), and ``answered_by_tag``,
``requests_by_tag`` and ``max_in_flight_by_tag`` count per tag — so concurrent clients (traces)
sharing one server can each be checked. ``fault_fn(index, request_json, tag)`` is ``faults`` with
the tag (used when ``faults`` is None).

Top log-probabilities: a request with ``logprobs: true`` is answered with
``choices[0].logprobs.content`` in OpenAI's shape (``token``, ``logprob``, ``bytes`` and the
``top_logprobs`` alternatives, at most the request's ``top_logprobs`` of them, likeliest first). The
alternatives are ``FakeReply.top_logprobs`` (one mapping per output token, token text → logprob; the
likeliest is the chosen token) or, by default, each character of the text chosen with certainty.
``reject_logprobs`` answers such a request 400 naming logprobs (a provider that does not offer them);
``ignore_logprobs`` answers it without any (a provider that drops the parameter).

An answer whose client hung up while it was being delayed (a client timeout) is not delivered and
not counted in ``answered``: it is counted in ``abandoned`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

__all__ = [
    "TAG_HEADER",
    "FakeOpenAI",
    "FakeReply",
    "FaultPlan",
    "RecordedRequest",
    "Script",
    "TaggedFaultPlan",
    "Tagger",
    "header_tag",
]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    422: "invalid_request_error",
    429: "rate_limit_exceeded",
}

_MALFORMED_BODY = b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{"in'


@dataclass(frozen=True)
class FakeReply:
    """One scripted answer, optionally with faults.

    ``text`` None means "the script's answer" (only meaningful for faults). ``status`` other
    than 200 answers an OpenAI-style error body with ``error_message``. ``retry_after``
    (seconds, may be fractional) sets the ``Retry-After`` header. ``reset`` closes the
    connection with a TCP reset without answering. ``delay`` is slept before answering.
    ``empty_body`` answers 200 with no body, ``malformed`` answers 200 with truncated JSON,
    ``no_choices`` answers 200 with usage but an empty ``choices`` list. Usage numbers
    default to roughly one token per four characters. ``until_hangup`` makes ``delay`` a
    longest wait: the answer is held until the client hangs up (a client timeout, then counted in
    ``abandoned``), and sent only if it has not after ``delay`` seconds — a slow answer that can
    never race the client's timer. ``top_logprobs``: the alternatives per output token, sent when the
    request asks for log-probabilities.
    """

    text: str | None = None
    status: int = 200
    error_message: str | None = None
    retry_after: float | None = None
    headers: tuple[tuple[str, str], ...] = ()
    reset: bool = False
    delay: float = 0.0
    empty_body: bool = False
    malformed: bool = False
    no_choices: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    include_usage: bool = True
    finish_reason: str = "stop"
    model: str | None = None
    until_hangup: bool = False
    top_logprobs: tuple[Mapping[str, float], ...] | None = None

    @classmethod
    def rate_limited(cls, retry_after: float | None = None) -> FakeReply:
        return cls(status=429, retry_after=retry_after, error_message="Rate limit reached for requests")

    @classmethod
    def error(cls, status: int, message: str | None = None) -> FakeReply:
        return cls(status=status, error_message=message)

    @classmethod
    def connection_reset(cls) -> FakeReply:
        return cls(reset=True)

    @classmethod
    def slow(cls, seconds: float, text: str | None = None) -> FakeReply:
        return cls(text=text, delay=seconds)


Script = Callable[[dict[str, Any]], "str | FakeReply"]
FaultPlan = Sequence["FakeReply | None"] | Callable[[int, dict[str, Any]], "FakeReply | None"]
TaggedFaultPlan = Callable[[int, dict[str, Any], "str | None"], "FakeReply | None"]
Tagger = Callable[[Mapping[str, str], "dict[str, Any] | None"], "str | None"]
TAG_HEADER = "x-fake-tag"


def header_tag(headers: Mapping[str, str], request: dict[str, Any] | None) -> str | None:
    """The default tagger: the ``X-Fake-Tag`` request header."""
    return headers.get(TAG_HEADER)


@dataclass(frozen=True)
class RecordedRequest:
    index: int
    method: str
    path: str
    headers: dict[str, str]
    json: dict[str, Any] | None
    arrived: float  # time.monotonic()


@dataclass
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


class _BadRequest(Exception):
    pass


def _default_script(request: dict[str, Any]) -> str:
    return "ok"


def _approx_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def _prompt_text(request: dict[str, Any]) -> str:
    parts: list[str] = []
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "\n".join(parts)


def _token_entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}


def _logprobs_body(text: str, alternatives: Sequence[Mapping[str, float]] | None, top_k: Any) -> dict[str, Any]:
    """OpenAI's ``choices[0].logprobs``: per output token the chosen token and its top-k alternatives."""
    k = top_k if isinstance(top_k, int) and not isinstance(top_k, bool) and top_k >= 0 else 0
    positions = list(alternatives) if alternatives is not None else [{ch: 0.0} for ch in text]
    content: list[dict[str, Any]] = []
    for position in positions:
        ranked = sorted(position.items(), key=lambda kv: kv[1], reverse=True)
        if not ranked:
            continue
        chosen, chosen_lp = ranked[0]
        entry = _token_entry(chosen, chosen_lp)
        entry["top_logprobs"] = [_token_entry(t, lp) for t, lp in ranked[:k]]
        content.append(entry)
    return {"content": content, "refusal": None}


class FakeOpenAI:
    """An OpenAI-compatible server on loopback; see the module docstring."""

    def __init__(
        self,
        script: Script | None = None,
        *,
        faults: FaultPlan | None = None,
        api_key: str | None = None,
        reject_json_schema: bool | str = False,
        reject_json_object: bool = False,
        model_ids: Sequence[str] = ("fake",),
        host: str = "127.0.0.1",
        tagger: Tagger | None = None,
        fault_fn: TaggedFaultPlan | None = None,
        reject_logprobs: bool | str = False,
        ignore_logprobs: bool = False,
    ) -> None:
        """``api_key``: when set, a request without ``Authorization: Bearer <api_key>`` gets a 401
        whose message echoes the key it was given (as some providers do), so tests can check that
        clients never repeat secrets. ``reject_json_schema``: a ``response_format`` of type
        ``json_schema`` answers 500 (like the stock llama.cpp server), with a bare "Internal Server
        Error" message, or with the given string. ``reject_json_object``: a ``response_format`` of
        type ``json_object`` answers 400. ``reject_logprobs``: a request with ``logprobs`` answers 400
        ("logprobs is not supported ...", or the given string); ``ignore_logprobs``: it is answered
        without log-probabilities."""
        self.script: Script = script or _default_script
        self.faults = faults
        self.api_key = api_key
        self.reject_json_schema = reject_json_schema
        self.reject_json_object = reject_json_object
        self.model_ids = tuple(model_ids)
        self.host = host
        self.tagger: Tagger = tagger or header_tag
        self.fault_fn = fault_fn
        self.reject_logprobs = reject_logprobs
        self.ignore_logprobs = ignore_logprobs
        self._abandoned = 0
        self._by_tag_answered: dict[str | None, int] = {}
        self._by_tag_requests: dict[str | None, int] = {}
        self._by_tag_in_flight: dict[str | None, int] = {}
        self._by_tag_max_in_flight: dict[str | None, int] = {}
        self.port = 0
        self._lock = threading.Lock()
        self._records: list[RecordedRequest] = []
        self._chat_index = 0
        self._answered = 0
        self._in_flight = 0
        self._max_in_flight = 0
        self._connections = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self.script_errors: list[Exception] = []  # exceptions raised by the script or fault plan

    # ------------------------------------------------------------------ observations

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def records(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._records)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat-completion requests received, in arrival order."""
        return [r.json or {} for r in self.records if r.path.endswith("/chat/completions")]

    @property
    def chat_arrivals(self) -> list[float]:
        """``time.monotonic()`` arrival times of the chat-completion requests."""
        return [r.arrived for r in self.records if r.path.endswith("/chat/completions")]

    @property
    def answered(self) -> int:
        """200 chat-completion answers that carried usage (what a provider would bill)."""
        with self._lock:
            return self._answered

    @property
    def abandoned(self) -> int:
        """Answers not delivered because the client hung up while they were delayed."""
        with self._lock:
            return self._abandoned

    @property
    def answered_by_tag(self) -> dict[str | None, int]:
        with self._lock:
            return dict(self._by_tag_answered)

    @property
    def requests_by_tag(self) -> dict[str | None, int]:
        with self._lock:
            return dict(self._by_tag_requests)

    @property
    def max_in_flight_by_tag(self) -> dict[str | None, int]:
        with self._lock:
            return dict(self._by_tag_max_in_flight)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        with self._lock:
            return self._max_in_flight

    @property
    def connections(self) -> int:
        """TCP connections accepted so far."""
        with self._lock:
            return self._connections

    def reset_stats(self) -> None:
        """Forget recorded requests and counters (the fault plan's index restarts at 0)."""
        with self._lock:
            self._records.clear()
            self._chat_index = 0
            self._answered = 0
            self._abandoned = 0
            self._max_in_flight = self._in_flight
            self._by_tag_answered.clear()
            self._by_tag_requests.clear()
            self._by_tag_max_in_flight = dict(self._by_tag_in_flight)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeOpenAI:
        if self._thread is not None:
            raise RuntimeError("FakeOpenAI already started")
        self._thread = threading.Thread(target=self._run, name="fake-openai", daemon=True)
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("FakeOpenAI did not start within 10 s")
        if self._start_error is not None:
            raise RuntimeError("FakeOpenAI failed to start") from self._start_error
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed
            loop.call_soon_threadsafe(self._shutdown)
        thread.join(10)
        self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, 0))
            self.port = sock.getsockname()[1]
            self._server = loop.run_until_complete(asyncio.start_server(self._serve_connection, sock=sock, backlog=256))
        except BaseException as exc:  # surfaced by start()
            self._start_error = exc
            self._started.set()
            loop.close()
            return
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        assert self._loop is not None
        loop = self._loop

        async def _drain() -> None:
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            if self._server is not None:
                await self._server.wait_closed()
            loop.stop()

        loop.create_task(_drain())

    # ------------------------------------------------------------------ HTTP

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        with self._lock:
            self._connections += 1
        try:
            while True:
                try:
                    request = await self._read_request(reader)
                except (asyncio.IncompleteReadError, ConnectionError, _BadRequest):
                    return
                if request is None:
                    return
                keep = await self._dispatch(request, writer, reader)
                if not keep or not request.keep_alive:
                    return
        except asyncio.CancelledError:
            pass
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial.strip():
                return None
            raise
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError as exc:
            raise _BadRequest(lines[0]) from exc
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
            body = b"".join(chunks)
        else:
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" and (version.upper() == "HTTP/1.1" or connection == "keep-alive")
        return _Request(method.upper(), target.split("?", 1)[0], headers, body, keep_alive)

    @staticmethod
    async def _write(
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        headers: Sequence[tuple[str, str]] = (),
        content_type: str = "application/json",
    ) -> None:
        lines = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
        ]
        lines += [f"{k}: {v}" for k, v in headers]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()

    @staticmethod
    def _reset(writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    def _record(self, request: _Request, payload: dict[str, Any] | None, chat: bool) -> int:
        with self._lock:
            index = self._chat_index if chat else -1
            if chat:
                self._chat_index += 1
            self._records.append(
                RecordedRequest(index, request.method, request.path, dict(request.headers), payload, time.monotonic())
            )
            return index

    async def _dispatch(
        self, request: _Request, writer: asyncio.StreamWriter, reader: asyncio.StreamReader | None = None
    ) -> bool:
        """Answer one request; False closes the connection."""
        path = request.path.rstrip("/")
        try:
            payload = json.loads(request.body) if request.body else None
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            payload = None
        if request.method == "GET" and path.endswith("/models"):
            self._record(request, payload, chat=False)
            if not self._authorized(request):
                await self._error(writer, 401, self._auth_message(request))
                return True
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.model_ids]
            await self._write(writer, 200, json.dumps({"object": "list", "data": data}).encode())
            return True
        if request.method == "POST" and path.endswith("/chat/completions"):
            index = self._record(request, payload, chat=True)
            try:
                tag = self.tagger(request.headers, payload)
            except Exception as exc:  # a broken tagger is a test bug: keep it for the test
                with self._lock:
                    self.script_errors.append(exc)
                tag = None
            with self._lock:
                self._in_flight += 1
                self._max_in_flight = max(self._max_in_flight, self._in_flight)
                self._by_tag_requests[tag] = self._by_tag_requests.get(tag, 0) + 1
                now = self._by_tag_in_flight[tag] = self._by_tag_in_flight.get(tag, 0) + 1
                self._by_tag_max_in_flight[tag] = max(self._by_tag_max_in_flight.get(tag, 0), now)
            try:
                return await self._chat(index, request, payload, writer, reader, tag)
            finally:
                with self._lock:
                    self._in_flight -= 1
                    self._by_tag_in_flight[tag] -= 1
        self._record(request, payload, chat=False)
        await self._error(writer, 404, f"no route for {request.method} {request.path}")
        return True

    def _authorized(self, request: _Request) -> bool:
        return self.api_key is None or request.headers.get("authorization", "") == f"Bearer {self.api_key}"

    @staticmethod
    def _auth_message(request: _Request) -> str:
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return f"Incorrect API key provided: {given}. You can find your API key in your account settings."

    async def _error(
        self, writer: asyncio.StreamWriter, status: int, message: str, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        body = {
            "error": {"message": message, "type": _ERROR_TYPES.get(status, "server_error"), "param": None, "code": None}
        }
        await self._write(writer, status, json.dumps(body).encode(), headers)

    def _planned_fault(self, index: int, payload: dict[str, Any], tag: str | None = None) -> FakeReply | None:
        plan = self.faults
        if plan is None:
            return None if self.fault_fn is None else self.fault_fn(index, payload, tag)
        if callable(plan):
            return plan(index, payload)
        return plan[index] if index < len(plan) else None

    @staticmethod
    def _client_gone(writer: asyncio.StreamWriter, reader: asyncio.StreamReader | None) -> bool:
        if writer.transport.is_closing():
            return True
        return reader is not None and (reader.at_eof() or reader.exception() is not None)

    async def _chat(
        self,
        index: int,
        request: _Request,
        payload: dict[str, Any] | None,
        writer: asyncio.StreamWriter,
        reader: asyncio.StreamReader | None = None,
        tag: str | None = None,
    ) -> bool:
        if payload is None:
            await self._error(writer, 400, "request body is not a JSON object")
            return True
        if not self._authorized(request):
            await self._error(writer, 401, self._auth_message(request))
            return True
        if payload.get("stream"):
            await self._error(writer, 400, "streaming is not supported by this fake server")
            return True
        try:
            fault = self._planned_fault(index, payload, tag)
            if fault is None or (
                fault.text is None and fault.status == 200 and not (fault.reset or fault.empty_body or fault.malformed)
            ):
                answer = self.script(payload)
                scripted = answer if isinstance(answer, FakeReply) else FakeReply(text=answer)
                # a fault that only tweaks (delay, usage, headers) answers with the script's text
                reply = scripted if fault is None else replace(fault, text=scripted.text)
            else:
                reply = fault
        except Exception as exc:  # a broken script is a test bug: answer 500 and keep it for the test
            with self._lock:
                self.script_errors.append(exc)
            await self._error(writer, 500, f"fake server script raised {type(exc).__name__}: {exc}")
            return True
        if reply.delay:
            if reply.until_hangup:
                deadline = time.monotonic() + reply.delay
                while not self._client_gone(writer, reader) and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
            else:
                await asyncio.sleep(reply.delay)
            if self._client_gone(writer, reader):  # the client timed out: nothing is delivered or billed
                with self._lock:
                    self._abandoned += 1
                return False
        if reply.reset:
            self._reset(writer)
            return False
        extra_headers = list(reply.headers)
        if reply.retry_after is not None:
            extra_headers.append(("Retry-After", f"{reply.retry_after:g}"))
        if reply.status != 200:
            message = reply.error_message or _REASONS.get(reply.status, "error")
            await self._error(writer, reply.status, message, extra_headers)
            return True
        response_format = payload.get("response_format")
        rf_type = response_format.get("type") if isinstance(response_format, dict) else None
        if self.reject_json_schema and rf_type == "json_schema":
            rejection = self.reject_json_schema
            message = rejection if isinstance(rejection, str) else "Internal Server Error"
            await self._error(writer, 500, message)
            return True
        if self.reject_json_object and rf_type == "json_object":
            await self._error(writer, 400, "response_format type 'json_object' is not supported")
            return True
        if self.reject_logprobs and payload.get("logprobs"):
            rejection = self.reject_logprobs
            await self._error(
                writer, 400, rejection if isinstance(rejection, str) else "logprobs is not supported for this model"
            )
            return True
        if reply.empty_body:
            await self._write(writer, 200, b"", extra_headers)
            return True
        if reply.malformed:
            await self._write(writer, 200, _MALFORMED_BODY, extra_headers)
            return True
        text = reply.text or ""
        prompt_tokens = (
            reply.prompt_tokens if reply.prompt_tokens is not None else _approx_tokens(_prompt_text(payload))
        )
        completion_tokens = reply.completion_tokens if reply.completion_tokens is not None else _approx_tokens(text)
        body: dict[str, Any] = {
            "id": f"chatcmpl-fake-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or str(payload.get("model") or self.model_ids[0]),
            "system_fingerprint": "fp_fake",
            "choices": []
            if reply.no_choices
            else [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": (
                        _logprobs_body(text, reply.top_logprobs, payload.get("top_logprobs"))
                        if payload.get("logprobs") and not self.ignore_logprobs
                        else None
                    ),
                    "finish_reason": reply.finish_reason,
                }
            ],
        }
        if reply.include_usage:
            body["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": reply.cached_tokens or 0},
            }
        if reply.include_usage:  # counted before the write: the client may read the answer at once
            with self._lock:
                self._answered += 1
                self._by_tag_answered[tag] = self._by_tag_answered.get(tag, 0) + 1
        await self._write(writer, 200, json.dumps(body).encode(), extra_headers)
        return True
