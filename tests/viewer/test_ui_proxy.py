"""A proxy-first trace in the viewer, in real headless Chromium against the service on loopback: a scripted
scorer (behind the configured scoring endpoint, as in test_proxy_api.py) ranks the sources, and the scripted
hosted judge behind FakeOpenAI checks the ranking — once confirming it, once disagreeing so that the full
judged search runs. The result shows, in words and a mark (not colour alone), which way it went, the proxy's
model, hosted calls made beside the local scoring passes, the sources with the proxy's drop (nats) beside the
judge's (digits) and why the judge disagreed, each number explained; axe-core finds nothing serious, light or
dark, and nothing leaves a 390 px screen. No step may log a console error."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect
from support.api_server import SMALL_CLAIM, small_turn
from support.ui import OUTSIDE_VIEWPORT, BrowserRun, Viewer, axe_violations, browser, sign_in_as_admin, viewer
from support.ui import SourceKeyedJudge as Judge

from estimator.results.proxy import CONFIRMED_LINE, FALLBACK_LINE
from estimator.seams.llm import Message
from estimator.seams.scorer import ScriptedScorer

pytestmark = pytest.mark.timeout(300)

SCORER_BASE = "http://127.0.0.1:9/v1"  # a configured scoring endpoint; the injected scorer stands in for it
PROXY_MODEL = "local/proxy-1.5b"
PROXY_KEY = "tracking 99812"  # the proxy finds the claim likely when the tool return (both turns) is shown
JUDGE_KEYS = ("with carrier DHL", "Always name the carrier")  # the judge: the carrier, in the tool or instructions
CONFIRMED_TURN = small_turn("t-proxy-agrees", system_prompt="You are a support agent.")  # the judge: the tool too
FALLBACK_TURN = small_turn(  # the judge: the instructions; the tool return no longer names the carrier
    "t-proxy-disagrees",
    response_payload={
        "tool_calls": [
            {
                "name": "lookup_order",
                "arguments": {"order_id": "A-1"},
                "response": "Order A-1 shipped 2025-03-03, tracking 99812.",
            }
        ]
    },
)


def planted(messages: Sequence[Message], target: str) -> float:
    return -70.0 + (40.0 if any(PROXY_KEY in m.content for m in messages) else 0.0)


@dataclass
class ProxyServed:
    v: Viewer
    traces: dict[str, dict[str, Any]]  # turn id → its proxy trace, as GET /v1/traces/{id}
    glossary: dict[str, dict[str, str]]

    def hash_of(self, turn: dict[str, Any]) -> str:
        return f"#/turn/{turn['turn_id']}/trace/{self.traces[turn['turn_id']]['trace_id']}"


def proxy_trace(v: Viewer, turn_id: str) -> dict[str, Any]:
    quote = v.api.post("/v1/quotes", json={"turn_id": turn_id, "sentence": SMALL_CLAIM, "estimator": "proxy"})
    assert quote.status_code == 201, quote.text
    started = v.api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
    assert started.status_code == 202, started.text
    done: dict[str, Any] = v.api.get(
        f"/v1/traces/{started.json()['trace_id']}", params={"wait": "true"}, timeout=120
    ).json()
    assert done["status"] == "succeeded", done
    return done


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyServed]:
    scorer = ScriptedScorer(planted, model_name=PROXY_MODEL)
    with viewer(
        tmp_path_factory.mktemp("proxy") / "data",
        Judge(JUDGE_KEYS),
        scorer_factory=lambda model: scorer,
        scorer_api_base=SCORER_BASE,
    ) as v:
        for turn in (CONFIRMED_TURN, FALLBACK_TURN):
            v.store(turn)
        traces = {t["turn_id"]: proxy_trace(v, t["turn_id"]) for t in (CONFIRMED_TURN, FALLBACK_TURN)}
        assert traces[CONFIRMED_TURN["turn_id"]]["result"]["confirmed"] is True
        assert traces[FALLBACK_TURN["turn_id"]]["result"]["confirmed"] is False
        glossary = {t["key"]: t for t in v.api.get("/v1/glossary").json()["terms"]}
        yield ProxyServed(v, traces, glossary)


def open_proxy(run: BrowserRun, s: ProxyServed, turn: dict[str, Any]) -> Locator:
    sign_in_as_admin(run, s.v, s.hash_of(turn))
    panel = run.page.locator("#proxy-panel")
    expect(panel).to_be_visible()
    return panel


def drop(x: float | None) -> str:
    """A drop as the viewer writes it (format.js fmtDrop)."""
    return "not measured" if x is None else ("+" if x >= 0 else "−") + f"{abs(x):.2f}"


def row_cells(panel: Locator, source_id: str) -> list[str]:
    row = panel.locator(f'#proxy-ranking tbody tr[data-source-id="{source_id}"]')
    expect(row).to_have_count(1)
    return [" ".join(c.split()) for c in row.locator("td").all_inner_texts()]


def check_help(page: Page, scope: Locator, key: str, term: dict[str, str]) -> None:
    """The term's "?" beside its label opens its one line and detail in place."""
    box = scope.locator(f'.term[data-term="{key}"]').first
    expect(box.locator(".term-pop")).to_be_hidden()
    box.locator(".term-toggle").click()
    expect(box.locator(".term-pop .short")).to_have_text(term["short"])
    expect(box.locator(".term-pop .detail")).to_have_text(term["detail"])


