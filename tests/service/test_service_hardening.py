"""Operational findings of the service, each a test named after what was found (they failed before the fix).

- ``/metrics`` took the HTTP method label from the request: invented methods grew it without bound.
- ``/readyz`` said ready while the database could not take a write (file removed, or read-only).
- The data directory kept 0755 and the database 0644 when they already existed.
- A ``turn_id`` holding ``\\u0000`` (or any control character) was accepted.
- Accepted connections never had ``TCP_NODELAY``: every request after the first on a keep-alive connection
  waited for a delayed ACK.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.api_server import InProcessApi, scripted_factory, small_turn

from estimator.seams.llm import LLMRequest, LLMResponse
from provenance_api.cli.service import _bind
from provenance_api.core.observability import method_label
from provenance_api.core.settings import Settings

PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApi]:
    with InProcessApi(tmp_path_factory.mktemp("hardening"), llm_factory=scripted_factory(), warm_up=False) as srv:
        yield srv


def test_metrics_method_label_set_is_fixed_whatever_methods_clients_invent(server: InProcessApi) -> None:
    with server.client() as client:
        for i in range(40):
            client.request(f"INVENTED{i}", "/healthz")
        text = client.get("/metrics").text
    assert "INVENTED" not in text
    assert 'method="OTHER"' in text
    assert method_label("GET") == "GET" and method_label("get") == "OTHER" and method_label("X" * 500) == "OTHER"


def test_readyz_is_not_ready_when_the_database_file_was_removed(tmp_path: Path) -> None:
    with InProcessApi(tmp_path, llm_factory=scripted_factory(), warm_up=False) as srv, srv.client() as client:
        assert client.get("/readyz").status_code == 200
        db_file = tmp_path / "provenance.db"
        assert db_file.is_file()
        moved = tmp_path / "moved-away.db"
        db_file.rename(moved)
        answer = client.get("/readyz")
        assert answer.status_code == 503
        assert answer.headers["content-type"].startswith(PROBLEM)
        assert "missing" in answer.json()["detail"]
        moved.rename(db_file)
        assert client.get("/readyz").status_code == 200


def test_readyz_proves_a_write_on_a_read_only_connection(tmp_path: Path) -> None:
    """A database that answers reads but refuses writes (here: SQLite opened read-only, as a read-only
    mount or replica behaves) is not ready, as root too."""
    from provenance_api.storage.session import Database

    async def run() -> tuple[bool, str, bool, str]:
        rw = Database(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}")
        await rw.migrate()
        ok_rw, why_rw = await rw.ready()
        await rw.dispose()
        ro = Database(f"sqlite+aiosqlite:///file:{tmp_path / 'p.db'}?mode=ro&uri=true")
        ok_ro, why_ro = await ro.ready()
        await ro.dispose()
        return ok_rw, why_rw, ok_ro, why_ro

    before = set(Path.cwd().iterdir())
    ok_rw, why_rw, ok_ro, why_ro = asyncio.run(run())
    assert set(Path.cwd().iterdir()) == before  # the URI is not taken for a relative path ("file:/…" folders)
    assert ok_rw, why_rw
    assert not ok_ro
    assert "write" in why_ro


def test_data_dir_and_database_are_owner_only_whatever_existed_before(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    (data / "provenance.db").touch()
    os.chmod(data / "provenance.db", 0o644)
    with InProcessApi(data, llm_factory=scripted_factory(), warm_up=False) as srv, srv.client(srv.admin_key) as client:
        assert client.post("/v1/turns", json=small_turn()).status_code == 201
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    for path in data.iterdir():
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name


def test_fresh_data_dir_files_are_never_world_readable(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "fresh")
    settings.ensure_data_dir()
    assert stat.S_IMODE(settings.data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((settings.data_dir / "provenance.db").stat().st_mode) == 0o600
    assert stat.S_IMODE(settings.owner_only_file("judgements.db").stat().st_mode) == 0o600


@pytest.mark.parametrize("bad", ["a\u0000b", "line\nbreak", "tab\there", "esc\u001b[31m", "del\u007f"])
def test_turn_id_with_control_characters_is_refused(server: InProcessApi, bad: str) -> None:
    with server.client(server.admin_key) as client:
        answer = client.post("/v1/turns", json=small_turn(turn_id=bad))
        assert answer.status_code == 422
        assert answer.headers["content-type"].startswith(PROBLEM)
        assert "turn_id" in answer.text and "control characters" in answer.text
        assert client.post("/v1/turns", json=small_turn(turn_id="ok / with spaces and ü")).status_code in (200, 201)


def test_accepted_connections_have_tcp_nodelay() -> None:
    """The listening socket ``provenance serve`` makes: a connection asyncio accepts on it has TCP_NODELAY
    (asyncio sets it only on sockets whose protocol number says TCP, which accepted sockets inherit)."""

    async def run() -> int:
        seen: list[int] = []
        listener = _bind("127.0.0.1", 0)
        port = listener.getsockname()[1]

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(handle, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()
        return seen[0]

    assert asyncio.run(run()) != 0


def test_turn_nested_200_levels_deep_is_refused_with_its_path_and_the_tenant_keeps_working(
    server: InProcessApi,
) -> None:
    """The finding: a turn whose tool arguments nested 200 levels deep was stored (201), and from then on
    reading it, its segments, quoting it, the turn list and search answered 500 for every user of the tenant."""
    deep: dict[str, object] = {"leaf": 1}
    for _ in range(200):
        deep = {"a": deep}
    turn = small_turn(turn_id="deep-args")
    turn["response_payload"]["tool_calls"][0]["arguments"] = deep
    with server.client(server.admin_key) as client:
        answer = client.post("/v1/turns", json=turn)
        assert answer.status_code == 422
        assert answer.headers["content-type"].startswith(PROBLEM)
        body = answer.json()
        assert "response_payload.tool_calls[0].arguments.a.a" in body["detail"]
        assert "64 levels" in body["detail"]
        assert client.get("/v1/turns/deep-args").status_code == 404
        assert client.get("/v1/turns").status_code == 200
        at_limit: dict[str, object] = {"leaf": 1}
        for _ in range(50):
            at_limit = {"a": at_limit}
        ok = small_turn(turn_id="deep-but-allowed")
        ok["response_payload"]["tool_calls"][0]["arguments"] = at_limit
        assert client.post("/v1/turns", json=ok).status_code == 201
        assert client.get("/v1/turns/deep-but-allowed/segments").status_code == 200


def test_quotes_are_purged_after_their_ttl_instead_of_keeping_the_claim_forever(tmp_path: Path) -> None:
    """The finding: quotes kept the full claim forever (20 quotes of a 1 MB sentence: +15 MiB)."""
    big = "Order A-1 shipped on 2025-03-03 with DHL. " + "x" * 200_000 + "."
    with (
        InProcessApi(
            tmp_path, llm_factory=scripted_factory(), quote_ttl_seconds=1, warm_up=False, max_body_bytes=2_000_000
        ) as srv,
        srv.client(srv.admin_key) as api,
    ):
        assert api.post("/v1/turns", json=small_turn()).status_code in (200, 201)
        used = api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0"}).json()["quote_id"]
        started = api.post("/v1/traces", json={"quote_id": used})
        assert started.status_code == 202, started.text
        assert api.get(started.headers["location"], params={"wait": "true"}).json()["status"] == "succeeded"
        for _ in range(3):
            assert api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": big}).status_code in (201, 422)
        time.sleep(2.2)  # past expiry plus one more TTL
        assert api.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0"}).status_code == 201
        with sqlite3.connect(tmp_path / "provenance.db") as db:
            rows = db.execute("SELECT id, length(sentence) + length(claim), used_by FROM quotes").fetchall()
        assert len(rows) == 2  # the new quote, and the used one (emptied); the unused expired ones are gone
        emptied = next(r for r in rows if r[0] == used)
        assert emptied[1] == 0 and emptied[2] is not None
        trace = api.get(started.headers["location"]).json()
        assert trace["status"] == "succeeded"  # the job and its result outlive the quote


def test_budget_spent_before_a_restart_is_remembered_after_it(tmp_path: Path) -> None:
    """The finding: after a restart the in-memory budget started from zero, so spend before a crash was
    forgotten. The embedded limiter now keeps the window in the database."""
    params = {"rate_max_calls": 100, "rate_window_seconds": 3600}

    def start_trace(srv: InProcessApi, client: httpx.Client) -> tuple[int, str]:
        quoted = client.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0"})
        assert quoted.status_code == 201, quoted.text
        started = client.post("/v1/traces", json={"quote_id": quoted.json()["quote_id"]})
        assert started.status_code == 202, started.text
        return int(started.headers["x-ratelimit-remaining"]), started.headers["location"]

    with (
        InProcessApi(tmp_path, llm_factory=scripted_factory(), params=params, warm_up=False) as srv,
        srv.client(srv.admin_key) as client,
    ):
        assert client.post("/v1/turns", json=small_turn()).status_code == 201
        remaining, location = start_trace(srv, client)
        planned = 100 - remaining
        done = client.get(location, params={"wait": "true"}).json()
        assert done["status"] == "succeeded"
        made = done["calls"]["made"]
        assert done["calls"]["planned"] == planned and 0 < made < planned

    with (
        InProcessApi(tmp_path, llm_factory=scripted_factory(), params=params, warm_up=False) as srv,
        srv.client(srv.admin_key) as client,
    ):
        remaining, _ = start_trace(srv, client)
        assert remaining == 100 - made - planned  # the first trace's calls still count after the restart


def test_made_is_persisted_before_the_provider_answers(tmp_path: Path) -> None:
    """The finding: ``made`` was written only after a provider call returned, so a crash while calls were in
    flight lost calls the provider may bill. Now the ledger announces each call before it leaves and the job
    row holds it: with every provider call held open, the stored trace already counts them."""
    release = threading.Event()

    class HeldOpen:
        model = "openai/fake-judge"

        async def complete(self, request: LLMRequest) -> LLMResponse:
            while not release.is_set():
                await asyncio.sleep(0.02)
            return LLMResponse(text="5", model=self.model)

    params = {"concurrency": 3}
    with (
        InProcessApi(tmp_path, llm_factory=lambda model, base: HeldOpen(), params=params, warm_up=False) as srv,
        srv.client(srv.admin_key) as client,
    ):
        assert client.post("/v1/turns", json=small_turn()).status_code == 201
        quoted = client.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0"}).json()
        started = client.post("/v1/traces", json={"quote_id": quoted["quote_id"]})
        assert started.status_code == 202
        try:
            seen = 0
            for _ in range(200):
                seen = client.get(started.headers["location"]).json()["calls"]["made"]
                if seen >= 3:
                    break
                time.sleep(0.05)
            assert seen == 3  # three calls in flight (the concurrency cap), none answered yet
        finally:
            release.set()
        done = client.get(started.headers["location"], params={"wait": "true"}).json()
        assert done["status"] in ("succeeded", "failed")
        assert done["calls"]["made"] >= 3


def test_provider_errors_reach_tenants_without_the_operators_provider_url(tmp_path: Path) -> None:
    """The finding: a tenant saw the operator's internal provider URL in error text. Through the service's
    own litellm client, against a provider address where nothing listens, the failed trace says why without
    naming where the provider lives."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    base = f"http://127.0.0.1:{port}/v1"
    with (
        InProcessApi(
            tmp_path,
            judge_api_base=base,
            judge_api_key="sk-operator-secret",
            judge_timeout_seconds=5,
            judgement_cache=False,
            warm_up=False,
        ) as srv,
        srv.client(srv.key("acme", "alice")) as alice,
    ):
        assert alice.post("/v1/turns", json=small_turn(model="openai/internal-judge")).status_code == 201
        quoted = alice.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0"})
        assert quoted.status_code == 201, quoted.text
        started = alice.post("/v1/traces", json={"quote_id": quoted.json()["quote_id"]})
        assert started.status_code == 202, started.text
        done = alice.get(started.headers["location"], params={"wait": "true"})
        for _ in range(60):
            if done.json()["status"] in ("succeeded", "failed", "interrupted"):
                break
            done = alice.get(started.headers["location"], params={"wait": "true"})
        body = done.json()
        assert body["status"] == "failed" and "every model call failed" in body["reason"]
        assert "could not reach the provider" in body["reason"]
        shown = (
            json.dumps(body)
            + alice.get(f"{started.headers['location']}/events", headers={"Accept": "text/event-stream"}).text
        )
        for secret in (base, f"127.0.0.1:{port}", str(port), "sk-operator-secret"):
            assert secret not in shown, secret
