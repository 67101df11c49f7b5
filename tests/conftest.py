"""Shared fixtures: the storage backends (SQLite and a real Postgres) and a real Redis.

``db_backend`` is parametrised over ``sqlite`` and ``postgres``: a test (or module fixture) that takes
it runs once per backend, and asks it for a fresh database with ``db_backend.fresh_url()`` (None for
SQLite: the service's default file in its data directory). Postgres and Redis come from
``PROVENANCE_TEST_POSTGRES_URL`` / ``PROVENANCE_TEST_REDIS_URL`` (``scripts/services.sh``) or are
started here; when neither is possible the test fails, saying why.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from types import ModuleType

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


# --- markers by what a test needs -------------------------------------------------------------------------------
# A test is marked by what it starts, read from its own source, its fixtures' sources and the module helpers they
# call, so that `scripts/test-fast.sh` can leave out the slow kinds without a marker to forget in each file:
#   service     starts the service over real HTTP (a server process or uvicorn on a socket)
#   browser     drives Chromium
#   postgres    needs the PostgreSQL server (the `postgres_url` fixture or the postgres `db_backend`)
#   redis       needs the Redis server
#   local_model runs the real local model (built by the install step, never inside a test)
_PATTERNS: dict[str, tuple[str, ...]] = {
    "service": ("ApiServer(", "ServerProcess(", "Served(", "viewer(", "uvicorn", "served("),
    "browser": ("browser(", "require_chromium(", "sync_playwright", "chromium"),
    "local_model": ("model_path(", "llama_server("),
    "postgres": ("postgres_url", "PROVENANCE_TEST_POSTGRES_URL", "fresh_url("),
    "redis": ("redis_url", "PROVENANCE_TEST_REDIS_URL"),
}
_SOURCE_CACHE: dict[object, str] = {}


def _source(obj: object) -> str:
    if obj not in _SOURCE_CACHE:
        try:
            _SOURCE_CACHE[obj] = inspect.getsource(obj)  # type: ignore[arg-type]
        except (OSError, TypeError):
            _SOURCE_CACHE[obj] = ""
    return _SOURCE_CACHE[obj]


def _module_helpers(module: ModuleType) -> dict[str, str]:
    """The module's own functions and classes with their sources (one level of calls is followed)."""
    out: dict[str, str] = {}
    for name, value in vars(module).items():
        if (inspect.isfunction(value) or inspect.isclass(value)) and getattr(value, "__module__", None) == (
            module.__name__
        ):
            out[name] = _source(value)
    return out


def _needs(item: pytest.Item) -> set[str]:
    callspec = getattr(item, "callspec", None)
    backend = callspec.params.get("db_backend") if callspec is not None else None
    texts: list[str] = []
    func = getattr(item, "function", None)
    if func is not None:
        texts.append(_source(func))
    fixtureinfo = getattr(item, "_fixtureinfo", None)
    for name in item.fixturenames:  # type: ignore[attr-defined]
        texts.append(name)
        if name == "db_backend" and backend == "sqlite":
            continue  # its Postgres branch is the other parameter's
        for fixturedef in fixtureinfo.name2fixturedefs.get(name, ()) if fixtureinfo else ():
            texts.append(_source(fixturedef.func))
    module = getattr(item, "module", None)
    if module is not None:
        helpers = _module_helpers(module)
        joined = "\n".join(texts)
        texts.extend(src for name, src in helpers.items() if f"{name}(" in joined or f"{name}." in joined)
        marks = getattr(module, "pytestmark", ())
        texts.append(" ".join(str(m) for m in (marks if isinstance(marks, list | tuple) else [marks])))
    if backend == "postgres":
        texts.append("postgres_url")
    joined = "\n".join(texts)
    if backend == "sqlite":
        joined = joined.replace("fresh_url(", "")  # None there: the service's own SQLite file, no Postgres
    return {kind for kind, patterns in _PATTERNS.items() if any(p in joined for p in patterns)}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        present = {m.name for m in item.iter_markers()}
        for kind in _needs(item) - present:
            item.add_marker(getattr(pytest.mark, kind))
