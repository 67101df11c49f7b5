"""A history source: where an agent framework keeps its history (a URL) and how it writes it (a format).

Formats (``SOURCE_FORMATS``): ``openai-agents-session`` (the OpenAI Agents SDK's ``SQLiteSession`` file,
``sqlite:///agent.db``), ``langgraph-sqlite`` (LangGraph's ``SqliteSaver``, ``sqlite:///checkpoints.db``) and
``langgraph-postgres`` (its ``PostgresSaver``, ``postgresql://user:pass@host/db``). A reader lists what
changed since a position and reads one conversation as its importer expects it; nothing here writes to
the source (SQLite files are opened read-only).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol
from urllib.parse import unquote

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from provenance_api.core.errors import InvalidInput, ProvenanceError

SOURCE_FORMATS: dict[str, str] = {
    "openai-agents-session": "sqlite",
    "langgraph-sqlite": "sqlite",
    "langgraph-postgres": "postgresql",
}
EXAMPLE_URLS = {"sqlite": "sqlite:///agent.db", "postgresql": "postgresql://user:password@host:5432/db"}


class SourceUnavailable(ProvenanceError):
    """The history source cannot be opened or read (a missing file, a database that does not answer)."""

    status: ClassVar[int] = 502
    type_slug: ClassVar[str] = "source-unavailable"
    title: ClassVar[str] = "History source unavailable"


EVERY_TENANT = "*"
"""In a configured source's ``tenants``: every tenant may import it."""


def source_tenants(entry: Mapping[str, Any], admin_tenant: str) -> frozenset[str]:
    """The tenants that may import a configured source (``PROVENANCE_HISTORY_SOURCES``): its ``tenants`` list
    (``"*"`` among them: every tenant), or the admin tenant alone when it names none, so a source configured
    before sources had owners is not opened to every tenant. Anything but a list of names (the settings refuse
    it at startup) is nobody."""
    if "tenants" not in entry:
        return frozenset({admin_tenant})
    tenants = entry["tenants"]
    if not isinstance(tenants, list):
        return frozenset()
    return frozenset(t.strip() for t in tenants if isinstance(t, str) and t.strip())


def may_import(entry: Mapping[str, Any], tenant: str, admin_tenant: str) -> bool:
    """Whether ``tenant`` may import the configured source ``entry``. The admin key has no exception: an import
    writes into the caller's tenant, so the admin tenant reads a source only when the source is its own."""
    allowed = source_tenants(entry, admin_tenant)
    return EVERY_TENANT in allowed or tenant in allowed


def is_source_url(text: str) -> bool:
    return "://" in text


def source_format(name: str | None, field_name: str = "format") -> str:
    key = (name or "").strip().lower().replace("_", "-")
    if key not in SOURCE_FORMATS:
        raise InvalidInput(
            f"{field_name}: {name!r} is not a history source format"
            if name
            else f"{field_name} is required to read a history source",
            field=field_name,
            fix=f"use one of {', '.join(SOURCE_FORMATS)}",
        )
    return key


