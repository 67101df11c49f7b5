"""Alembic environment for the service's schema.

The service runs migrations on its own engine (``Database.migrate`` passes the connection in
``config.attributes``). Run standalone (``alembic -x url=… upgrade head``) it builds an async
engine from the URL given with ``-x url=…`` or ``sqlalchemy.url``.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from provenance_api.storage.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: pass -x url=… or set sqlalchemy.url")
    return url


def _configure(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async(url: str) -> None:
    engine = create_async_engine(url, poolclass=NullPool)
    async with engine.begin() as conn:
        await conn.run_sync(_configure)
    await engine.dispose()


def run() -> None:
    if context.is_offline_mode():
        context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
    else:
        asyncio.run(_run_async(_url()))


run()
