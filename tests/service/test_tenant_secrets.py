"""No operator secret reaches a tenant: every endpoint a tenant key can call, on a service configured with
secret-bearing settings, answers without the judge's or the scorer's URL, user, password, key or address, and
without the configured history sources' paths, hosts or passwords.

Two services run the real provider clients (litellm for the judge, ``CompletionsScorer`` for the scorer) over
real sockets:

* *reachable*: the judge is the fake OpenAI-compatible server behind a marked path, and it requires the
  operator's (marked) API key; the scorer URL, carrying a user and a password, points at the same server under
  another marked path, where it answers 404 echoing the path it was asked for (so every scoring call fails with
  the server's own words). (A judge URL with a user and a password cannot answer through litellm, which refuses to
  send credentials both in the URL and as the key, so the reachable judge's URL has none.)
* *unreachable*: the judge's base URL (user, password, marked path) names a closed port, and the scorer defaults
  to it; every trace fails with the client's own error.
* *environment*: the judge is configured the litellm way (``OPENAI_API_BASE`` with a marked path,
  ``OPENAI_API_KEY``), not in the service's settings, and the server refuses every call with an error naming its
  own URL and address, as proxies do.

Every response body, header and event stream a tenant receives is searched for every secret marker.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_server import InProcessApi, KeyedJudge, small_turn
from support.fake_openai import FakeOpenAI, FakeReply

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MARK = "zqx7leak"  # in every secret below, and nowhere in what a tenant sends
JUDGE_USER = f"{MARK}judgeuser"
JUDGE_PASSWORD = f"{MARK}JudgePassw0rd"
JUDGE_KEY = f"sk-{MARK}judgekey0123456789abcdef"
SCORER_USER = f"{MARK}scoreruser"
SCORER_PASSWORD = f"{MARK}ScorerPassw0rd"
SOURCE_PASSWORD = f"{MARK}SourcePassw0rd"
ESTIMATORS = ("judged", "expected", "logprob", "both", "proxy")
TENANT = "acme"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens on it once the socket is closed


@dataclass
class Checked:
    """Every response a tenant received, and the secrets found in any of them."""

    markers: list[str]
    responses: int = 0
    leaks: list[str] = field(default_factory=list)

    def see(self, what: str, status: int, headers: httpx.Headers, body: str) -> None:
        self.responses += 1
        text = body + "\n" + "\n".join(f"{k}: {v}" for k, v in headers.items())
        for marker in self.markers:
            if marker.lower() in text.lower():
                at = text.lower().index(marker.lower())
                self.leaks.append(f"{what} ({status}) shows {marker!r}: …{text[max(0, at - 120) : at + 80]}…")


class Tenant:
    """A tenant's client that records every answer it receives for ``Checked``."""

    def __init__(self, client: httpx.Client, checked: Checked) -> None:
        self.client = client
        self.checked = checked

    def call(self, method: str, url: str, **kw: Any) -> httpx.Response:
        r = self.client.request(method, url, **kw)
        self.checked.see(f"{method} {url}", r.status_code, r.headers, r.text)
        return r

    def stream(self, url: str) -> list[str]:
        with self.client.stream("GET", url) as r:
            lines = list(r.iter_lines())
            self.checked.see(f"GET {url} (stream)", r.status_code, r.headers, "\n".join(lines))
        assert r.status_code == 200, url
        return lines


def end_event(lines: list[str]) -> dict[str, Any]:
    name = ""
    last_data: dict[str, Any] | None = None
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: ") and name == "end":
            last_data = json.loads(line[6:])
    assert last_data is not None, lines[-5:]
    return last_data


@dataclass
class Service:
    srv: InProcessApi
    markers: list[str]
    refused: tuple[str, ...] = ()  # estimators whose quote this configuration refuses (422 naming estimator)
    provider: FakeOpenAI | None = None  # the judge's server, when there is one


