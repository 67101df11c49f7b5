"""Search over stored turns from an index, and list cursors that are per tenant — on SQLite and Postgres.

The findings: search read and parsed every stored turn of the tenant on every query (4.2 s per query at
4,105 turns), and the list cursor was the global sequence number, so a tenant saw how much others stored.
The reference for "matches" here is written independently of the index: case-folded, whitespace-collapsed
substring over the turn's id, agent, model, query and response.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from support.api_server import InProcessApi, scripted_factory, small_turn
from support.services import DbBackend

from provenance_api.storage.session import Database

WORDS = ["Refund", "refund", "baggage", "DHL", "Seat 12A", "50% off", "under_score", 'say "hi"', "A-1", "Ω-unit"]


def _turns() -> list[dict[str, Any]]:
    turns = []
    for i in range(30):
        word = WORDS[i % len(WORDS)]
        turns.append(
            small_turn(
                f"search-{i:02d}",
                agent="support bot" if i % 2 else "Sales  Agent",
                response=f"Turn {i}: about {word}   and more.",
                query=f"Question {i} on {word.upper()}?",
            )
        )
    return turns


def _reference(turns: list[dict[str, Any]], needle: str) -> list[str]:
    def norm(s: str) -> str:
        return re.sub(r"\s+", " ", s.casefold()).strip()

    want = norm(needle)
    return [
        t["turn_id"]
        for t in turns
        if want in norm("\n".join([t["turn_id"], t["agent"], t["model"], t["query"], t["response"]]))
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, db_backend: DbBackend) -> Iterator[InProcessApi]:
    with InProcessApi(
        tmp_path_factory.mktemp("search"),
        llm_factory=scripted_factory(),
        warm_up=False,
        database_url=db_backend.fresh_url(),
    ) as srv:
        with srv.client(srv.admin_key) as admin:
            for turn in _turns():
                assert admin.post("/v1/turns", json=turn).status_code == 201
        other = srv.key("other", "eve")
        with srv.client(other) as eve:
            assert (
                eve.post("/v1/turns", json=small_turn("eve-secret", response="Refund of eve's DHL.")).status_code == 201
            )
        yield srv


def _search(client: httpx.Client, path: str, q: str, limit: int = 7) -> list[str]:
    found: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"q": q, "limit": limit, "sort": "stored_at"}
        if cursor:
            params["cursor"] = cursor
        page = client.get(path, params=params)
        assert page.status_code == 200, page.text
        body = page.json()
        found += [t["turn_id"] for t in body["items"]]
        cursor = body["next_cursor"]
        if not cursor:
            return found


@pytest.mark.parametrize(
    "needle",
    [
        "refund",
        "REFUND",
        "dhl",
        "seat 12a",
        "50%",
        "under_score",
        "_",
        '"hi"',
        "a-1",
        "ω-unit",
        "sales agent",
        "search-1",
        "zz-nothing",
        "e",
        "turn 2:",
    ],
)
@pytest.mark.parametrize("path", ["/v1/turns", "/ui/api/turns"])
def test_search_answers_exactly_the_substring_matches_in_storage_order(
    server: InProcessApi, needle: str, path: str
) -> None:
    with server.client(server.admin_key) as client:
        assert _search(client, path, needle) == _reference(_turns(), needle)


def test_search_never_returns_another_tenants_turns(server: InProcessApi) -> None:
    with server.client(server.admin_key) as client:
        assert "eve-secret" not in _search(client, "/v1/turns", "refund")
    with server.client(server.key("other", "eve2")) as eve:
        assert _search(eve, "/v1/turns", "refund") == ["eve-secret"]


def test_list_cursor_is_per_tenant_and_reveals_no_global_sequence(server: InProcessApi) -> None:
    with server.client(server.admin_key) as client:
        first = client.get("/v1/turns", params={"limit": 3}).json()
        cursor = first["next_cursor"]
        assert not cursor.isdigit()
        decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode())
        assert decoded["t"] == first["items"][-1]["turn_id"]  # the position: the last turn's id and sort key
        assert set(decoded) == {"v", "f", "k", "t"} and not isinstance(decoded["k"], int)
    with server.client(server.key("other", "eve3")) as eve:
        refused = eve.get("/v1/turns", params={"cursor": cursor})
        assert refused.status_code == 422 and refused.json()["field"] == "query.cursor"


def test_turns_stored_before_the_index_existed_are_indexed_at_startup(tmp_path: Path) -> None:
    with InProcessApi(tmp_path, llm_factory=scripted_factory(), warm_up=False) as srv, srv.client(srv.admin_key) as c:
        for turn in _turns()[:5]:
            assert c.post("/v1/turns", json=turn).status_code == 201

    async def forget() -> None:
        db = Database(f"sqlite+aiosqlite:///{tmp_path / 'provenance.db'}")
        async with db.transaction() as session:
            await session.execute(text("DELETE FROM turn_search"))
        await db.dispose()

    asyncio.run(forget())
    with InProcessApi(tmp_path, llm_factory=scripted_factory(), warm_up=False) as srv, srv.client(srv.admin_key) as c:
        assert _search(c, "/v1/turns", "refund") == _reference(_turns()[:5], "refund")