def check_explained(scope: Locator, key: str, term: dict[str, str]) -> None:
    box = scope.locator(f'details.explain[data-term="{key}"]').first
    expect(box.locator(".short")).to_have_text(term["short"])
    box.locator("summary").click()
    expect(box.locator(".detail")).to_have_text(term["detail"])


def test_a_confirmed_proxy_trace_says_so_and_shows_both_sides(served: ProxyServed) -> None:
    done = served.traces[CONFIRMED_TURN["turn_id"]]
    r, g = done["result"], served.glossary
    with browser("proxy-confirmed") as run:
        panel = open_proxy(run, served, CONFIRMED_TURN)
        page = run.page
        expect(panel).to_have_attribute("data-confirmed", "true")
        status = panel.locator("#proxy-confirmation")
        expect(status).to_contain_text("✓ Confirmed: " + CONFIRMED_LINE)
        check_help(page, status, "proxy.confirmed", g["proxy.confirmed"])
        expect(panel.locator("#proxy-model")).to_have_text(PROXY_MODEL)
        assert r["calls"]["scored"] > 0
        expect(panel.locator('[data-proxy="scored"] .count')).to_have_text(str(r["calls"]["scored"]))
        expect(panel.locator('[data-proxy="scored"] dt')).to_have_text("Local scoring passes ($0, not in made)")
        expect(panel.locator('[data-proxy="made"] .count')).to_have_text(str(done["calls"]["made"]))
        for key in (
            "calls.scored",
            "calls.made",
            "proxy.seconds",
            "proxy.evaluated_tokens",
            "proxy.share_margin",
            "proxy.drops",
        ):
            check_explained(panel, key, g[key])
        expect(panel.locator("#proxy-ranking thead th")).to_have_text(
            ["Source", "Proxy Δ (nats)", "Proxy role", "Hosted judge Δ (digits 1–9)"]
        )
        top = r["proxy"]["hosted"]["top_source"]
        proxy_drop = next(x["drop"] for x in r["proxy"]["proxy_ranking"] if x["id"] == top)
        assert row_cells(panel, top) == [drop(proxy_drop), "grounds ?", drop(r["proxy"]["hosted"]["top_source_drop"])]
        assert proxy_drop > 0 and r["proxy"]["hosted"]["top_source_drop"] > 0
        expect(panel.locator("#proxy-hosted")).to_contain_text("s(1) = " + f"{r['proxy']['hosted']['s_all']:.2f}")
        expect(panel.locator("#proxy-agreement")).to_contain_text("None: each of the hosted judge’s checks agrees")
        expect(panel.locator("#proxy-disagreements")).to_have_count(0)
        expect(page.locator("#result-estimator .term")).to_have_attribute("data-term", "estimator.proxy")
        run.shot("result", full_page=True)
        assert run.errors == []


