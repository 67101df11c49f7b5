"""API keys: random bearer tokens bound to a tenant and a user, stored only as SHA-256 digests.

A key is shown once, when it is created (``provenance keys create`` or the local admin key on
first start) and can never be read back. Keys are 256-bit random, so a plain SHA-256 digest is a
safe verifier (no password stretching needed) and lets a request be authenticated by one indexed
lookup. The principal a key resolves to scopes every read and write to its tenant.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from provenance_api.core.errors import InvalidInput, Unauthorized
from provenance_api.core.settings import Settings
from provenance_api.storage import crud_keys, crud_sessions
from provenance_api.storage.crud_keys import KeyRecord
from provenance_api.storage.session import Database

KEY_PREFIX = "pvk_"
SESSION_PREFIX = "pvs_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant every query is scoped to, and the user budgets are counted for."""

    tenant: str
    user: str
    key_id: str
    admin: bool = False

    @property
    def budget_key(self) -> str:
        return f"{self.tenant}/{self.user}"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def check_name(value: str, what: str) -> str:
    if not _NAME.match(value):
        raise InvalidInput(
            f"{what} {value!r} is not a valid name",
            field=what,
            fix="use 1–128 characters: letters, digits, '.', '_', '@' or '-'",
        )
    return value


async def create_key(db: Database, tenant: str, user: str, *, admin: bool = False) -> tuple[KeyRecord, str]:
    """Create a key for (tenant, user). Returns the record and the plaintext key (shown once)."""
    check_name(tenant, "tenant")
    check_name(user, "user")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    record = await crud_keys.insert_key(
        db,
        key_id="key_" + secrets.token_hex(8),
        key_hash=hash_key(key),
        prefix=key[:10],
        tenant=tenant,
        user=user,
        admin=admin,
    )
    return record, key


_UNAUTHORIZED_FIX = "send 'Authorization: Bearer <key>'; create a key with: provenance keys create --tenant T --user U"


async def authenticate(db: Database, authorization: str | None) -> Principal:
    """Resolve an ``Authorization`` header to a principal, or raise Unauthorized (never saying why a
    given key failed beyond 'not valid', and never repeating it)."""
    if not authorization:
        raise Unauthorized("this endpoint needs an API key", field="Authorization", fix=_UNAUTHORIZED_FIX)
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized(
            "the Authorization header must use the Bearer scheme",
            field="Authorization",
            fix=_UNAUTHORIZED_FIX,
        )
    record = await crud_keys.find_by_hash(db, hash_key(token))
    if record is None or record.revoked:
        raise Unauthorized("the API key is not valid", field="Authorization", fix=_UNAUTHORIZED_FIX)
    return Principal(tenant=record.tenant, user=record.user, key_id=record.id, admin=record.admin)


async def open_viewer_session(db: Database, principal: Principal, ttl_seconds: int) -> str:
    """A new session token for the viewer's cookie (random; only its digest is stored)."""
    token = SESSION_PREFIX + secrets.token_urlsafe(32)
    await crud_sessions.open_session(
        db, token_hash=hash_key(token), key_id=principal.key_id, ttl=timedelta(seconds=ttl_seconds)
    )
    return token


async def session_principal(db: Database, token: str) -> tuple[Principal, crud_sessions.SessionRecord]:
    """Resolve a viewer session token, or raise Unauthorized (expired, signed out, or its key revoked)."""
    record = await crud_sessions.find_session(db, hash_key(token))
    if record is None:
        raise Unauthorized("the viewer session has ended", field="Cookie", fix="sign in again with an API key")
    key = record.key
    return Principal(tenant=key.tenant, user=key.user, key_id=key.id, admin=key.admin), record


async def rotate_viewer_session(db: Database, token: str) -> str | None:
    """A fresh token for the same session (the old one stops working); None when the session is gone."""
    new = SESSION_PREFIX + secrets.token_urlsafe(32)
    return new if await crud_sessions.rotate_session(db, hash_key(token), hash_key(new)) else None


async def close_viewer_session(db: Database, token: str) -> None:
    await crud_sessions.close_session(db, hash_key(token))


def write_secret_file(path: Path, content: str) -> None:
    """Write ``content`` to ``path`` readable by the owner only (0600), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, content.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


async def ensure_admin_key(db: Database, settings: Settings) -> str | None:
    """On first start (no keys at all), create the local admin key, store it owner-only in the data
    directory and return it; otherwise return None."""
    if await crud_keys.count_keys(db) > 0:
        return None
    _, key = await create_key(db, settings.admin_tenant, settings.admin_user, admin=True)
    write_secret_file(settings.admin_key_file, key + "\n")
    return key


def announce_admin_key(key: str, path: Path) -> None:
    """Print the new admin key once, on the console (never through the logs)."""
    sys.stdout.write(
        f"\nCreated the local admin key (shown once; also saved owner-only in {path}):\n\n    {key}\n\n"
        "Use it as:  Authorization: Bearer <key>\n\n"
    )
    sys.stdout.flush()
