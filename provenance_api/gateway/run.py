"""One gateway run: its identity from its own configuration, its store, its recorder, and the relay it serves.

The identity that goes into every record is the gateway's: the server's name (``--name``; by default the
command's file name or the URL's host), the principal (``PROVENANCE_GATEWAY_PRINCIPAL``, by default the user
running the gateway, ``user@host``) and the tenant (``PROVENANCE_GATEWAY_TENANT``, by default the admin tenant,
``PROVENANCE_ADMIN_TENANT``, which ``provenance import`` and ``provenance gate`` use). The store is the service's
database (``PROVENANCE_DATABASE_URL``, by default SQLite in the data directory), opened and migrated on the first
result; a store that fails is opened again on a later one.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from provenance_api.core.evidence import EvidenceRecord
from provenance_api.core.settings import Settings
from provenance_api.gateway.observe import Identity, Observer
from provenance_api.gateway.recorder import GAPS_FILE, Recorder
from provenance_api.storage.evidence_records import append_evidence
from provenance_api.storage.session import Database

__all__ = ["PRINCIPAL_ENV", "TENANT_ENV", "DatabaseStore", "GatewayConfig", "serve_http", "serve_stdio"]

PRINCIPAL_ENV = "PROVENANCE_GATEWAY_PRINCIPAL"
TENANT_ENV = "PROVENANCE_GATEWAY_TENANT"


def _default_principal() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class GatewayConfig:
    server: str
    principal: str
    tenant: str
    database_url: str
    data_dir: Path

    @classmethod
    def from_settings(cls, settings: Settings, server: str) -> GatewayConfig:
        return cls(
            server=server,
            principal=os.environ.get(PRINCIPAL_ENV, "").strip() or _default_principal(),
            tenant=os.environ.get(TENANT_ENV, "").strip() or settings.admin_tenant,
            database_url=settings.effective_database_url,
            data_dir=settings.data_dir,
        )

    def identity(self, transport: Literal["stdio", "http"]) -> Identity:
        return Identity(tenant=self.tenant, principal=self.principal, server=self.server, transport=transport)


def default_server_name(command: Sequence[str] | None = None, url: str | None = None) -> str:
    if url:
        return urlsplit(url).hostname or url
    return Path(command[0]).name if command else "mcp-server"


class DatabaseStore:
    """Appends records to the configured database, opening (and migrating) it on first use and after a failure."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.db: Database | None = None

    async def open(self) -> Database:
        if self.db is None:
            try:
                if self.config.database_url.startswith("sqlite"):
                    self.config.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
                self.db = Database(self.config.database_url)
                await self.db.migrate()
            except BaseException:
                await self.close()
                raise
        return self.db

    async def __call__(self, records: Sequence[EvidenceRecord]) -> None:
        db = await self.open()
        try:
            await append_evidence(db, records)
        except BaseException:
            await self.close()
            raise

    async def prepare(self) -> None:
        await self.open()

    async def close(self) -> None:
        if self.db is not None:
            db, self.db = self.db, None
            await db.dispose()


def _recorder(config: GatewayConfig, transport: Literal["stdio", "http"], store: DatabaseStore) -> Recorder:
    return Recorder(
        Observer(config.identity(transport)), store, gaps_file=config.data_dir / GAPS_FILE, prepare=store.prepare
    )


async def serve_stdio(config: GatewayConfig, command: Sequence[str]) -> int:
    from provenance_api.gateway.stdio_proxy import run_stdio

    store = DatabaseStore(config)
    try:
        return await run_stdio(command, _recorder(config, "stdio", store))
    finally:
        await store.close()


async def serve_http(config: GatewayConfig, upstream: str, host: str, port: int) -> int:
    from provenance_api.gateway.http_proxy import run_http

    store = DatabaseStore(config)
    try:
        return await run_http(upstream, host, port, _recorder(config, "http", store))
    finally:
        await store.close()
