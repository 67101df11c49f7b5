"""Run the service for tests: in process with no socket (``InProcessApi``, for tests of what the API answers),
over real HTTP in a thread (``ApiServer``, when something outside the test process must reach it: a browser, the
CLI, a client library) or as a separate process (``ServerProcess``, so it can be SIGKILLed), each with its own
data dir. Also the small turns and the scripted judge the API tests share."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import uvicorn
from anyio.from_thread import BlockingPortal
from starlette.testclient import TestClient

from estimator.seams.llm import LLMRequest, LLMResponse, ScriptedLLM, Usage
from provenance_api.core.settings import Settings
from provenance_api.http.app import create_app
from provenance_api.jobs.runner import LLMFactory, ScorerFactory
from provenance_api.operations.auth import create_key
from provenance_api.storage.session import Database

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"


def load_fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def small_turn(turn_id: str = "t-small-1", **changes: Any) -> dict[str, Any]:
    """Two sources in two layers (a tool return and the instructions): a trace plans 12 calls."""
    turn: dict[str, Any] = {
        "turn_id": turn_id,
        "model": "openai/fake-judge",
        "agent": "support bot",
        "query": "Where is my order A-1?",
        "response": "Order A-1 shipped on 2025-03-03 with DHL. Would you like the tracking number?",
        "system_prompt": "You are a support agent. Always name the carrier of a shipment.",
        "system_prompt_versioned": True,
        "response_payload": {
            "tool_calls": [
                {
                    "name": "lookup_order",
                    "arguments": {"order_id": "A-1"},
                    "response": "Order A-1 shipped 2025-03-03 with carrier DHL, tracking 99812.",
                }
            ]
        },
    }
    turn.update(changes)
    return turn


TEST_MODELS = ["openai/fake-judge", "openai/gpt-4o", "openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5"]
"""The judge models the test servers allow (the operator's ``allowed_models``): the model of the shared test
turns and the priced models tests ask for explicitly. Every other model runs the default or is refused."""
TEST_PRICES = {"openai/fake-judge": {"input_per_mtok": 0.15, "output_per_mtok": 0.6}}
"""The operator's price for the test turns' unpriced model (``model_prices``), as for gpt-4o-mini."""
TEST_MODEL_ENV = {
    "PROVENANCE_ALLOWED_MODELS": json.dumps(TEST_MODELS),
    "PROVENANCE_MODEL_PRICES": json.dumps(TEST_PRICES),
}


def model_policy(settings: dict[str, Any]) -> dict[str, Any]:
    """The test servers' model policy, explicit: ``TEST_MODELS`` at ``TEST_PRICES`` unless a test sets its own."""
    return {"allowed_models": TEST_MODELS, "model_prices": TEST_PRICES, **settings}


SMALL_CLAIM = "Order A-1 shipped on 2025-03-03 with DHL."
SMALL_KEY = "with carrier DHL"


def _approx_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)  # as FakeOpenAI counts usage


class KeyedJudge:
    """A scripted judge keyed on one phrase: judge calls answer 9 when the phrase is among the
    sources shown and 2 when not; span checks answer "supported" quoting the phrase when the
    source holds it, else "silent". The same script serves FakeOpenAI (an OpenAI request body)
    and ScriptedLLM (the estimator's request), with the usage FakeOpenAI reports."""

    def __init__(self, key: str = SMALL_KEY) -> None:
        self.key = key

    def answer(self, system: str, user: str) -> str:
        if "strict judge of support" in system:
            return "9" if self.key in user else "2"
        if self.key in user:
            return json.dumps(
                {
                    "verdict": "supported",
                    "evidence_quote": self.key,
                    "confidence": 0.9,
                    "reason": "the source states it",
                }
            )
        return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.8, "reason": "nothing on it"})

    @staticmethod
    def _split(messages: list[dict[str, Any]]) -> tuple[str, str]:
        system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        user = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
        return system, user

    def openai(self, request: dict[str, Any]) -> str:
        return self.answer(*self._split(list(request.get("messages") or [])))

    def scripted(self, request: LLMRequest) -> LLMResponse:
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        text = self.answer(*self._split(messages))
        prompt = "\n".join(m.content for m in request.messages)
        return LLMResponse(text=text, usage=Usage(_approx_tokens(prompt), _approx_tokens(text)))


def scripted_factory(judge: KeyedJudge | None = None, latency: float = 0.0) -> LLMFactory:
    """An llm_factory answering with ScriptedLLM running ``judge``."""
    script = judge or KeyedJudge()

    def build(model: str, api_base: str | None) -> ScriptedLLM:
        return ScriptedLLM(script.scripted, model=model, latency=latency)

    return build


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def make_key(data_dir: Path, tenant: str, user: str, **settings: Any) -> str:
    """Create an API key in the service's storage, as ``provenance keys create`` does."""

    async def work() -> str:
        db = Database(Settings(data_dir=data_dir, **settings).effective_database_url)
        try:
            await db.migrate()
            return str((await create_key(db, tenant, user))[1])
        finally:
            await db.dispose()

    return asyncio.run(work())


