"""An SQLite file written by an agent framework, opened read-only; its queries run off the event loop."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from provenance_api.core.errors import InvalidInput
from provenance_api.operations.connectors.source import Source, SourceUnavailable


class SqliteStore:
    """A read-only connection to ``source.path`` holding ``table`` (else a clear error naming the format)."""

    def __init__(self, source: Source, table: str) -> None:
        path = source.path
        if path is None or not path.is_file():
            raise InvalidInput(
                f"url: no SQLite file at {path}",
                field="url",
                fix="check the path (sqlite:///relative.db or sqlite:////absolute.db)",
            )
        self.source = source
        self.conn = self._open(path)
        tables = {row[0] for row in self._rows("SELECT name FROM sqlite_master WHERE type = 'table'", ())}
        if table not in tables:
            self.conn.close()
            shown = ", ".join(sorted(tables)[:8]) or "none"
            raise InvalidInput(
                f"url: {path.name} has no {table} table, so it is no {source.format} store (tables: {shown})",
                field="format",
                fix="check --format: openai-agents-session files hold agent_messages, "
                "langgraph-sqlite files hold checkpoints",
            )

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, check_same_thread=False, timeout=15)
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1")
        except sqlite3.Error as exc:
            raise SourceUnavailable(
                f"cannot read {path.name} as SQLite: {exc}",
                field="url",
                fix="give an SQLite database file the framework wrote",
            ) from None
        return conn

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        try:
            return list(self.conn.execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            raise SourceUnavailable(
                f"reading {self.source.shown_url} failed: {exc}",
                field="url",
                fix="check the file is a complete database the framework wrote",
            ) from None

    async def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return await asyncio.to_thread(self._rows, sql, params)

    async def close(self) -> None:
        self.conn.close()
