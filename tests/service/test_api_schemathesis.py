"""Schemathesis against the service's OpenAPI schema, over real HTTP: for every operation,
generated requests (valid and invalid) never get a 5xx, and every response — status code,
content type and body — matches the schema. Bounded: a few examples per operation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from support.api_server import ApiServer, load_fixture, scripted_factory

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with ApiServer(
        tmp_path_factory.mktemp("schemathesis"),
        llm_factory=scripted_factory(),
        warm_up=False,
        quote_ttl_seconds=5,
    ) as srv:
        with srv.client(srv.admin_key) as api:  # the documented example turn exists, so examples reach 200s
            assert api.post("/v1/turns", json=load_fixture("fallback_path_turn.json")).status_code == 201
        yield srv


@pytest.fixture(scope="module")
def api_schema(server: ApiServer) -> Any:
    return schemathesis.openapi.from_url(f"{server.base_url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_and_responses_match_the_schema(case: Any, server: ApiServer) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {server.admin_key}"}, checks=CHECKS, timeout=30)
