"""Viewer sessions in storage: only the SHA-256 of a session token is kept, with the key it was opened with."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select

from provenance_api.storage.crud_keys import KeyRecord, _record
from provenance_api.storage.models import ApiKey, ViewerSession, utcnow
from provenance_api.storage.session import Database


@dataclass(frozen=True)
class SessionRecord:
    """A live session and the key it signs in as."""

    key: KeyRecord
    created_at: datetime
    rotated_at: datetime
    expires_at: datetime


async def open_session(db: Database, *, token_hash: str, key_id: str, ttl: timedelta) -> None:
    """Store a new session (expired ones are purged on the way)."""
    now = utcnow()
    async with db.transaction() as session:
        await session.execute(delete(ViewerSession).where(ViewerSession.expires_at <= now))
        session.add(
            ViewerSession(token_hash=token_hash, key_id=key_id, created_at=now, rotated_at=now, expires_at=now + ttl)
        )


async def find_session(db: Database, token_hash: str) -> SessionRecord | None:
    """The session with this token digest if it has not expired and its key is not revoked."""
    query = (
        select(ViewerSession, ApiKey)
        .join(ApiKey, ApiKey.id == ViewerSession.key_id)
        .where(ViewerSession.token_hash == token_hash)
    )
    async with db.session() as session:
        row = (await session.execute(query)).one_or_none()
    if row is None:
        return None
    viewer, key = row
    if viewer.expires_at <= utcnow() or key.revoked_at is not None:
        return None
    return SessionRecord(
        key=_record(key), created_at=viewer.created_at, rotated_at=viewer.rotated_at, expires_at=viewer.expires_at
    )


async def rotate_session(db: Database, old_hash: str, new_hash: str) -> bool:
    """Replace a session's token (same key and expiry); False when the old one is gone."""
    async with db.transaction() as session:
        row = await session.get(ViewerSession, old_hash)
        if row is None:
            return False
        session.add(
            ViewerSession(
                token_hash=new_hash,
                key_id=row.key_id,
                created_at=row.created_at,
                rotated_at=utcnow(),
                expires_at=row.expires_at,
            )
        )
        await session.delete(row)
    return True


async def close_session(db: Database, token_hash: str) -> None:
    async with db.transaction() as session:
        await session.execute(delete(ViewerSession).where(ViewerSession.token_hash == token_hash))
