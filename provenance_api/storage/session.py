"""The database handle: an async engine for any SQLAlchemy URL, sessions, and migrations.

SQLite (the default) runs in WAL mode with full fsync on commit, so a write the service
acknowledged survives the process being killed. Migrations are the alembic scripts shipped in
this package; ``Database.migrate()`` runs ``alembic upgrade head`` on the service's own engine.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

MIGRATIONS = Path(__file__).resolve().parent / "alembic"
MIGRATION_LOCK = 0x70726F76  # the Postgres advisory lock held while migrating


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _sqlite_pragmas(dbapi_connection: Any, connection_record: Any) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "busy_timeout=15000", "foreign_keys=ON"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def make_engine(url: str) -> AsyncEngine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        engine = create_async_engine(url, connect_args={"timeout": 15})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, pool_pre_ping=True)


class Database:
    """One engine and its session factory."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        async with self.sessions() as session:
            yield session

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A session whose work commits at the end of the block (or rolls back on error)."""
        async with self.sessions() as session, session.begin():
            yield session

    async def migrate(self) -> None:
        """``alembic upgrade head`` on this engine."""
        async with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":  # replicas starting together migrate one at a time
                await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
            await conn.run_sync(_upgrade)

    def _sqlite_file_problem(self) -> str | None:
        """For an SQLite file: why writes would not reach a database file anyone can open again — its file
        or directory removed (an open descriptor keeps writing into the unlinked inode) or made read-only."""
        parsed = make_url(self.url)
        if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
            return None
        path = Path(parsed.database.removeprefix("file:"))  # a URI filename (``?uri=true``) names the same file
        if not path.is_file():
            return f"database file {path.name} is missing (removed while the service runs?)"
        if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
            return f"database file {path.name} or its directory is read-only"
        return None

    async def ready(self) -> tuple[bool, str]:
        """Whether the database takes a write and its schema is at the shipped head. The write is real (the
        schema version row rewritten to itself, committed), so a read-only database or replica is not ready."""
        problem = self._sqlite_file_problem()
        if problem is not None:
            return False, problem
        try:
            async with self.engine.begin() as conn:
                current = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
                await conn.execute(text("UPDATE alembic_version SET version_num = version_num"))
        except Exception as exc:  # a readiness probe reports, it does not raise
            return False, f"database does not take a write: {type(exc).__name__}"
        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
        if current != head:
            return False, f"schema at {current}, expected {head}"
        return True, "ok"

    async def dispose(self) -> None:
        await self.engine.dispose()


def _upgrade(connection: Connection) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "head")
