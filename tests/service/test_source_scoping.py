"""Configured history sources belong to the tenants the operator names.

``PROVENANCE_HISTORY_SOURCES`` gives each source a ``tenants`` list: only those tenants may import it
(``POST /v1/imports/sources/{name}``) or see it listed (``GET /v1/imports/sources``); to any other tenant it does
not exist (404, the same answer as for a name nobody configured, and nothing is read or stored). ``["*"]`` opens a
source to every tenant; a source with no list belongs to the admin tenant alone (what sources configured before
they had owners become). The admin key is scoped like any other for importing (an import writes into the caller's
tenant) and lists every source with its tenants. A malformed list is refused at startup.

The sources are real OpenAI Agents SDK ``SQLiteSession`` files written by a real agent run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from pydantic import ValidationError
from support.api_server import InProcessApi
from test_agent_libraries import ToolLog, run_agent

from provenance_api.core.settings import Settings

PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("stores") / "agent.db"
    run_agent(db, ToolLog(), [("alice", "Weather in Paris?", "Paris")])
    return db


def source(db: Path, **extra: Any) -> dict[str, Any]:
    return {"url": f"sqlite:///{db}", "format": "openai-agents-session", **extra}


@pytest.fixture(scope="module")
def srv(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApi]:
    sources = {
        "acme-desk": source(store, tenants=["acme"]),
        "shared": source(store, tenants=["acme", "beta"]),
        "everyone": source(store, tenants=["*"]),
        "legacy": source(store),  # no tenants: the admin tenant's only
    }
    with InProcessApi(tmp_path_factory.mktemp("data"), warm_up=False, history_sources=sources) as server:
        yield server


def client(srv: InProcessApi, tenant: str, user: str) -> httpx.Client:
    return srv.client(srv.key(tenant, user))


def not_found(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 404, r.text
    assert r.headers["content-type"] == PROBLEM
    body: dict[str, Any] = r.json()
    assert body["field"] == "name" and "PROVENANCE_HISTORY_SOURCES" in body["fix"], body
    return body


def listed(api: httpx.Client) -> list[str]:
    r = api.get("/v1/imports/sources")
    assert r.status_code == 200, r.text
    return [s["name"] for s in r.json()["sources"]]


def test_a_tenant_not_named_gets_404_as_for_a_name_nobody_configured_and_nothing_is_stored(srv: InProcessApi) -> None:
    with client(srv, "delta", "dee") as delta:
        refused = not_found(delta.post("/v1/imports/sources/acme-desk"))
        unknown = not_found(delta.post("/v1/imports/sources/acme-desk-x"))
        same = {k: v for k, v in refused.items() if k not in ("instance", "request_id", "detail")}
        assert same == {k: v for k, v in unknown.items() if k not in ("instance", "request_id", "detail")}
        assert refused["detail"].replace("acme-desk", "X") == unknown["detail"].replace("acme-desk-x", "X")
        assert delta.get("/v1/turns").json()["total"] == 0  # nothing was read into delta's tenant
        assert not_found(delta.post("/v1/imports/sources/legacy"))  # no tenants list: not delta's either


def test_a_named_tenant_imports_and_each_tenant_lists_only_its_own_sources(srv: InProcessApi) -> None:
    with client(srv, "acme", "ann") as acme, client(srv, "beta", "bo") as beta, client(srv, "gamma", "gil") as gamma:
        first = acme.post("/v1/imports/sources/acme-desk")
        assert first.status_code == 200, first.text
        assert (first.json()["imported"], first.json()["source"]["name"]) == (1, "acme-desk")
        (alice,) = [t["turn_id"] for t in acme.get("/v1/turns").json()["items"] if "#alice:" in t["turn_id"]]
        assert acme.get(f"/v1/turns/{quote(alice, safe='')}").status_code == 200
        assert beta.get(f"/v1/turns/{quote(alice, safe='')}").status_code == 404

        shared = beta.post("/v1/imports/sources/shared")
        assert shared.status_code == 200 and shared.json()["imported"] == 1, shared.text
        assert gamma.post("/v1/imports/sources/everyone").json()["imported"] == 1

        assert listed(acme) == ["acme-desk", "everyone", "shared"]
        assert listed(beta) == ["everyone", "shared"]
        assert listed(gamma) == ["everyone"]
        mine = acme.get("/v1/imports/sources").json()["sources"][0]
        assert mine["position"] is not None and mine["last_import_at"] is not None  # acme read it up to here
        assert mine["tenants"] is None  # the operator's lists are the admin's to see
        text = acme.get("/v1/imports/sources").text
        assert "sqlite" not in text and "agent.db" not in text  # never where a store lives


def test_a_source_without_tenants_belongs_to_the_admin_tenant_only(srv: InProcessApi) -> None:
    admin_tenant = srv.settings.admin_tenant
    with srv.client(srv.admin_key) as admin, client(srv, admin_tenant, "operator-colleague") as colleague:
        assert admin.post("/v1/imports/sources/legacy").json()["imported"] == 1
        again = colleague.post("/v1/imports/sources/legacy")  # a key of the admin tenant, not the admin key
        assert again.status_code == 200 and again.json()["source"]["first_import"] is False, again.text
        assert "legacy" in listed(colleague)
    with client(srv, "acme", "ann") as acme:
        not_found(acme.post("/v1/imports/sources/legacy"))
        assert "legacy" not in listed(acme)


def test_a_source_configured_before_sources_had_tenants_is_not_opened_to_every_tenant(
    store: Path, tmp_path: Path
) -> None:
    """The finding as configured today: a source with no tenants list, which any tenant's key could import."""
    with InProcessApi(tmp_path / "data", warm_up=False, history_sources={"desk": source(store)}) as server:
        with client(server, "acme", "ann") as acme:
            not_found(acme.post("/v1/imports/sources/desk"))
            assert acme.get("/v1/turns").json()["total"] == 0
            assert listed(acme) == []
        with server.client(server.admin_key) as admin:
            assert admin.post("/v1/imports/sources/desk").json()["imported"] == 1


def test_the_admin_key_lists_every_source_with_its_tenants_but_imports_only_its_own(srv: InProcessApi) -> None:
    with srv.client(srv.admin_key) as admin:
        sources = {s["name"]: s for s in admin.get("/v1/imports/sources").json()["sources"]}
        assert {n: (s["tenants"], s["importable"]) for n, s in sources.items()} == {
            "acme-desk": (["acme"], False),
            "everyone": (["*"], True),
            "legacy": ([srv.settings.admin_tenant], True),
            "shared": (["acme", "beta"], False),
        }
        not_found(admin.post("/v1/imports/sources/acme-desk"))  # it would write acme's history into the admin tenant


@pytest.mark.parametrize(
    ("tenants", "why"),
    [("acme", "a string, not a list"), ([], "an empty list"), (["acme", 7], "not a name"), ([""], "an empty name")],
)
def test_a_malformed_tenants_list_is_refused_at_startup(tmp_path: Path, tenants: Any, why: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(data_dir=tmp_path, history_sources={"desk": source(tmp_path / "a.db", tenants=tenants)})
    assert "PROVENANCE_HISTORY_SOURCES.desk.tenants" in str(refused.value), why


def test_tenants_are_read_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "PROVENANCE_HISTORY_SOURCES", json.dumps({"desk": source(tmp_path / "a.db", tenants=["acme", "beta"])})
    )
    assert Settings(data_dir=tmp_path).history_sources["desk"]["tenants"] == ["acme", "beta"]