def sources(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """A missing SQLite store under a marked directory and a Postgres store (marked user, password and
    database) on a closed port, both the tenant's."""
    missing = tmp_path / f"{MARK}-stores" / "agent.db"
    pg = f"postgresql://{MARK}pguser:{SOURCE_PASSWORD}@127.0.0.1:{closed_port()}/{MARK}db"
    return {
        "desk": {"url": f"sqlite:///{missing}", "format": "openai-agents-session", "tenants": [TENANT]},
        "warehouse": {"url": pg, "format": "langgraph-postgres", "tenants": [TENANT]},
    }


@pytest.fixture
def reachable(tmp_path: Path) -> Iterator[Service]:
    with FakeOpenAI(KeyedJudge().openai, api_key=JUDGE_KEY) as provider:
        judge = f"http://127.0.0.1:{provider.port}/{MARK}-judge-path/v1"
        scorer = f"http://{SCORER_USER}:{SCORER_PASSWORD}@127.0.0.1:{provider.port}/{MARK}-scorer-path/v1"
        with InProcessApi(
            tmp_path / "data",
            warm_up=False,
            judgement_cache=False,
            judge_api_base=judge,
            judge_api_key=JUDGE_KEY,
            judge_timeout_seconds=10,
            scorer_api_base=scorer,
            history_sources=sources(tmp_path),
        ) as srv:
            yield Service(srv, [MARK, f"127.0.0.1:{provider.port}", str(tmp_path)])


@pytest.fixture
def environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    def names_itself(index: int, request: dict[str, Any]) -> FakeReply:
        return FakeReply.error(400, f"model not loaded on {base} (backend 127.0.0.1:{provider.port})")

    with FakeOpenAI(KeyedJudge().openai, api_key=JUDGE_KEY, faults=names_itself) as provider:
        base = f"http://127.0.0.1:{provider.port}/{MARK}-env-path/v1"
        monkeypatch.setenv("OPENAI_API_BASE", base)
        monkeypatch.setenv("OPENAI_API_KEY", JUDGE_KEY)
        with InProcessApi(
            tmp_path / "data",
            warm_up=False,
            judgement_cache=False,
            judge_timeout_seconds=5,
            history_sources=sources(tmp_path),
        ) as srv:
            markers = [MARK, f"127.0.0.1:{provider.port}", str(tmp_path)]
            yield Service(srv, markers, refused=("logprob", "both", "proxy"), provider=provider)  # no scorer known


@pytest.fixture
def unreachable(tmp_path: Path) -> Iterator[Service]:
    port = closed_port()
    judge = f"http://{JUDGE_USER}:{JUDGE_PASSWORD}@127.0.0.1:{port}/{MARK}-down-path/v1"
    with InProcessApi(
        tmp_path / "data",
        warm_up=False,
        judgement_cache=False,
        judge_api_base=judge,
        judge_api_key=JUDGE_KEY,
        judge_timeout_seconds=5,
        provider_max_attempts=1,  # what is said is the same on every attempt; no backoff to wait
        history_sources=sources(tmp_path),
    ) as srv:
        yield Service(srv, [MARK, f"127.0.0.1:{port}", str(tmp_path)], refused=("proxy",))  # no scorer URL


def exercise(service: Service, *, judge_answers: bool) -> Checked:
    """Call every endpoint a tenant key may call; return what was checked."""
    srv = service.srv
    checked = Checked(service.markers)
    with srv.client(srv.key(TENANT, "ann"), timeout=120) as client:
        api = Tenant(client, checked)
        turn_id = "t-secret-1"
        assert api.call("POST", "/v1/turns", json=small_turn(turn_id)).status_code == 201
        api.call("GET", "/v1/turns")
        api.call("GET", "/v1/turns", params={"q": "order", "sort": "-traceable"})
        api.call("GET", f"/v1/turns/{turn_id}")
        api.call("GET", f"/v1/turns/{turn_id}/sources")
        api.call("GET", f"/v1/turns/{turn_id}/segments")
        api.call("POST", f"/v1/turns/{turn_id}/segments", json={"segments": ["Order A-1 shipped on 2025-03-03."]})

        traces: dict[str, dict[str, Any]] = {}
        for estimator in ESTIMATORS:
            quote = api.call("POST", "/v1/quotes", json={"turn_id": turn_id, "sentence": "r0", "estimator": estimator})
            if estimator in service.refused:
                assert quote.status_code == 422 and quote.json()["field"] == "estimator", quote.text
                continue
            assert quote.status_code == 201, quote.text
            body = quote.json()
            assert body["expected_digit"]["reason"] and body["scoring"]["reason"]
            started = api.call("POST", "/v1/traces", json={"quote_id": body["quote_id"]})
            assert started.status_code == 202, started.text
            trace_id = started.json()["trace_id"]
            end = end_event(api.stream(f"/v1/traces/{trace_id}/events"))
            done = api.call("GET", f"/v1/traces/{trace_id}", params={"wait": "true"}).json()
            assert done["status"] == end["status"]
            traces[estimator] = done
            api.call("GET", f"/v1/traces/{trace_id}/calls")
            api.call("GET", f"/v1/traces/{trace_id}/export", params={"format": "json"})
            api.call("GET", f"/v1/traces/{trace_id}/export", params={"format": "markdown"})
        if judge_answers:  # the judge answers: a judged trace succeeds; every scoring call fails on the scorer
            assert traces["judged"]["status"] == "succeeded", traces["judged"]
            assert traces["logprob"]["calls"]["failed"] > 0, traces["logprob"]
        else:  # nothing answers: every trace fails, with a reason
            assert all(t["status"] == "failed" and t["reason"] for t in traces.values()), traces
        api.call("GET", "/v1/traces")
        api.call("GET", "/v1/traces", params={"status": "failed", "sort": "-cost"})

        probe_quote = api.call("POST", "/v1/quotes", json={"turn_id": turn_id, "sentence": "r0", "probe": True})
        assert probe_quote.status_code == 201, probe_quote.text
        probe = api.call("POST", "/v1/probes", json={"quote_id": probe_quote.json()["quote_id"], "source_id": "s0"})
        assert probe.status_code == 202, probe.text
        location = probe.headers["location"]
        api.stream(f"{location}/events")
        api.call("GET", location, params={"wait": "true"})

        verified = api.call("POST", f"/v1/turns/{turn_id}/verify", json={"max_cost_usd": 1.0})
        assert verified.status_code == 200, verified.text

        # problems: refusals that carry a capability's reason, and the usual errors
        hosted = {"turn_id": turn_id, "sentence": "r0", "model": "anthropic/claude-sonnet-4-5"}
        assert api.call("POST", "/v1/quotes", json={**hosted, "estimator": "expected"}).status_code == 422
        assert api.call("POST", "/v1/quotes", json={**hosted, "model": "openai/unlisted"}).status_code == 422
        assert api.call("POST", "/v1/quotes", json={"turn_id": "nope", "sentence": "r0"}).status_code == 404
        assert api.call("POST", "/v1/traces", json={"quote_id": "q_missing"}).status_code == 404
        bad = api.call("POST", "/v1/turns", content=b"{not json", headers={"content-type": "application/json"})
        assert bad.status_code == 422

        history = (FIXTURES / "history" / "openai_chat" / "refunds.json").read_bytes()
        imported = api.call("POST", "/v1/imports", params={"format": "openai_chat"}, content=history)
        assert imported.status_code == 200, imported.text
        api.call("GET", "/v1/reports/gating")
        api.call("DELETE", f"/v1/imports/{imported.json()['batch_id']}")
        listed = api.call("GET", "/v1/imports/sources").json()["sources"]
        assert [(s["name"], s["format"]) for s in listed] == [
            ("desk", "openai-agents-session"),
            ("warehouse", "langgraph-postgres"),
        ]
        assert api.call("POST", "/v1/imports/sources/desk").status_code == 502
        assert api.call("POST", "/v1/imports/sources/warehouse").status_code == 502
        assert api.call("POST", "/v1/imports/sources/nowhere").status_code == 404
        api.call("GET", "/v1/glossary")

        api.call("GET", "/ui/session")
        api.call("GET", "/ui/api/turns")
        api.call("GET", f"/ui/api/turns/{turn_id}/traces")
        api.call("GET", f"/ui/api/turns/{turn_id}/sources/s0")
        api.call("GET", "/healthz")
        api.call("GET", "/readyz")
        assert api.call("DELETE", f"/v1/turns/{turn_id}").status_code == 204
    return checked


def report(name: str, checked: Checked) -> None:
    print(f"{name}: secrets {len(checked.leaks)} leaks across {checked.responses} responses")
    for leak in checked.leaks:
        print("  " + leak)


def test_a_reachable_judge_and_a_failing_scorer_show_tenants_no_secret(reachable: Service) -> None:
    checked = exercise(reachable, judge_answers=True)
    report("reachable judge, failing scorer", checked)
    assert checked.responses >= 50
    assert checked.leaks == []


def test_an_unreachable_judge_shows_tenants_no_secret(unreachable: Service) -> None:
    checked = exercise(unreachable, judge_answers=False)
    report("unreachable judge", checked)
    assert checked.responses >= 50
    assert checked.leaks == []


def test_a_judge_configured_in_the_environment_naming_itself_shows_tenants_no_secret(environment: Service) -> None:
    checked = exercise(environment, judge_answers=False)
    report("judge from the environment, naming itself", checked)
    assert environment.provider is not None and len(environment.provider.requests) > 0  # it was asked, and said
    assert checked.responses >= 50
    assert checked.leaks == []


def test_an_endpoint_is_scrubbed_wherever_a_servers_error_text_repeats_it() -> None:
    """The scrub itself: every place of a base URL, and nothing of the rest of the text."""
    from provenance_api.providers.endpoint_scrub import scrub_endpoint

    base = "https://team%2Da:p%40ss@Gateway.internal:8443/tenant-proxy/v1"
    said = (
        "POST https://team%2Da:p%40ss@Gateway.internal:8443/tenant-proxy/v1/chat/completions failed: no route for "
        "/tenant-proxy/v1/completions on gateway.internal (10.0.0.5, 8443) as team-a:p@ss; model gpt-4o, HTTP 404"
    )
    scrubbed = scrub_endpoint(said, base)
    for secret in ("team", "p%40ss", "p@ss", "ateway", "tenant-proxy", "8443"):
        assert secret not in scrubbed.lower(), (secret, scrubbed)
    assert "/chat/completions failed" in scrubbed and "model gpt-4o, HTTP 404" in scrubbed and "10.0.0.5" in scrubbed
