"""An incremental import of one history source into one tenant's stored turns.

The tenant's cursor on the source (``import_cursors``) holds the position its last import reached. A run
asks the source what changed after it, imports each changed conversation whole (through the same path as
``provenance import`` files: every turn idempotent, every failure isolated and reported), then moves the
cursor to the position it read up to — unless a turn conflicted with a stored one: then the cursor stays, so
the next run reads those conversations again and reports them again rather than "nothing new". A
conversation is read only up to that position, so what arrives during the run is left for the next one.
Turns of a changed conversation that were imported before come back ``unchanged`` (matched by content, so
a history trimmed or summarised since still finds them); conversations with nothing new are not read at
all. Conversation ids are ``<store>#<thread>`` with ``Source.store`` named by what the store is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provenance_api.core.redaction import Redactor
from provenance_api.operations import imports as bulk
from provenance_api.operations.connectors.agents_session import AgentsSessionReader
from provenance_api.operations.connectors.langgraph_checkpoint import LangGraphPostgresReader, LangGraphSqliteReader
from provenance_api.operations.connectors.source import Reader, Source
from provenance_api.storage import crud_sources
from provenance_api.storage.session import Database


async def open_reader(source: Source) -> Reader:
    if source.format == "openai-agents-session":
        return AgentsSessionReader(source)
    if source.format == "langgraph-sqlite":
        return LangGraphSqliteReader(source)
    return await LangGraphPostgresReader.open(source)


@dataclass
class SourceImport:
    """The import counts of one run, and how far it read: ``since`` the position before it (``None``: the
    first import), ``position`` after it; ``changed`` of ``total`` conversations had anything new."""

    source: Source
    noun: str
    counts: bulk.ImportCounts
    since: str | None
    position: str | None
    changed: int
    total: int

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.counts.to_dict(),
            "source": {
                "name": self.source.name,
                "format": self.source.format,
                "url": self.source.shown_url,
                "first_import": self.since is None,
                "since": self.since,
                "position": self.position,
                "conversations_changed": self.changed,
                "conversations_total": self.total,
            },
        }

    @property
    def nouns(self) -> str:
        """The reader's noun (``threads``) in the number of ``total``: 1 thread, 2 threads."""
        return self.noun.removesuffix("s") if self.total == 1 else self.noun

    def line(self) -> str:
        where = f"{self.source.name} ({self.source.format})"
        if self.since is None:
            head = f"{where}: first import, {self.changed} of {self.total} {self.nouns} read"
        elif not self.changed:
            return f"{where}: nothing new since the last import (position {self.since}); {self.total} {self.nouns}"
        else:
            head = (
                f"{where}: {self.changed} of {self.total} {self.nouns} changed since the last import "
                f"(position {self.since} → {self.position})"
            )
        return f"{head}; {self.counts.line()}"


async def import_source(
    db: Database,
    tenant: str,
    user: str,
    source: Source,
    *,
    max_turn_bytes: int | None = None,
    progress: Callable[[bulk.ImportCounts, int], None] | None = None,
    redactor: Redactor | None = None,
) -> SourceImport:
    """Import what is new in ``source`` for ``tenant`` and move its cursor. A source that cannot be read
    raises (``SourceUnavailable`` / ``InvalidInput``) and leaves the cursor where it was. A turn whose stored
    form is over ``max_turn_bytes`` is rejected alone. ``progress(counts, conversations to read)`` is called
    after each conversation."""
    reader = await open_reader(source)
    try:
        cursor = await crud_sources.get_cursor(db, tenant, source.key)
        since = cursor.position if cursor else None
        changes = await reader.changes(since)
        counts = bulk.ImportCounts(max_turn_bytes=max_turn_bytes, redactor=redactor)
        writer = bulk.TurnWriter(db, tenant, user, counts)
        if changes.restarted:
            counts.note(
                source.name,
                f"the source holds less than at the last import (position {since}; now "
                f"{changes.position}): recreated or restored? Read from the start",
            )
        upto = changes.position
        for ident in changes.changed:
            conversation = await reader.conversation(ident, upto or "")
            counts.conversations += 1
            for where, reason in conversation.issues:
                counts.reject(where, reason)
            if conversation.obj is not None:
                item = bulk.Item(
                    conversation.where, source.store, 0, obj=conversation.obj, aliases=source.earlier_names
                )
                await bulk.import_one(db, tenant, user, item, reader.importer, counts, writer)
            if progress is not None:
                progress(counts, len(changes.changed))
        await writer.flush()
        for caveat in reader.caveats:
            counts.note(source.name, caveat)
        if counts.conflicting and upto is not None:
            counts.note(
                source.name,
                f"{counts.conflicting} turn(s) conflict with stored turns: the position stays at "
                f"{since or 'the start'} so the next import reads these conversations again (delete the stored "
                "turns named to take the new ones)",
            )
            upto = None
        if upto is not None:
            await crud_sources.put_cursor(db, tenant, source.key, upto, changes.total)
    finally:
        await reader.close()
    return SourceImport(source, reader.noun, counts, since, upto or since, len(changes.changed), changes.total)
