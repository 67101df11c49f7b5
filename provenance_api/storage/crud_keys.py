"""API keys in storage: only their SHA-256 digest and a short display prefix are kept."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from provenance_api.storage.models import ApiKey, utcnow
from provenance_api.storage.session import Database


@dataclass(frozen=True)
class KeyRecord:
    id: str
    prefix: str
    tenant: str
    user: str
    admin: bool
    created_at: datetime
    revoked: bool


def _record(row: ApiKey) -> KeyRecord:
    return KeyRecord(
        id=row.id,
        prefix=row.prefix,
        tenant=row.tenant,
        user=row.user,
        admin=row.admin,
        created_at=row.created_at,
        revoked=row.revoked_at is not None,
    )


async def insert_key(
    db: Database, *, key_id: str, key_hash: str, prefix: str, tenant: str, user: str, admin: bool = False
) -> KeyRecord:
    row = ApiKey(
        id=key_id,
        key_hash=key_hash,
        prefix=prefix,
        tenant=tenant,
        user=user,
        admin=admin,
        created_at=utcnow(),
        revoked_at=None,
    )
    async with db.transaction() as session:
        session.add(row)
    return _record(row)


async def find_by_hash(db: Database, key_hash: str) -> KeyRecord | None:
    async with db.session() as session:
        row = (await session.execute(select(ApiKey).where(ApiKey.key_hash == key_hash))).scalar_one_or_none()
    return None if row is None else _record(row)


async def count_keys(db: Database) -> int:
    async with db.session() as session:
        return int((await session.execute(select(func.count()).select_from(ApiKey))).scalar_one())


async def list_keys(db: Database, tenant: str | None = None) -> list[KeyRecord]:
    query = select(ApiKey).order_by(ApiKey.created_at)
    if tenant is not None:
        query = query.where(ApiKey.tenant == tenant)
    async with db.session() as session:
        return [_record(r) for r in (await session.execute(query)).scalars()]


async def revoke_key(db: Database, key_id: str) -> bool:
    async with db.transaction() as session:
        row = await session.get(ApiKey, key_id)
        if row is None or row.revoked_at is not None:
            return False
        row.revoked_at = utcnow()
    return True