@dataclass(frozen=True)
class Source:
    """One source to read: ``name`` is what it is called (the configured name, else the file or database name);
    its conversation ids are ``<store>#<thread or session id>``, ``store`` named by what the store is
    (:attr:`store`), never by how its path was typed or which name it was imported under."""

    name: str
    format: str
    url: str
    path: Path | None = None  # the SQLite file, resolved (symlinks followed)

    @property
    def shown_url(self) -> str:
        """The URL without its password (safe to print and store)."""
        if self.path is not None:
            return f"sqlite:///{self.path}"
        return make_url(self.url).render_as_string(hide_password=True)

    @property
    def identity(self) -> str:
        """What the store is: the SQLite file's resolved path, or a PostgreSQL server's host, port and database
        (neither the user, the password nor the spelling of the URL)."""
        if self.path is not None:
            return f"sqlite:{self.path}"
        url = make_url(self.url)
        host = (url.host or str(url.query.get("host") or "")).lower().rstrip(".")
        if host in ("127.0.0.1", "::1"):
            host = "localhost"
        return f"postgresql://{host}:{url.port or 5432}/{url.database or ''}"

    @property
    def store(self) -> str:
        """The prefix of its conversation ids: its format and 8 hex digits of the SHA-256 of its identity
        (``langgraph-sqlite@1a2b3c4d``), so two ``checkpoints.db`` in two folders never share ids, and the CLI
        and a configured source of the same store always do. Neither a file, host nor database name is in
        it: ids are shown to every caller, where a configured store lives is not."""
        digest = hashlib.sha256(self.identity.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        return f"{self.format}@{digest}"

    @property
    def earlier_names(self) -> tuple[str, ...]:
        """The prefixes earlier versions gave its conversation ids (the name it was imported under, the file
        or database name): their stored turns are recognised by content, not stored again."""
        label = self.path.name if self.path is not None else make_url(self.url).database
        return tuple(dict.fromkeys(n for n in (self.name, label) if n))

    @property
    def key(self) -> str:
        """What the import cursor is kept under: the format and the store's identity (one cursor per store,
        whichever name or spelling it was imported by)."""
        return f"{self.format}|{self.identity}"[:512]


def parse_source(
    url: str, format: str | None, name: str | None = None, *, url_field: str = "url", format_field: str = "format"
) -> Source:
    """A ``Source`` from a URL and a format, checked: the scheme must be the one the format is read from."""
    fmt = source_format(format, format_field)
    scheme = SOURCE_FORMATS[fmt]
    head = url.split("://", 1)[0].lower()
    if head.split("+", 1)[0] in ("postgres", "postgresql"):
        head = "postgresql"
    if head.split("+", 1)[0] == "sqlite":
        head = "sqlite"
    if head != scheme:
        raise InvalidInput(
            f"{url_field}: a {fmt} source is read from a {scheme} URL, not {head}://",
            field=url_field,
            fix=f"give a URL like {EXAMPLE_URLS[scheme]}",
        )
    if scheme == "sqlite":
        rest = url.split("://", 1)[1]
        if not rest.startswith("/") or len(rest) < 2:
            raise InvalidInput(
                f"{url_field}: {url!r} names no file",
                field=url_field,
                fix="write sqlite:///relative/path.db or sqlite:////absolute/path.db",
            )
        path = Path(unquote(rest[1:].split("?", 1)[0])).expanduser().resolve()
        return Source(name or path.name, fmt, url, path)
    try:
        parsed = make_url(url.replace("+asyncpg", "").replace("+psycopg", ""))
    except ArgumentError as exc:
        raise InvalidInput(
            f"{url_field}: not a database URL ({exc})", field=url_field, fix=f"give a URL like {EXAMPLE_URLS[scheme]}"
        ) from None
    return Source(
        name or parsed.database or parsed.host or "postgres",
        fmt,
        parsed.set(drivername="postgresql").render_as_string(hide_password=False),
    )


@dataclass(frozen=True)
class Conversation:
    """One thread or session as its importer reads it (``obj``), with what could not be read of it."""

    ident: str
    where: str
    obj: Any
    issues: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Changes:
    """What changed after a position: the new position (``None``: the source holds nothing yet), the
    conversations with anything past the old one, and how many conversations the source holds."""

    position: str | None
    changed: list[str]
    total: int
    restarted: bool = False  # the source is behind the old position (recreated?): everything was read


class Reader(Protocol):
    """Reads one source; ``importer`` is the history format its conversations are in."""

    importer: str
    noun: str

    @property
    def caveats(self) -> list[str]:
        """What the import should say about how the source was read (e.g. without its write-ahead log)."""
        ...

    async def changes(self, since: str | None) -> Changes: ...

    async def conversation(self, ident: str, upto: str) -> Conversation: ...

    async def close(self) -> None: ...
