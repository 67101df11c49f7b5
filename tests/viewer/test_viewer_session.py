"""The viewer's sign-in is a server-side session: the finding was that the cookie held the raw API key, so
signing out could not revoke it and a copied cookie was the key itself.

Over real HTTP against the real app and database: the cookie carries a random session token (never the key),
signing out ends the session server-side (a copied cookie stops working), revoking the key ends its sessions,
a session expires, and its token is rotated (the old token stops working).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import httpx
from support.api_server import ApiServer, scripted_factory, small_turn

from provenance_api.http.ui_auth import COOKIE_NAME
from provenance_api.operations.auth import hash_key
from provenance_api.storage.crud_keys import list_keys, revoke_key
from provenance_api.storage.session import Database


def _sign_in(srv: ApiServer, key: str) -> tuple[httpx.Client, str]:
    client = httpx.Client(base_url=srv.base_url, timeout=30)
    signed = client.post("/ui/session", json={"api_key": key})
    assert signed.status_code == 200, signed.text
    return client, client.cookies[COOKIE_NAME]


def _replay(srv: ApiServer, token: str) -> int:
    """A request carrying only a copied cookie value."""
    with httpx.Client(base_url=srv.base_url, timeout=30, cookies={COOKIE_NAME: token}) as thief:
        return thief.get("/v1/turns").status_code


def test_session_cookie_holds_a_random_token_never_the_api_key(tmp_path: Path) -> None:
    with ApiServer(tmp_path, llm_factory=scripted_factory(), warm_up=False) as srv:
        key = srv.admin_key
        client, token = _sign_in(srv, key)
        with closing(client):
            assert token.startswith("pvs_") and key not in token and token != key
            header = client.post("/ui/session", json={"api_key": key}).headers["set-cookie"]
            max_age = int(re.search(r"(?i)max-age=(\d+)", header).group(1))  # type: ignore[union-attr]
            assert max_age <= 8 * 3600
            assert client.get("/v1/turns").status_code == 200
        stored = sqlite3.connect(tmp_path / "provenance.db").execute("SELECT token_hash FROM viewer_sessions")
        hashes = [row[0] for row in stored]
        assert hashes and all(len(h) == 64 for h in hashes)
        assert not any(client.cookies.get(COOKIE_NAME, "") in h for h in hashes)


def test_signing_out_ends_the_session_server_side_so_a_copied_cookie_stops_working(tmp_path: Path) -> None:
    with ApiServer(tmp_path, llm_factory=scripted_factory(), warm_up=False) as srv:
        client, token = _sign_in(srv, srv.admin_key)
        with closing(client):
            assert client.post("/v1/turns", json=small_turn()).status_code == 201
            assert _replay(srv, token) == 200
            assert client.post("/ui/logout").status_code == 200
        assert _replay(srv, token) == 401


def test_signing_in_again_closes_the_earlier_session_of_that_browser(tmp_path: Path) -> None:
    with ApiServer(tmp_path, llm_factory=scripted_factory(), warm_up=False) as srv:
        client, first = _sign_in(srv, srv.admin_key)
        with closing(client):
            assert client.post("/ui/session", json={"api_key": srv.admin_key}).status_code == 200
            second = client.cookies[COOKIE_NAME]
            assert second != first
            assert _replay(srv, first) == 401 and _replay(srv, second) == 200


def test_revoking_the_key_ends_its_viewer_sessions(tmp_path: Path) -> None:
    with ApiServer(tmp_path, llm_factory=scripted_factory(), warm_up=False) as srv:
        user_key = srv.key("acme", "alice")
        client, token = _sign_in(srv, user_key)
        client.close()
        assert _replay(srv, token) == 200

        async def revoke() -> None:
            db = Database(srv.settings.effective_database_url)
            alice = next(k for k in await list_keys(db, "acme") if k.user == "alice")
            assert await revoke_key(db, alice.id)
            await db.dispose()

        asyncio.run(revoke())
        assert _replay(srv, token) == 401


def test_an_expired_session_is_refused_and_reported_signed_out(tmp_path: Path) -> None:
    with ApiServer(tmp_path, llm_factory=scripted_factory(), warm_up=False) as srv:
        client, token = _sign_in(srv, srv.admin_key)
        with sqlite3.connect(tmp_path / "provenance.db") as db:
            db.execute(
                "UPDATE viewer_sessions SET expires_at = '2000-01-01 00:00:00' WHERE token_hash = ?", (hash_key(token),)
            )
        with closing(client):
            assert client.get("/v1/turns").status_code == 401
            state = client.get("/ui/session")
            assert state.json() == {"signed_in": False}
            assert COOKIE_NAME not in client.cookies


def test_the_session_token_is_rotated_and_the_old_one_stops_working(tmp_path: Path) -> None:
    with ApiServer(tmp_path, llm_factory=scripted_factory(), warm_up=False, viewer_session_rotate_seconds=1) as srv:
        client, old = _sign_in(srv, srv.admin_key)
        with closing(client):
            time.sleep(1.2)
            state = client.get("/ui/session")
            assert state.json()["signed_in"] is True
            new = client.cookies[COOKIE_NAME]
            assert new != old
            assert client.get("/v1/turns").status_code == 200
        assert _replay(srv, old) == 401 and _replay(srv, new) == 200