def test_a_proxy_trace_the_judge_disagrees_with_shows_the_judged_ranking_and_why(served: ProxyServed) -> None:
    r, g = served.traces[FALLBACK_TURN["turn_id"]]["result"], served.glossary
    report = r["proxy"]
    with browser("proxy-fallback") as run:
        panel = open_proxy(run, served, FALLBACK_TURN)
        page = run.page
        expect(panel).to_have_attribute("data-confirmed", "false")
        status = panel.locator("#proxy-confirmation")
        expect(status).to_contain_text("⚠ Fallback: " + FALLBACK_LINE)
        check_help(page, status, "proxy.fallback", g["proxy.fallback"])
        expect(panel.locator("#proxy-model")).to_have_text(PROXY_MODEL)
        expect(panel.locator('[data-proxy="scored"] .count')).to_have_text(str(r["calls"]["scored"]))
        expect(panel.locator("#proxy-ranking thead th")).to_have_text(
            [
                "Source",
                "Proxy Δ (nats)",
                "Proxy role",
                "Hosted judge Δ (digits 1–9)",
                "Judged search Δ (digits 1–9)",
                "Judged role",
            ]
        )
        proxy_top, judged_top = report["proxy_ranking"][0], report["judged_ranking"][0]
        assert proxy_top["id"] != judged_top["id"]  # the two rankings differ: the point of the fallback
        assert row_cells(panel, proxy_top["id"]) == [
            drop(proxy_top["drop"]),
            "grounds ?",
            drop(report["hosted"]["top_source_drop"]),
            "not measured",
            "—",
        ]
        assert row_cells(panel, judged_top["id"]) == [
            "not measured",
            "—",
            "not measured",
            drop(judged_top["drop"]),
            "grounds ?",
        ]
        assert report["disagreements"]
        expect(panel.locator("#proxy-disagreements li")).to_have_text(["⚠ " + d for d in report["disagreements"]])
        check_explained(panel, "tau", g["tau"])
        # the scores shown are the judge's after a fallback, and the line says so
        expect(page.locator("#result-estimator .term")).to_have_attribute("data-term", "estimator.judged")
        run.shot("result", full_page=True)
        assert run.errors == []


def test_a_both_trace_says_its_scores_are_the_judged_traces(served: ProxyServed) -> None:
    """A trace under estimator both: its result says both, and the page shows its top-level scores as the
    judged trace's, as it did when the result said judged; there is no proxy block."""
    v, turn_id = served.v, CONFIRMED_TURN["turn_id"]
    quote = v.api.post("/v1/quotes", json={"turn_id": turn_id, "sentence": SMALL_CLAIM, "estimator": "both"})
    assert quote.status_code == 201, quote.text
    started = v.api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
    assert started.status_code == 202, started.text
    done = v.api.get(f"/v1/traces/{started.json()['trace_id']}", params={"wait": "true"}, timeout=120).json()
    assert done["status"] == "succeeded", done
    assert done["result"]["estimator"] == "both" and done["result"]["logprob"]["units"] == "nats"
    with browser("both-scores") as run:
        sign_in_as_admin(run, v, f"#/turn/{turn_id}/trace/{done['trace_id']}")
        page = run.page
        expect(page.locator("#result-estimator .term")).to_have_attribute("data-term", "estimator.judged")
        expect(page.locator("#result-estimator [data-glossary-label]")).to_have_text(
            served.glossary["estimator.judged"]["label"]
        )
        expect(page.locator("#proxy-panel")).to_have_count(0)
        assert run.errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_proxy_block_is_accessible_and_fits_390_px(served: ProxyServed, scheme: str) -> None:
    found: dict[str, list[dict[str, Any]]] = {}
    with browser(f"proxy-axe-{scheme}", width=390, height=844, color_scheme=scheme) as run:
        for turn in (CONFIRMED_TURN, FALLBACK_TURN):
            panel = open_proxy(run, served, turn) if not found else None
            if panel is None:
                run.page.goto(served.v.base_url + "/" + served.hash_of(turn))
                panel = run.page.locator("#proxy-panel")
                expect(panel).to_have_attribute("data-confirmed", str(turn is CONFIRMED_TURN).lower())
            panel.locator("details.explain").first.locator("summary").click()
            panel.locator(".term-toggle").first.click()
            found[turn["turn_id"]] = axe_violations(run.page)
            assert run.page.evaluate(OUTSIDE_VIEWPORT) == []
            assert run.page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
            run.shot(turn["turn_id"], full_page=True)
        assert {k: x for k, x in found.items() if x} == {}, json.dumps(found, indent=1)
        assert run.errors == []
