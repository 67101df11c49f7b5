"""An SQLite file written by an agent framework, read without writing anything: not into it, not beside it.

A read-only connection (``mode=ro``) to a database in write-ahead-log mode creates its ``-wal`` and ``-shm``
files when they are missing and, unable to checkpoint, leaves them behind when it closes; and it cannot open
such a database at all in a directory it may not write. So each query picks how to open the file:

* **WAL mode, no ``-wal`` beside it** (nobody is writing it; every write is in the file itself): ``immutable=1``,
  which opens no other file and takes no lock. The file's identity, size and modification time are compared
  before and after the query; a query during which the file changed (a writer started and checkpointed) is run
  again, and after three such changes it is read as a live store.
* **WAL mode with a ``-wal`` beside it** (a live writer; its files already exist) **or a rollback-journal file**
  (a reader creates no file): ``mode=ro``, one connection per query, closed as soon as it is answered. A reader
  holding a connection while the last writer closes would keep that writer from removing its ``-wal`` and
  ``-shm``, and then leave them itself; the window is now one query.
* ``mode=ro`` cannot open it (a read-only directory where the ``-shm`` is missing, or one it may not map):
  ``immutable=1`` as above, and ``caveats`` says that what the write-ahead log holds (writes not yet
  checkpointed into the file) was not read; the import shows it as a note.

Queries run off the event loop.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

from provenance_api.core.errors import InvalidInput
from provenance_api.operations.connectors.source import Source, SourceUnavailable

WAL_HEADER = b"\x02\x02"  # bytes 18-19 of the header: the file's write and read versions, 2 in WAL mode
RETRIES = 3

Stamp = tuple[int, int, int, int]


class SqliteStore:
    """Read-only queries on ``source.path``, which must hold ``table`` (else a clear error naming the format)."""

    def __init__(self, source: Source, table: str) -> None:
        path = source.path
        if path is None or not path.is_file():
            raise InvalidInput(
                f"url: no SQLite file at {path}",
                field="url",
                fix="check the path (sqlite:///relative.db or sqlite:////absolute.db)",
            )
        self.source = source
        self.path: Path = path
        self.caveats: list[str] = []  # what a reader should know about how the store was read
        self._frozen: sqlite3.Connection | None = None  # the immutable connection, while the file is unchanged
        self._stamp: Stamp | None = None
        self._lock = threading.Lock()
        tables = {row[0] for row in self._rows("SELECT name FROM sqlite_master WHERE type = 'table'", ())}
        if table not in tables:
            self._close()
            shown = ", ".join(sorted(tables)[:8]) or "none"
            raise InvalidInput(
                f"url: {path.name} has no {table} table, so it is no {source.format} store (tables: {shown})",
                field="format",
                fix="check --format: openai-agents-session files hold agent_messages, "
                "langgraph-sqlite files hold checkpoints",
            )

    # ------------------------------------------------------------------------------------------ opening

    @property
    def _wal(self) -> Path:
        return self.path.with_name(self.path.name + "-wal")

    def _stamp_now(self) -> Stamp:
        st = os.stat(self.path)
        return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns

    def _wal_mode(self) -> bool:
        with self.path.open("rb") as fh:
            return fh.read(20)[18:20] == WAL_HEADER

    def _connect(self, how: str) -> sqlite3.Connection:
        conn = sqlite3.connect(f"file:{quote(str(self.path))}?{how}", uri=True, check_same_thread=False, timeout=15)
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1")
        except BaseException:
            conn.close()
            raise
        return conn

    def _unreadable(self, exc: BaseException) -> SourceUnavailable:
        return SourceUnavailable(
            f"cannot read {self.path.name} as SQLite: {exc}",
            field="url",
            fix="give an SQLite database file the framework wrote, readable by this user",
        )

    def _failed(self, exc: sqlite3.Error) -> SourceUnavailable:
        return SourceUnavailable(
            f"reading {self.source.shown_url} failed: {exc}",
            field="url",
            fix="check the file is a complete database the framework wrote",
        )

    # ------------------------------------------------------------------------------------------ reading

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                frozen = self._wal_mode() and not self._wal.exists()
            except OSError as exc:
                raise self._unreadable(exc) from None
            if not frozen:
                try:
                    return self._live_rows(sql, params)
                except sqlite3.Error as exc:  # mode=ro cannot open it
                    if not self._wal_mode_safe():
                        raise self._unreadable(exc) from None
                    self._note_unread_log()
            return self._frozen_rows(sql, params)

    def _wal_mode_safe(self) -> bool:
        """Whether the immutable fallback can read the file (it is SQLite in WAL mode)."""
        try:
            return self._wal_mode()
        except OSError:
            return False

    def _note_unread_log(self) -> None:
        try:
            size = self._wal.stat().st_size
        except OSError:
            size = 0
        if size and not self.caveats:
            self.caveats.append(
                f"{self.path.name} could not be opened read-only with its write-ahead log ({self._wal.name}, "
                f"{size:,} bytes; the directory is read-only?), so it was read without it: writes not yet "
                "checkpointed into the file are not imported until the writer checkpoints or closes it"
            )

    def _frozen_rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        for _ in range(RETRIES):
            try:
                stamp = self._stamp_now()
                if self._frozen is None or stamp != self._stamp:
                    self._close()
                    self._frozen = self._connect("immutable=1")
                    self._stamp = stamp
            except (OSError, sqlite3.Error) as exc:
                raise self._unreadable(exc) from None
            try:
                rows = list(self._frozen.execute(sql, params).fetchall())
            except sqlite3.Error as exc:
                if self._unchanged(stamp):  # not a read torn by a writer: the file itself is at fault
                    raise self._failed(exc) from None
                continue
            if self._unchanged(stamp):
                return rows
        self._close()  # changed under every read: a writer is live, and so are its files
        try:
            return self._live_rows(sql, params)
        except sqlite3.Error as exc:
            raise self._unreadable(exc) from None

    def _unchanged(self, stamp: Stamp) -> bool:
        try:
            return self._stamp_now() == stamp
        except OSError:
            return False

    def _live_rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        conn = self._connect("mode=ro")
        try:
            return list(conn.execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            raise self._failed(exc) from None
        finally:
            conn.close()

    async def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return await asyncio.to_thread(self._rows, sql, params)

    def _close(self) -> None:
        if self._frozen is not None:
            self._frozen.close()
            self._frozen = None

    async def close(self) -> None:
        with self._lock:
            self._close()
