"""The database handle: an async engine for any SQLAlchemy URL, sessions, and migrations.

SQLite (the default) runs in WAL mode with full fsync on commit, so a write the service
acknowledged survives the process being killed. Migrations are the alembic scripts shipped in
this package; ``Database.migrate()`` runs ``alembic upgrade head`` on the service's own engine.

Durability, not only writability: at start the service reads (or, the first time, writes) the database's random
instance id (``establish_identity``) and, for an SQLite file, notes which file and which write-ahead log it has open
(device and inode), keeping one idle connection open so the log is never deleted under it. Before every commit the
files are checked again — a database file replaced, recreated or overwritten, or its write-ahead log removed, means
the commit would go where no restart finds it — and the commit is refused (``StorageUnavailable``) instead; such a
fault holds until a restart. ``ready()`` also reads the instance id through a fresh connection, checks the free space
and proves a write. Driver errors that mean the storage cannot take data (disk full, I/O error, a damaged or
read-only database, a server unreachable) are raised as ``StorageUnavailable`` too, never as a bare driver error.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, event, select, text
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from provenance_api.storage.errors import StorageUnavailable
from provenance_api.storage.models import ServiceInstance, utcnow

MIGRATIONS = Path(__file__).resolve().parent / "alembic"
MIGRATION_LOCK = 0x70726F76  # the Postgres advisory lock held while migrating
INSTANCE = "service"  # the one row of service_instance
SQLITE_MAGIC = b"SQLite format 3\x00"
MIN_FREE_BYTES = 4 << 20
"""Below this much free space next to an SQLite database the service is not ready: SQLite's write-ahead log grows
by up to about 4 MiB (1000 pages) between checkpoints."""

log = logging.getLogger("provenance_api.storage")

# SQLite's error names (``sqlite3.Error.sqlite_errorname``; the message as a fallback): cause, detail, retry after.
_SQLITE_ERRORS: tuple[tuple[str, str, str, str, float | None], ...] = (
    ("SQLITE_READONLY_DBMOVED", "", "replaced", "the database file was moved or removed while the service runs", None),
    ("SQLITE_FULL", "database or disk is full", "disk-full", "the disk holding the database is full", 60.0),
    ("SQLITE_IOERR", "disk i/o error", "io-error", "the disk holding the database failed a read or a write", 30.0),
    ("SQLITE_CORRUPT", "database disk image is malformed", "corrupt", "the database file is damaged", None),
    ("SQLITE_NOTADB", "file is not a database", "not-a-database", "the database file is not a database", None),
    ("SQLITE_READONLY", "readonly database", "read-only", "the database refuses writes (read-only)", 60.0),
    ("SQLITE_CANTOPEN", "unable to open database file", "missing", "the database file cannot be opened", 30.0),
    ("SQLITE_BUSY", "database is locked", "busy", "the database stayed locked by another writer", 2.0),
    ("SQLITE_LOCKED", "database table is locked", "busy", "the database stayed locked by another writer", 2.0),
)
_PG_UNREACHABLE = "the database server is unreachable or shutting down"


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _postgres_unavailable(code: str) -> StorageUnavailable | None:
    if code.startswith("08") or code in ("57P01", "57P02", "57P03"):
        return StorageUnavailable(_PG_UNREACHABLE, cause="unreachable", retry_after=5.0)
    if code == "53100":
        return StorageUnavailable("the database server's disk is full", cause="disk-full", retry_after=60.0)
    if code.startswith("53"):
        return StorageUnavailable("the database server is out of memory or connections", cause="busy", retry_after=5.0)
    if code == "25006":
        return StorageUnavailable("the database server refuses writes (read-only)", cause="read-only", retry_after=60.0)
    if code == "58030":
        return StorageUnavailable(
            "the database server's disk failed a read or a write", cause="io-error", retry_after=30.0
        )
    if code in ("XX001", "XX002"):
        return StorageUnavailable("the database server reports damaged data", cause="corrupt")
    return None


def unavailable_from(exc: BaseException, dialect: str, *, is_disconnect: bool = False) -> StorageUnavailable | None:
    """The ``StorageUnavailable`` a driver error means, or None when it is not about the storage itself (a
    constraint, a bad statement…). Only the cause is kept: the driver's message may hold a path or a host."""
    for err in _chain(exc):
        if dialect == "sqlite":
            name = str(getattr(err, "sqlite_errorname", "") or "")
            message = str(err).lower()
            for prefix, fragment, cause, detail, retry in _SQLITE_ERRORS:
                if (name and name.startswith(prefix)) or (not name and fragment and fragment in message):
                    return StorageUnavailable(detail, cause=cause, retry_after=retry)
        else:
            code = getattr(err, "sqlstate", None) or getattr(err, "pgcode", None)
            if isinstance(code, str) and (found := _postgres_unavailable(code)) is not None:
                return found
    if is_disconnect:
        return StorageUnavailable(_PG_UNREACHABLE, cause="unreachable", retry_after=5.0)
    return None


