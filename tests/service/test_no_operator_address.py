"""No operator address in any tenant-visible text.

Reported: a tenant's ``POST /v1/quotes`` showed the operator's scoring server address (its ``api_base`` URL) in
``scoring.reason``. Here the service's judge and scoring server each live at a recognisable address — their own
port on loopback under a marked path — and a tenant's key calls everything a tenant can: turns, segments, actions,
quotes of every estimator and of a probe, traces and probes with their event streams, results, calls and exports,
lists, verify, the viewer's API and the problems a tenant provokes (refused models and estimators, missing records,
bad bodies). Every string in every JSON answer — each value and each key, at any depth, and each event of a stream —
and every other body is searched for the addresses: ``host:port``, the base URL with and without its scheme, and
its path.

Two configurations: both servers answer (every trace succeeds, so results and calls carry what the servers said),
and both fail with errors that repeat the URL they were asked for, as proxies do (every trace fails, so reasons and
call errors carry the provider's own words). Admin endpoints may show the addresses and are not called.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_server import InProcessApi, small_turn
from support.fake_openai import FakeReply
from support.scoring_server import Scoring

ESTIMATORS = ("judged", "expected", "logprob", "both", "proxy")
TURN = "t-small-1"


@dataclass
class Addresses:
    """The forms an operator's server address may take in text."""

    forms: list[str]
    found: list[str] = field(default_factory=list)
    strings: int = 0

    @staticmethod
    def of(*bases: str) -> Addresses:
        forms: list[str] = []
        for base in bases:
            without_scheme = base.split("://", 1)[1]
            host_port, path = without_scheme.split("/", 1)
            forms += [base, without_scheme, host_port, "/" + path.split("/", 1)[0]]
        return Addresses(forms)

    def walk(self, where: str, value: Any) -> None:
        """Every string of ``value`` (keys and values, any depth), checked."""
        if isinstance(value, dict):
            for key, item in value.items():
                self.check(f"{where} key", str(key))
                self.walk(f"{where}.{key}", item)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self.walk(f"{where}[{i}]", item)
        elif isinstance(value, str):
            self.check(where, value)

    def check(self, where: str, text: str) -> None:
        self.strings += 1
        for form in self.forms:
            if form.lower() in text.lower():
                self.found.append(f"{where} shows {form!r}: {text[:300]!r}")


class Tenant:
    """A tenant's client whose every answer is walked for the addresses."""

    def __init__(self, client: httpx.Client, addresses: Addresses) -> None:
        self.client = client
        self.addresses = addresses

    def call(self, method: str, url: str, **kw: Any) -> httpx.Response:
        response = self.client.request(method, url, **kw)
        self.read(f"{method} {url} ({response.status_code})", response)
        return response

    def read(self, where: str, response: httpx.Response) -> None:
        for name, value in response.headers.items():
            self.addresses.check(f"{where} header {name}", value)
        kind = response.headers.get("content-type", "")
        if "json" in kind:
            self.addresses.walk(where, response.json())
        elif "event-stream" in kind:
            for line in response.text.splitlines():
                if line.startswith("data: "):
                    self.addresses.walk(f"{where} event", json.loads(line[6:]))
                else:
                    self.addresses.check(f"{where} stream line", line)
        else:
            self.addresses.check(where, response.text)


@pytest.fixture(params=["answering", "failing"])
def configured(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[InProcessApi, Addresses, bool]]:
    """The service with its judge and its scoring server at recognisable addresses; answering or failing with
    errors that repeat the URL they were asked for."""
    failing = request.param == "failing"
    where: dict[str, str] = {}

    def judge_names_itself(index: int, payload: dict[str, Any]) -> FakeReply | None:
        return FakeReply.error(400, f"model fake-judge is not served at {where['judge']}/chat/completions")

    with (
        Scoring(scorer_error=500 if failing else None) as judge,
        Scoring(scorer_error=500 if failing else None) as scorer,
    ):
        where["judge"] = f"http://127.0.0.1:{judge.port}/opjudge-q7z/v1"
        scoring_base = f"http://127.0.0.1:{scorer.port}/opscore-q7z/v1"
        if failing:
            judge.faults = judge_names_itself
        with InProcessApi(
            tmp_path / "data",
            warm_up=False,
            judgement_cache=False,
            judge_api_base=where["judge"],
            judge_api_key="sk-operator",
            judge_timeout_seconds=20,
            provider_max_attempts=1,
            scorer_api_base=scoring_base,
            scorer_model="qwen",
        ) as srv:
            yield srv, Addresses.of(where["judge"], scoring_base), failing


