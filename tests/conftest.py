"""Shared fixtures: the storage backends (SQLite and a real Postgres) and a real Redis.

``db_backend`` is parametrised over ``sqlite`` and ``postgres``: a test (or module fixture) that takes
it runs once per backend, and asks it for a fresh database with ``db_backend.fresh_url()`` (None for
SQLite: the service's default file in its data directory). Postgres and Redis come from
``PROVENANCE_TEST_POSTGRES_URL`` / ``PROVENANCE_TEST_REDIS_URL`` (``scripts/services.sh``) or are
started here; when neither is possible the test fails, saying why.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from support.services import (
    POSTGRES_ENV,
    REDIS_ENV,
    DbBackend,
    PostgresCluster,
    RedisServer,
    ServiceUnavailable,
)


@pytest.fixture(autouse=True)
def _data_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test writes into the user's data directory (``provenance trace`` logs its traces there): each test
    gets a fresh ``XDG_DATA_HOME``; ``PROVENANCE_DATA_DIR``, when a test sets it, still wins."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data-home")))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The admin URL of a Postgres server (postgresql+asyncpg://…/postgres)."""
    configured = os.environ.get(POSTGRES_ENV)
    if configured:
        yield configured
        return
    cluster = PostgresCluster()
    try:
        cluster.start()
    except ServiceUnavailable as exc:
        cluster.stop()
        pytest.fail(f"Postgres tests cannot run: {exc}", pytrace=False)
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The URL of a Redis server; tests that share it use their own key prefixes or flush it."""
    configured = os.environ.get(REDIS_ENV)
    if configured:
        yield configured
        return
    server = RedisServer()
    try:
        server.start()
    except ServiceUnavailable as exc:
        server.stop()
        pytest.fail(f"Redis tests cannot run: {exc}", pytrace=False)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def db_backend(request: pytest.FixtureRequest) -> DbBackend:
    if request.param == "sqlite":
        return DbBackend("sqlite", None)
    return DbBackend("postgres", request.getfixturevalue("postgres_url"))