def _on_driver_error(context: ExceptionContext) -> BaseException | None:
    """SQLAlchemy's ``handle_error`` hook: a storage failure is raised as ``StorageUnavailable`` instead. A
    cancellation (a job interrupted by shutdown in the middle of a query) is no storage failure: the driver
    reports the connection it had to drop as a disconnect, but the cancellation itself propagates."""
    if any(isinstance(err, asyncio.CancelledError) for err in _chain(context.original_exception)):
        return None
    return unavailable_from(context.original_exception, context.dialect.name, is_disconnect=context.is_disconnect)


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
        database = parsed.database or ""
        if database.startswith("file:"):  # an SQLite URI (uri=true): its path, without the query
            database = "" if parsed.query.get("mode") in ("ro", "memory") else database[5:].split("?", 1)[0]
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        engine = create_async_engine(url, connect_args={"timeout": 15})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, pool_pre_ping=True)


def _raised_by_driver(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside the database driver or SQLAlchemy (not by the caller's own code)."""
    tb = exc.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith(("asyncpg", "sqlalchemy", "aiosqlite")):
            return True
        tb = tb.tb_next
    return False


def _unreachable() -> StorageUnavailable:
    """A socket error from the driver (a PostgreSQL server refusing or dropping the connection, a connect that
    timed out) is ``StorageUnavailable``; SQLAlchemy's error hook never sees it, since asyncpg raises it bare.
    Its text names the server's address, so only the cause is kept."""
    return StorageUnavailable(_PG_UNREACHABLE, cause="unreachable", retry_after=5.0)


def _sqlite_file(url: str) -> Path | None:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database.removeprefix("file:"))  # a URI filename (``?uri=true``) names the same file


def _header(fd: int) -> tuple[bool, int]:
    """Whether the file starts as an SQLite database does, and its header's user_version.

    Read through a descriptor the service keeps open from start to stop, never a fresh ``open``: closing any
    descriptor of a file drops every POSIX lock the process holds on it, SQLite's included, and another process
    closing its last connection (``provenance keys create``) would then delete the write-ahead log under the
    service."""
    head = os.pread(fd, 100, 0)
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        return False, 0
    return True, int.from_bytes(head[60:64], "big")


def _file_id(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


class Database:
    """One engine and its session factory."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self.instance_id: str | None = None  # set by establish_identity (the service's start)
        self._file = _sqlite_file(url)
        self._db_id: tuple[int, int] | None = None  # (device, inode) of the SQLite file the service opened
        self._wal_id: tuple[int, int] | None = None  # and of its write-ahead log
        self._verified: tuple[int, int] | None = None  # (mtime, size) of the file when its identity was last read
        self._fault: StorageUnavailable | None = None  # a fault only a restart clears
        self._keeper: sqlite3.Connection | None = None  # holds the write-ahead log open (and can checkpoint it)
        self._header_fd: int | None = None  # reads the file's header without ever closing a descriptor of it
        self._tag = 0  # the instance's tag in the SQLite header (user_version)
        self._tag_before = 0  # the header's value when the service started
        self._tag_on_disk = False
        event.listen(self.engine.sync_engine, "handle_error", _on_driver_error)
        event.listen(self.engine.sync_engine, "commit", self._before_commit)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        try:
            async with self.sessions() as session:
                yield session
        except OSError as exc:
            if _raised_by_driver(exc):
                raise _unreachable() from None
            raise

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A session whose work commits at the end of the block (or rolls back on error)."""
        try:
            async with self.sessions() as session, session.begin():
                yield session
        except OSError as exc:
            if _raised_by_driver(exc):
                raise _unreachable() from None
            raise

    async def migrate(self) -> None:
        """``alembic upgrade head`` on this engine."""
        async with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":  # replicas starting together migrate one at a time
                await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
            await conn.run_sync(_upgrade)

    async def establish_identity(self) -> str:
        """Read the database's instance id, writing a random one the first time; for an SQLite file, also note the
        file and write-ahead log now open and keep one idle connection on them. From here on every commit and
        every readiness probe checks that the service still writes where a restart will read."""
        try:
            async with self.transaction() as session:
                found = await session.scalar(
                    select(ServiceInstance.instance_id).where(ServiceInstance.name == INSTANCE)
                )
                if found is None:
                    found = secrets.token_hex(16)
                    session.add(ServiceInstance(name=INSTANCE, instance_id=found, created_at=utcnow()))
        except IntegrityError:  # another replica wrote it first
            async with self.session() as session:
                found = await session.scalar(
                    select(ServiceInstance.instance_id).where(ServiceInstance.name == INSTANCE)
                )
        assert found is not None
        if self._file is not None:
            keeper = sqlite3.connect(self._file, timeout=15, isolation_level=None, check_same_thread=False)
            for pragma in ("busy_timeout=15000", "synchronous=FULL"):
                keeper.execute(f"PRAGMA {pragma}")
            mode = keeper.execute("PRAGMA journal_mode").fetchone()[0]
            if keeper.execute(
                f"SELECT instance_id FROM {ServiceInstance.__tablename__} WHERE name = ?", (INSTANCE,)
            ).fetchone() != (found,):
                keeper.close()
                raise StorageUnavailable("the database changed while the service started", cause="replaced")
            # the header's user_version carries a tag of the instance id, so the raw file names its database even
            # while the write-ahead log (which a fresh connection reads first) still holds the identity row
            self._tag = (int(found[:8], 16) & 0x7FFFFFFF) or 1
            if keeper.execute("PRAGMA user_version").fetchone()[0] != self._tag:
                keeper.execute(f"PRAGMA user_version = {self._tag}")
            keeper.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()  # the tag onto the file itself
            self._header_fd = os.open(self._file, os.O_RDONLY)
            self._tag_before = _header(self._header_fd)[1]
            self._keeper = keeper
            self._db_id = _file_id(self._file)
            self._wal_id = _file_id(self._wal) if str(mode).lower() == "wal" else None
        self.instance_id = found
        return found

    def _header_problem(self) -> StorageUnavailable | None:
        """The file's own header: still an SQLite database, and still tagged with this instance (the tag may
        reach the file only at a later checkpoint; until it has, the value found at start is accepted)."""
        assert self._file is not None
        try:
            assert self._header_fd is not None
            magic, tag = _header(self._header_fd)
        except OSError:
            return StorageUnavailable("the database file cannot be read", cause="io-error", retry_after=30.0)
        if not magic:
            return self._hold(
                StorageUnavailable("the database file is not a database any more (overwritten)", cause="not-a-database")
            )
        if tag == self._tag:
            self._tag_on_disk = True
        elif self._tag_on_disk or tag != self._tag_before:
            return self._hold(StorageUnavailable("the database file now holds another database", cause="replaced"))
        return None

    @property
    def _wal(self) -> Path:
        assert self._file is not None
        return self._file.with_name(self._file.name + "-wal")

    def _hold(self, fault: StorageUnavailable) -> StorageUnavailable:
        """Keep ``fault`` until a restart; when the write-ahead log was removed, first copy what it held into the
        database file (a checkpoint through the connection that still has the removed log open)."""
        if self._fault is None:
            self._fault = fault
            log.error("storage fault: writes refused until the service restarts (%s)", fault.cause)
            if fault.cause == "wal-lost" and self._keeper is not None:
                try:
                    _busy, frames, copied = self._keeper.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    log.warning("checkpointed the removed write-ahead log: %s of %s frames copied", copied, frames)
                except sqlite3.Error as exc:
                    log.error("could not checkpoint the removed write-ahead log: %s", type(exc).__name__)
        return self._fault

    def _identity_on_disk(self) -> StorageUnavailable | None:
        """Open the database file afresh (read-only), as a restart would, and read its instance id."""
        assert self._file is not None
        try:
            fresh = sqlite3.connect(f"file:{quote(str(self._file))}?mode=ro", uri=True, timeout=5)
            try:
                row = fresh.execute(
                    f"SELECT instance_id FROM {ServiceInstance.__tablename__} WHERE name = ?", (INSTANCE,)
                ).fetchone()
            finally:
                fresh.close()
        except sqlite3.Error as exc:
            found = unavailable_from(exc, "sqlite")
            if found is None:  # no service_instance table: not this service's database
                return self._hold(StorageUnavailable("the database file now holds another database", cause="replaced"))
            return self._hold(found) if found.cause in ("corrupt", "not-a-database") else found
        if row is None or row[0] != self.instance_id:
            return self._hold(StorageUnavailable("the database file now holds another database", cause="replaced"))
        return None

    def durability_fault(self, *, read_identity: bool = False) -> StorageUnavailable | None:
        """Why a commit now would not reach the database a restart opens, or None. Cheap (two ``stat`` calls)
        unless the database file changed since its identity was last read, or ``read_identity``."""
        if self._fault is not None:
            return self._fault
        if self._file is None or self._db_id is None:
            return None
        try:
            st = os.stat(self._file)
        except FileNotFoundError:
            return StorageUnavailable(
                "the database file is missing (moved or removed while the service runs)",
                cause="missing",
                retry_after=30.0,
            )
        except OSError:
            return StorageUnavailable("the database file cannot be examined", cause="io-error", retry_after=30.0)
        if (st.st_dev, st.st_ino) != self._db_id:
            return self._hold(
                StorageUnavailable("the database file was replaced while the service runs", cause="replaced")
            )
        if self._wal_id is not None:
            try:
                wal = _file_id(self._wal)
            except OSError:
                wal = None
            if wal != self._wal_id:
                return self._hold(
                    StorageUnavailable(
                        "the database's write-ahead log was removed or replaced while the service runs",
                        cause="wal-lost",
                    )
                )
        stamp = (st.st_mtime_ns, st.st_size)
        if read_identity or stamp != self._verified:
            problem = self._header_problem() or self._identity_on_disk()
            if problem is not None:
                return problem
            self._verified = stamp
        return None

    def _before_commit(self, conn: Connection) -> None:
        fault = self.durability_fault()
        if fault is not None:
            raise fault

    def _free_space_problem(self) -> str | None:
        if self._file is None:
            return None
        try:
            fs = os.statvfs(self._file.parent)
        except OSError:
            return None
        free = fs.f_bavail * fs.f_frsize
        if free < MIN_FREE_BYTES:
            return f"the disk holding the database is full ({free // 1024} KiB free)"
        return None

    def _sqlite_file_problem(self) -> str | None:
        """For an SQLite file: why writes would not reach a database file anyone can open again — its file
        or directory removed (an open descriptor keeps writing into the unlinked inode) or made read-only."""
        path = self._file
        if path is None:
            return None
        if not path.is_file():
            return f"database file {path.name} is missing (removed while the service runs?)"
        if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
            return f"database file {path.name} or its directory is read-only"
        return None

    async def ready(self) -> tuple[bool, str]:
        """Whether the database durably takes a write and its schema is at the shipped head: it is the database
        the service started on (same file, same write-ahead log, same instance id read afresh), there is room on
        its disk, and a real write commits (the schema version row rewritten to itself), so a read-only database
        or replica is not ready."""
        problem = self._sqlite_file_problem()
        if problem is not None:
            return False, problem
        fault = self.durability_fault(read_identity=True)
        if fault is not None:
            return False, fault.detail
        problem = self._free_space_problem()
        if problem is not None:
            return False, problem
        try:
            async with self.engine.begin() as conn:
                current = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
                if self.instance_id is not None:
                    stored = await conn.scalar(
                        select(ServiceInstance.instance_id).where(ServiceInstance.name == INSTANCE)
                    )
                    if stored != self.instance_id:
                        raise self._hold(StorageUnavailable("the database holds another database", cause="replaced"))
                await conn.execute(text("UPDATE alembic_version SET version_num = version_num"))
        except StorageUnavailable as exc:
            return False, exc.detail
        except Exception as exc:  # a readiness probe reports, it does not raise
            return False, f"database does not take a write: {type(exc).__name__}"
        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
        if current != head:
            return False, f"schema at {current}, expected {head}"
        return True, "ok"

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None
        if self._header_fd is not None:
            os.close(self._header_fd)
            self._header_fd = None


def _upgrade(connection: Connection) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "head")