def test_no_tenant_visible_string_carries_the_operators_server_address(
    configured: tuple[InProcessApi, Addresses, bool],
) -> None:
    srv, addresses, failing = configured
    with srv.client(srv.key("acme", "ann")) as client:
        api = Tenant(client, addresses)
        assert api.call("POST", "/v1/turns", json=small_turn()).status_code == 201
        for url in ("/v1/turns", f"/v1/turns/{TURN}", f"/v1/turns/{TURN}/sources", f"/v1/turns/{TURN}/segments"):
            assert api.call("GET", url).status_code == 200, url
        api.call("GET", f"/v1/turns/{TURN}/actions")
        api.call("POST", f"/v1/turns/{TURN}/segments", json={"segments": ["Order A-1 shipped on 2025-03-03."]})

        statuses: dict[str, str] = {}
        for estimator in ESTIMATORS:
            quote = api.call("POST", "/v1/quotes", json={"turn_id": TURN, "sentence": "r0", "estimator": estimator})
            assert quote.status_code == 201, quote.text
            assert quote.json()["scoring"]["reason"] and quote.json()["expected_digit"]["reason"]
            started = api.call("POST", "/v1/traces", json={"quote_id": quote.json()["quote_id"]})
            assert started.status_code == 202, started.text
            trace = started.json()["trace_id"]
            api.call("GET", f"/v1/traces/{trace}/events")
            done = api.call("GET", f"/v1/traces/{trace}", params={"wait": "true"}).json()
            statuses[estimator] = done["status"]
            api.call("GET", f"/v1/traces/{trace}/calls")
            api.call("GET", f"/v1/traces/{trace}/export", params={"format": "json"})
            api.call("GET", f"/v1/traces/{trace}/export", params={"format": "markdown"})
        inline = {"turn_id": TURN, "sentence": "r0", "estimator": "logprob", "max_cost_usd": 5}
        started = api.call("POST", "/v1/traces", json=inline)
        assert started.status_code == 202, started.text
        api.call("GET", f"/v1/traces/{started.json()['trace_id']}", params={"wait": "true"})
        api.call("GET", "/v1/traces")
        api.call("GET", "/v1/traces", params={"status": "failed"})

        probe_quote = api.call("POST", "/v1/quotes", json={"turn_id": TURN, "sentence": "r0", "probe": True})
        probe = api.call("POST", "/v1/probes", json={"quote_id": probe_quote.json()["quote_id"], "source_id": "s0"})
        assert probe.status_code == 202, probe.text
        api.call("GET", f"{probe.headers['location']}/events")
        api.call("GET", probe.headers["location"], params={"wait": "true"})
        api.call("POST", f"/v1/turns/{TURN}/verify", json={"max_cost_usd": 1.0})

        # problems a tenant provokes, the refusals that carry a capability's reason among them
        hosted = {"turn_id": TURN, "sentence": "r0", "model": "anthropic/claude-sonnet-4-5"}
        refused = api.call("POST", "/v1/quotes", json={**hosted, "estimator": "expected"})
        assert refused.status_code == 422 and refused.json()["field"] == "estimator", refused.text
        refused = api.call("POST", "/v1/traces", json={**hosted, "estimator": "expected", "max_cost_usd": 5})
        assert refused.status_code == 422, refused.text
        assert api.call("POST", "/v1/quotes", json={**hosted, "model": "openai/unlisted"}).status_code == 422
        assert api.call("POST", "/v1/quotes", json={"turn_id": "nope", "sentence": "r0"}).status_code == 404
        assert api.call("GET", "/v1/traces/tr_missing").status_code == 404
        assert api.call("POST", "/v1/traces", json={"quote_id": "q_missing"}).status_code == 404
        bad = api.call("POST", "/v1/turns", content=b"{not json", headers={"content-type": "application/json"})
        assert bad.status_code == 422

        api.call("GET", "/ui/api/turns")
        api.call("GET", f"/ui/api/turns/{TURN}/traces")
        api.call("GET", "/v1/glossary")

    expected = "failed" if failing else "succeeded"
    assert statuses == dict.fromkeys(ESTIMATORS, expected), statuses  # results (or reasons) were there to read
    assert addresses.strings > 500  # the walk read the answers, not nothing
    assert addresses.found == [], "\n".join(addresses.found[:20])
