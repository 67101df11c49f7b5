"""The streamable-HTTP gateway with real processes and the real SDK: the test server served over streamable HTTP,
called by the SDK's client directly and through ``provenance gateway --http``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from support.mcp_gateway import gateway_env, http_gateway, http_server, run_http_calls, stored_evidence

pytestmark = pytest.mark.gateway

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("forecast", {"city": "Oslo"}),
    ("invoice", {"vendor": "ACME", "amount": 12.5}),
    ("refuse", {"reason": "over budget"}),
]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_over_streamable_http_the_client_gets_the_same_results_and_each_is_recorded(tmp_path: Path) -> None:
    with http_server() as (url, _server):
        direct = run_http_calls(url, CALLS)
        with http_gateway(url, gateway_env(tmp_path), name="weather-http") as gateway:
            assert gateway.url != url and gateway.url.endswith("/mcp")
            gated = run_http_calls(gateway.url, CALLS)
    assert [o.tool for o in direct.outcomes] == ["forecast", "invoice", "refuse"]
    assert all(o.result is not None for o in direct.outcomes)
    assert gated.outcomes == direct.outcomes

    records = stored_evidence(tmp_path)
    texts = ["\n".join(b["text"] for b in json.loads(o.result or "")["content"]) for o in direct.outcomes]
    assert [(r.tool, r.digest, r.is_error) for r in records] == [
        ("forecast", _sha(texts[0]), False),
        ("invoice", _sha(texts[1]), False),
        ("refuse", _sha(texts[2]), True),
    ]
    assert {(r.server, r.transport, r.principal) for r in records} == {("weather-http", "http", "ci-agent@test")}


def test_a_server_that_dies_mid_call_breaks_the_call_as_it_would_without_the_gateway(tmp_path: Path) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [("forecast", {"city": "Quito"}), ("die", {})]
    with http_server() as (url, _server):
        direct = run_http_calls(url, calls)
    with http_server() as (url, _server), http_gateway(url, gateway_env(tmp_path)) as gateway:
        gated = run_http_calls(gateway.url, calls)
    assert direct.outcomes[0].result is not None and direct.outcomes[1].error is not None
    assert gated.outcomes == direct.outcomes
    assert [r.tool for r in stored_evidence(tmp_path)] == ["forecast"]