class _App:
    """The app both test servers serve: ``create_app`` with the test model policy, its data directory, its admin
    key and keys for other users."""

    def __init__(
        self,
        data_dir: Path,
        *,
        llm_factory: LLMFactory | None = None,
        scorer_factory: ScorerFactory | None = None,
        **settings: Any,
    ) -> None:
        self.data_dir = data_dir
        self.settings = Settings(data_dir=data_dir, **model_policy(settings))
        self.app = create_app(self.settings, llm_factory, scorer_factory)

    @property
    def admin_key(self) -> str:
        return str(self.settings.admin_key_file.read_text().strip())

    def key(self, tenant: str, user: str) -> str:
        return make_key(self.data_dir, tenant, user, database_url=self.settings.database_url)


class ApiServer(_App):
    """``create_app`` under uvicorn in a background thread, on 127.0.0.1 and a free port."""

    def __init__(
        self,
        data_dir: Path,
        *,
        llm_factory: LLMFactory | None = None,
        scorer_factory: ScorerFactory | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(data_dir, llm_factory=llm_factory, scorer_factory=scorer_factory, **settings)
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self.server = uvicorn.Server(
            uvicorn.Config(self.app, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=2)
        )
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, key: str | None = None, **kw: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=kw.pop("timeout", 30.0), **kw)

    def __enter__(self) -> ApiServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the API server did not start")
            time.sleep(0.02)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.server.should_exit = True
        self._thread.join(15)
        self._sock.close()


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class _PortalTransport(httpx.BaseTransport):
    """Hands each request of a synchronous ``httpx.Client`` to the app on the event loop of ``portal`` (the loop
    its lifespan started on, where its background jobs run) through ``httpx.ASGITransport``. A response is read
    whole before it is returned (an event stream, once its trace has ended), as ``ASGITransport`` reads it."""

    def __init__(self, portal: BlockingPortal, asgi: httpx.ASGITransport) -> None:
        self._portal = portal
        self._asgi = asgi

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        # the body in the chunks the client sent, under the client's own headers (a body without
        # Content-Length stays one without it)
        assert isinstance(request.stream, httpx.SyncByteStream)
        body = _Chunks([bytes(chunk) for chunk in request.stream])

        async def send() -> tuple[int, list[tuple[bytes, bytes]], bytes]:
            inner = httpx.Request(request.method, request.url, headers=request.headers, stream=body)
            response = await self._asgi.handle_async_request(inner)
            try:
                content = b"".join([chunk async for chunk in response.aiter_raw()])
            finally:
                await response.aclose()
            return response.status_code, response.headers.raw, content

        status, headers, content = self._portal.call(send)
        return httpx.Response(status, headers=headers, content=content, request=request)


class InProcessApi(_App):
    """``create_app`` with the same settings as ``ApiServer`` (and the same attributes: ``settings``, ``app``,
    ``admin_key``, ``key()``, ``client()``), served in this process with no socket: its lifespan runs on an event
    loop in a background thread, as under uvicorn, and ``client()`` sends each request to it over ASGI. For tests
    of what the API answers; a test of the server itself (a socket, a process, a browser, the CLI, what a shutdown
    does to the jobs still running) uses ``ApiServer`` or ``ServerProcess``."""

    base_url = "http://testserver"

    def __init__(
        self,
        data_dir: Path,
        *,
        llm_factory: LLMFactory | None = None,
        scorer_factory: ScorerFactory | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(data_dir, llm_factory=llm_factory, scorer_factory=scorer_factory, **settings)
        # runs the ASGI lifespan (startup, shutdown) through the whole middleware stack, as uvicorn does
        self._lifespan = TestClient(self.app, raise_server_exceptions=False)
        # an unexpected error answers 500, as over a socket, instead of raising in the test
        self._asgi = httpx.ASGITransport(self.app, raise_app_exceptions=False, client=("127.0.0.1", 50000))
        self._portal: BlockingPortal | None = None

    def client(self, key: str | None = None, **kw: Any) -> httpx.Client:
        """A client of the app (``timeout`` is accepted for ``ApiServer``'s signature; nothing here waits on a
        socket)."""
        assert self._portal is not None, "use the InProcessApi in a with block"
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        kw.pop("timeout", None)
        transport = _PortalTransport(self._portal, self._asgi)
        return httpx.Client(base_url=self.base_url, headers=headers, transport=transport, **kw)

    def __enter__(self) -> InProcessApi:
        self._lifespan.__enter__()
        self._portal = self._lifespan.portal
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._portal = None
        self._lifespan.__exit__(exc_type, exc, tb)


def await_serving(proc: subprocess.Popen[bytes], out: Path, err: Path, timeout: float) -> int:
    """The port of a ``provenance serve`` child once it has printed where it listens and ``/readyz`` answers 200;
    a child that exits first, or is not ready within ``timeout`` seconds, is an error naming why."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited with {proc.returncode}: {err.read_text()[-2000:]}")
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", out.read_text())
        if found:
            port = int(found.group(1))
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    return port
            except httpx.HTTPError:
                pass
        time.sleep(0.05)
    raise RuntimeError("serve did not become ready")


class ServerProcess:
    """``python -m provenance_api.cli.main serve`` as a child process, so a test can SIGKILL it."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.env = {**os.environ, "PROVENANCE_DATA_DIR": str(data_dir), **TEST_MODEL_ENV, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.out = data_dir / "serve.out"
        self.err = data_dir / "serve.err"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ServerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.out.open("wb") as out, self.err.open("ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "provenance_api.cli.main", "serve", "--port", "0"],
                env=self.env,
                stdout=out,
                stderr=err,
                cwd=REPO,
            )
        self.port = await_serving(self.proc, self.out, self.err, timeout)
        return self

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
