"""The provenance viewer end to end, in real headless Chromium against the service on loopback.

Each flow: sign in, find the turn in the list, check that only the expected sentences carry the
traceable underline (and only quoted ones the quoted marker), open the cost gate and read its
figures, accept, watch the progress bar reach completion from the trace's server-sent events,
read the result and click a verified quote to see its lines highlighted in the source. The judge
is scripted behind an OpenAI-compatible server reached through the real litellm adapter. Every
step leaves a screenshot in test-artifacts/ui/, and no step may log a console error.

The API checks below (no browser) cover the session cookie: HttpOnly and SameSite=Strict, accepted
by /v1 like a Bearer key, refused on a cross-site POST, scoped to its tenant.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect
from support.api_server import make_key, small_turn
from support.ui import (
    DOCS_SCREENSHOT,
    FIXTURES,
    BrowserRun,
    SourceKeyedJudge,
    Viewer,
    browser,
    load_json,
    require_tau_bench,
    save_docs_picture,
    viewer,
)

from estimator.corpus.turn import StoredTurn
from estimator.spans.verify import normalise
from provenance_api.http.ui_auth import COOKIE_NAME
from provenance_api.importers import import_conversation
from provenance_api.providers import free_tier

pytestmark = pytest.mark.timeout(180)

EO_TURN = load_json(FIXTURES / "eo_worldview_turn.json")
EO_EXPECTED = load_json(FIXTURES / "eo_worldview_turn.expected.json")
# the paper's 31 calls for this turn (§8.2: (|L|+2) + (d'+2) + 2d'') plus 8 keep-alone calls of redundancy
# resolution (one per round-2 candidate), as tests/method/test_cost.py checks term by term
EO_PLANNED = 43 + 5  # 15 sources with the prompt split into its rules (the paper's 31 + 8: the prompt kept whole)
EO_CLAIM_ID = "r1"  # "Layer: MODIS Annual Land Cover Type (IGBP classification)."
EO_KEY = "Land Cover Type (MCD12Q1) Version 6.1"  # only the search_worldview_layers return (s0) says it
TAU_CONVERSATION = "tau-airline-0-0"

MARKDOWN = """### Order A-1

Order A-1 **shipped** on 2025-03-03 with *DHL*, tracking `99812` —
see [the carrier's page](https://example.org/track?id=99812) or <https://example.org/help>.
The field order_status_code says so.

- first **item**
- second item
  1. nested one
  2. nested two

> Keep the receipt.

| order | carrier |
|---|---|
| A-1 | DHL |

```
track("A-1")
```

A [bad link](javascript:alert(1)) stays text.
"""

SEGMENT_MARKS = """() => {
  const out = {};
  for (const el of document.querySelectorAll('#response .seg')) {
    const id = el.dataset.seg;
    const style = getComputedStyle(el);
    const dotted = style.textDecorationLine.includes('underline') && style.textDecorationStyle === 'dotted';
    const next = el.nextElementSibling;
    const marked = !!(next && next.classList.contains('quote-mark'));
    const entry = out[id] || (out[id] = {status: el.dataset.status, dotted: false, marked: false});
    entry.dotted = entry.dotted || dotted;
    entry.marked = entry.marked || marked;
  }
  return out;
}"""

OTHER_UNDERLINES = """() => [...document.querySelectorAll('#response *')]
  .filter(el => !el.closest('.seg-traceable') && !el.closest('a'))
  .filter(el => getComputedStyle(el).textDecorationLine.includes('underline'))
  .map(el => el.outerHTML.slice(0, 80))"""

WATCH_PROGRESS = """() => {
  window.__progressSeen = [];
  new MutationObserver(() => {
    const bar = document.getElementById('run-progress');
    if (bar) window.__progressSeen.push([Number(bar.value), Number(bar.max)]);
  }).observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
}"""


def money(cost: float | None) -> str:
    assert cost is not None
    return f"~${cost:.4f}" if cost < 0.01 else f"~${cost:.3f}"


# --------------------------------------------------------------------------- steps shared by both flows


def sign_in(run: BrowserRun, v: Viewer) -> None:
    page = run.page
    page.goto(v.base_url + "/")
    key_field = page.get_by_label("API key")
    expect(key_field).to_be_focused()
    key_field.fill(v.admin_key)
    run.shot("sign-in")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Stored turns")).to_be_visible()
    expect(page.locator("#who-name")).to_contain_text("admin")
    assert v.admin_key not in page.url
    cookie = next(c for c in run.context.cookies() if c["name"] == COOKIE_NAME)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert v.admin_key not in page.evaluate("document.cookie")


def open_turn_from_list(run: BrowserRun, search: str, turn_id: str, rows: int, summary: str) -> None:
    page = run.page
    page.get_by_label("Search turns by text").fill(search)
    expect(page.locator(".turn-link")).to_have_count(rows)
    row = page.locator(f'.turn-link[data-turn-id="{turn_id}"]')
    expect(row.locator(".summary")).to_have_text(summary)
    run.shot("turns")
    row.click()
    expect(page.locator("#summary-line")).to_have_text(summary)


def check_marks(page: Page, statuses: dict[str, str]) -> None:
    """Only traceable sentences are underlined (dotted), only quoted ones carry the quoted marker,
    and nothing else in the response is underlined."""
    marks: dict[str, dict[str, Any]] = page.evaluate(SEGMENT_MARKS)
    assert {k: m["status"] for k, m in marks.items()} == statuses
    underlined = {k for k, m in marks.items() if m["dotted"]}
    quoted = {k for k, m in marks.items() if m["marked"]}
    assert underlined == {k for k, s in statuses.items() if s == "traceable"}
    assert quoted == {k for k, s in statuses.items() if s == "quoted"}
    assert page.evaluate(OTHER_UNDERLINES) == []


def read_gate(run: BrowserRun, v: Viewer, turn_id: str, segment_id: str, model: str) -> dict[str, Any]:
    """The figures the gate shows must be the service's quote for the same claim and model."""
    page = run.page
    expect(page.locator("#gate")).to_be_visible()
    expect(page.locator("#gate-calls")).not_to_be_empty()
    quote: dict[str, Any] = v.api.post(
        "/v1/quotes", json={"turn_id": turn_id, "sentence": segment_id, "model": model}
    ).json()
    expect(page.locator("#gate-model")).to_have_value(model)
    expect(page.locator("#gate-judge")).to_have_text(quote["model"])
    expect(page.locator("#gate-calls")).to_have_text(str(quote["planned_calls"]))
    expect(page.locator("#gate-sources")).to_have_text(str(quote["sources"]))
    expect(page.locator("#gate-tokens")).to_have_text(f"{quote['input_tokens']:,}")
    expect(page.locator("#gate-cost")).to_have_text(money(quote["cost_usd"]))
    expect(page.locator("#gate-warnings li")).to_have_count(len(quote["warnings"]))
    for k, warning in enumerate(quote["warnings"]):
        expect(page.locator("#gate-warnings li .warning-text").nth(k)).to_have_text("⚠ " + warning)
    expect(page.locator("#gate-refused")).to_have_count(0)
    expect(page.locator("#gate-accept")).to_be_enabled()
    run.shot("cost-gate")
    return quote


def accept_and_watch(run: BrowserRun, planned: int) -> None:
    page = run.page
    page.evaluate(WATCH_PROGRESS)
    page.locator("#gate-accept").click()
    expect(page.locator("#gate")).to_be_hidden()
    expect(page.locator("#run-progress")).to_be_visible()
    expect(page.locator("#run-progress")).to_have_attribute("max", str(planned))
    run.shot("progress")
    expect(page.locator("#run-status")).to_have_attribute("data-done", "true", timeout=90_000)
    expect(page.locator("#run-status")).to_contain_text(f"of {planned} planned")
    value, maximum = page.evaluate(
        "() => [document.getElementById('run-progress').value, document.getElementById('run-progress').max]"
    )
    assert value == maximum == planned
    seen: list[list[float]] = page.evaluate("window.__progressSeen")
    assert any(0 < done < planned for done, _ in seen), f"no intermediate progress seen: {seen}"
    run.shot("progress-done")


def open_quote(run: BrowserRun, source_id: str) -> str:
    """Click a verified quote; its source opens with exactly the quoted lines highlighted."""
    page = run.page
    button = page.locator(f'.quote-button[data-source-id="{source_id}"]')
    expect(button).to_have_count(1)
    start = int(button.get_attribute("data-line-start") or 0)
    end = int(button.get_attribute("data-line-end") or 0)
    quote = button.get_attribute("data-quote") or ""
    assert 1 <= start <= end
    button.click()
    dialog = page.locator("#source-viewer")
    expect(dialog).to_be_visible()
    lines = page.locator("#source-lines .src-line.hl")
    expect(lines).to_have_count(end - start + 1)
    assert [int(n) for n in lines.evaluate_all("els => els.map(e => e.dataset.line)")] == list(range(start, end + 1))
    highlighted = "\n".join(lines.all_text_contents())
    assert normalise(quote) in normalise(highlighted)
    expect(page.locator("#source-range")).to_contain_text("line")
    expect(lines.first).to_be_in_viewport()
    run.shot("quote-in-source")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(button).to_be_focused()
    return quote


def save_docs_screenshot(page: Page) -> None:
    """The README's picture of the result view (verdict, chart, the top of the tree), written when it
    is missing or PROVENANCE_UPDATE_SCREENSHOTS=1."""
    save_docs_picture(page, DOCS_SCREENSHOT.name, page.locator("#result-panel"))


# --------------------------------------------------------------------------- the flows


def test_viewer_flow_on_the_eo_fixture_turn(tmp_path: Path) -> None:
    judge = SourceKeyedJudge([EO_KEY], delay=0.08)
    statuses = {k: s["status"] for k, s in EO_EXPECTED["segments"].items()}
    turn_id = EO_TURN["turn_id"]
    with viewer(tmp_path / "data", judge) as v, browser("eo") as run:
        v.store(EO_TURN)
        v.store(small_turn())
        page = run.page
        sign_in(run, v)
        expect(page.locator(".turn-link")).to_have_count(2)
        # the fixture's expected gating counts the prompt as one source; the service splits it into its 8 rules
        line = EO_EXPECTED["summary"]["line"].replace("8 sources", "15 sources", 1)
        open_turn_from_list(run, "worldview", turn_id, 1, line)

        # the free tier: marks, hover on the quoted sentence, the sources panel
        check_marks(page, statuses)
        quoted = page.locator('#response .seg-quoted[data-seg="r7"]').first
        quoted.hover()
        tip = EO_EXPECTED["quoted"]["r7"]
        expect(page.locator("#tip")).to_be_visible()
        expect(page.locator("#tip")).to_contain_text(f"({tip['source_id']}), line {tip['line_start']}")
        sources = page.locator("#sources")
        expect(sources.get_by_role("heading", level=3)).to_have_text(["Tools · 5", "Instructions · 8", "History · 2"])
        expect(page.locator("#unversioned-notice")).to_be_visible()
        expect(sources.locator('li[data-source-id="s3"] .trunc')).to_be_visible()
        expect(sources.locator('li[data-source-id="s3"] .source-meta')).to_contain_text("file read")
        page.mouse.move(0, 0)
        run.shot("turn")

        # a selected span of the response can be priced too (then cancelled)
        page.evaluate(
            """() => {
              const el = document.querySelector('#response .seg[data-seg="r9"]');
              const text = el.firstChild;
              const range = document.createRange();
              range.setStart(text, 0);
              range.setEnd(text, 'In practice, I would start with an Alabama bounding box'.length);
              const sel = window.getSelection();
              sel.removeAllRanges();
              sel.addRange(range);
            }"""
        )
        expect(page.locator("#trace-selection")).to_be_enabled()
        page.locator("#trace-selection").click()
        expect(page.locator("#gate-claim")).to_have_text("In practice, I would start with an Alabama bounding box")
        expect(page.locator("#gate-calls")).to_have_text(str(EO_PLANNED))
        page.locator("#gate-cancel").click()
        expect(page.locator("#gate")).to_be_hidden()

        # keyboard: a traceable sentence is focusable and Enter opens the gate; Escape closes it
        sentence = page.locator(f'#response .seg-traceable[data-seg="{EO_CLAIM_ID}"]').first
        sentence.focus()
        page.keyboard.press("Enter")
        quote = read_gate(run, v, turn_id, EO_CLAIM_ID, EO_TURN["model"])
        assert quote["planned_calls"] == EO_PLANNED and quote["sources"] == 15 and quote["truncated_sources"] == ["s3"]
        page.keyboard.press("Escape")
        expect(page.locator("#gate")).to_be_hidden()
        expect(sentence).to_be_focused()

        # the flow: click, gate, accept, progress, result
        sentence.click()
        read_gate(run, v, turn_id, EO_CLAIM_ID, EO_TURN["model"])
        accept_and_watch(run, EO_PLANNED)

        verdict = page.locator("#verdict")
        expect(verdict).to_have_attribute("data-verdict", "attributed")
        expect(verdict.locator(".verdict-title")).to_have_text("Attributed")
        expect(page.locator("#gamma")).to_have_text(
            "Γ = 7.00 — support with every source s(1) = 9.00, with none s(0) = 2.00."
        )
        expect(page.locator("#drops-chart .bar.role-grounds")).to_have_count(2)  # the tools layer and s0
        tree = page.locator("#tree")
        expect(tree.locator('li[data-source-id="s0"] .verdict-words .words')).to_have_text("states the claim")
        # s12: the prompt's last rule (s5–s12 are its 8 rules; MAX_SOURCES = 12 leaves the 3 oldest unchecked)
        expect(tree.locator('li[data-source-id="s12"] .verdict-words .words')).to_have_text(
            "no instruction here bears on this"
        )
        expect(tree.locator('li[data-source-id="s12"]')).to_contain_text("an edit since this turn can't be")
        expect(tree.locator('li[data-source-id="s0"] .diag')).to_have_text("grounded in your data")
        run.shot("result", full_page=True)
        save_docs_screenshot(page)

        assert EO_KEY in open_quote(run, "s0")

        # the trace is listed with the turn, and the page's result is the service's
        past = page.locator("#past-traces li")
        expect(past).to_have_count(1)
        expect(past.first).to_contain_text("Attributed")
        trace_id = page.url.rsplit("/", 1)[-1]
        stored = v.api.get(f"/v1/traces/{trace_id}").json()
        assert stored["status"] == "succeeded" and stored["result"]["verdict"] == "attributed"
        assert stored["calls"]["made"] == v.judge_server.answered

        # the probe next to a grounding source: priced, accepted, run, its verdict shown with B/k, W/k
        probe = page.locator('#tree .probe[data-probe-source="s0"]')
        probe.locator(".probe-button").click()
        expect(probe.locator(".probe-quote")).to_contain_text("6 sampled calls")
        probe.locator(".probe-accept").click()
        expect(probe.locator(".probe-verdict")).to_have_attribute("data-verdict", "inconclusive", timeout=30_000)
        expect(probe.locator(".status")).to_contain_text("baseline unstable: 0/3")
        expect(probe.locator(".status")).to_contain_text("W = 0/3")
        expect(page.locator('#tree .probe[data-probe-source="s12"]')).to_have_count(0)

        # opening the trace's address directly shows the same result
        page.reload()
        expect(page.locator("#verdict")).to_have_attribute("data-verdict", "attributed")

        # a trace whose every model call fails ends "failed" with its reason, and shows no result
        judge.failing = True
        page.locator('#response .seg-traceable[data-seg="r2"]').first.click()
        expect(page.locator("#gate-accept")).to_be_enabled()
        page.locator("#gate-accept").click()
        status = page.locator("#run-status")
        expect(status).to_have_attribute("data-done", "false", timeout=60_000)
        expect(status).to_contain_text("The trace failed: every model call failed")
        expect(status).to_contain_text("No result is shown for it.")
        expect(page.locator("#result-panel")).to_have_count(0)
        expect(page.locator("#past-traces li")).to_have_count(2)
        expect(page.locator("#past-traces li").first).to_contain_text("failed")
        run.shot("failed-trace")
        judge.failing = False

        # another verdict: nothing in the NDVI turn carries its claim, so it is the model's own knowledge
        ndvi = load_json(FIXTURES / "ndvi_parametric_turn.json")
        v.store(ndvi)
        quote_id = v.api.post("/v1/quotes", json={"turn_id": ndvi["turn_id"], "sentence": "r0"}).json()["quote_id"]
        started = v.api.post("/v1/traces", json={"quote_id": quote_id}).json()
        done = v.api.get(f"/v1/traces/{started['trace_id']}", params={"wait": "true"}).json()
        assert done["status"] == "succeeded", done
        page.goto(f"{v.base_url}/#/turn/{ndvi['turn_id']}/trace/{started['trace_id']}")
        verdict = page.locator("#verdict")
        expect(verdict).to_have_attribute("data-verdict", "internal_knowledge")
        expect(verdict.locator(".verdict-title")).to_have_text("Model's own knowledge")
        expect(verdict).to_contain_text("unverifiable model knowledge")
        expect(page.locator("#gamma")).to_contain_text("Γ = 0.00")
        expect(page.locator("#past-traces li")).to_have_count(1)
        run.shot("internal-knowledge", full_page=True)

        # the response's markdown: blocks, inline marks, safe links only, identifiers left alone
        v.store(small_turn("t-markdown", response=MARKDOWN))
        page.goto(f"{v.base_url}/#/turn/t-markdown")
        response = page.locator("#response")
        expect(response.locator("h5")).to_have_text("Order A-1")  # ### under the page's h1 and h2
        expect(response.locator("strong").first).to_have_text("shipped")
        expect(response.locator("em")).to_have_text(["DHL"])
        expect(response.locator("code").first).to_have_text("99812")
        expect(response.locator('a[href="https://example.org/track?id=99812"]')).to_have_text("the carrier's page")
        expect(response.locator("a")).to_have_count(2)  # the javascript: link is shown as text only
        expect(response).to_contain_text("order_status_code")
        expect(response.locator("ul > li")).to_have_count(2)
        expect(response.locator("ul ol > li")).to_have_count(2)
        expect(response.locator("blockquote")).to_have_text("Keep the receipt.")
        expect(response.locator("td")).to_have_text(["A-1", "DHL"])
        expect(response.locator("pre code")).to_have_text('track("A-1")')
        rendered = page.evaluate(
            "() => [...document.querySelectorAll('#response .seg')].map(e => e.dataset.seg + ':' + e.textContent)"
        )
        assert rendered, "no segment was laid onto the rendered markdown"
        run.shot("markdown")

        # a narrow window: everything reflows, nothing scrolls sideways
        page.goto(f"{v.base_url}/#/turn/{turn_id}/trace/{trace_id}")
        page.set_viewport_size({"width": 390, "height": 844})
        expect(page.locator("#verdict")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        run.shot("narrow", full_page=True)

        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_label("API key")).to_be_visible()
        assert not [c for c in run.context.cookies() if c["name"] == COOKIE_NAME]
        assert run.errors == []


def _tau_turns() -> tuple[list[dict[str, Any]], str, str, str]:
    """One τ-bench airline conversation through the retrofit path, and the turn and sentence to trace:
    the first turn with a traceable sentence, and that sentence's first anchor as the judge's key."""
    conversation = next(c for c in require_tau_bench() if c["task_id"] == 0 and c["trial"] == 0)
    imported = import_conversation(conversation, "openai_chat", conversation_id=TAU_CONVERSATION)
    assert imported.errors == [] and imported.turns
    for turn in imported.turns:
        view = free_tier.gate_view(turn)
        for gated in view.report.segments:
            if gated.status.value == "traceable" and gated.anchors:
                turns = [t.model_dump(mode="json") for t in imported.turns]
                return turns, turn.turn_id, gated.segment.id, gated.anchors[0]
    raise AssertionError("no traceable sentence in the τ-bench conversation")


def test_viewer_flow_on_an_imported_tau_bench_conversation(tmp_path: Path) -> None:
    turns, turn_id, segment_id, key = _tau_turns()
    default_model = "openai/gpt-4o-mini"
    judge = SourceKeyedJudge([key], delay=0.05)
    with viewer(tmp_path / "data", judge, default_model=default_model) as v, browser("tau") as run:
        for turn in turns:
            v.store(turn)
        page = run.page
        sign_in(run, v)
        segments = v.api.get(f"/v1/turns/{turn_id}/segments").json()
        open_turn_from_list(run, TAU_CONVERSATION, turn_id, len(turns), segments["summary"]["line"])
        check_marks(page, {s["id"]: s["status"] for s in segments["segments"]})
        run.shot("tau-turn")

        page.locator(f'#response .seg-traceable[data-seg="{segment_id}"]').first.click()
        quote = read_gate(run, v, turn_id, segment_id, default_model)
        accept_and_watch(run, quote["planned_calls"])

        trace_id = page.url.rsplit("/", 1)[-1]
        result = v.api.get(f"/v1/traces/{trace_id}").json()["result"]
        expect(page.locator("#verdict")).to_have_attribute("data-verdict", result["verdict"])
        assert result["verdict"] in ("attributed", "redundant")
        run.shot("tau-result", full_page=True)
        quoted = [s for s in result["sources"] if s["support"] and s["support"]["quote"]]
        assert quoted, f"the judge quoted no source: {json.dumps(result['sources'])[:3000]}"
        assert normalise(key) in normalise(open_quote(run, quoted[0]["source_id"]))
        expect(page.locator("#past-traces li")).to_have_count(1)
        assert run.errors == []


# --------------------------------------------------------------------------- the session cookie over HTTP


def test_session_cookie_is_http_only_strict_accepted_by_the_api_and_tenant_scoped(tmp_path: Path) -> None:
    judge = SourceKeyedJudge(["DHL"])
    with viewer(tmp_path / "data", judge) as v:
        v.store(small_turn())
        with httpx.Client(base_url=v.base_url, timeout=60) as anon:
            assert anon.get("/ui/session").json() == {"signed_in": False}
            page = anon.get("/")
            assert page.status_code == 200 and "text/html" in page.headers["content-type"]
            assert "default-src 'self'" in page.headers["content-security-policy"]
            for asset in ("js/main.js", "js/turn.js", "theme.css", "app.css", "result.css", "favicon.svg"):
                assert anon.get(f"/static/{asset}").status_code == 200
            module = anon.get("/static/js/main.js")
            assert module.headers["content-type"].startswith("text/javascript")
            assert "script-src 'self'" in module.headers["content-security-policy"]
            for bad in ("..%2Fui.py", "js/..%2F..%2Froutes%2Fui.py", "js/nope.js", "vendor%2Fx.js"):
                assert anon.get(f"/static/{bad}").status_code == 404, bad
            assert anon.get("/ui/api/turns").status_code == 401
            assert anon.post("/ui/session", json={"api_key": "pvk_wrong"}).status_code == 401
            assert COOKIE_NAME not in anon.cookies

        with httpx.Client(base_url=v.base_url, timeout=60) as client:
            signed = client.post("/ui/session", json={"api_key": v.admin_key})
            assert signed.status_code == 200 and signed.json()["tenant"] == "local"
            header = signed.headers["set-cookie"]
            assert re.search(r"(?i)httponly", header) and re.search(r"(?i)samesite=strict", header)
            assert "Path=/" in header
            # the cookie is accepted wherever a Bearer key is: reads, quotes, the viewer's own reads
            assert client.get("/v1/turns").json()["items"][0]["turn_id"] == "t-small-1"
            quoted = client.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0"})
            assert quoted.status_code == 201, quoted.text
            same_site = client.post(
                "/v1/quotes",
                json={"turn_id": "t-small-1", "sentence": "r0"},
                headers={"Origin": v.base_url, "Sec-Fetch-Site": "same-origin"},
            )
            assert same_site.status_code == 201
            # … but a cookie another site made the browser send is refused
            for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
                cross = client.post("/v1/quotes", json={"turn_id": "t-small-1", "sentence": "r0"}, headers=headers)
                assert cross.status_code == 403 and cross.json()["type"].endswith("cross-site-request")
            listed = client.get("/ui/api/turns", params={"q": "DHL"}).json()
            assert [t["turn_id"] for t in listed["items"]] == ["t-small-1"]
            assert listed["items"][0]["summary"].startswith("2 sources · 2 sentences")
            assert client.get("/ui/api/turns", params={"q": "no such words"}).json()["items"] == []
            source = client.get("/ui/api/turns/t-small-1/sources/s0").json()
            assert source["lines"] and "carrier DHL" in "\n".join(source["lines"])
            assert client.get("/ui/api/turns/t-small-1/traces").json()["items"] == []

            # another tenant sees none of it
            other = make_key(v.server.data_dir, "other-tenant", "eve")
            with httpx.Client(base_url=v.base_url, headers={"Authorization": f"Bearer {other}"}, timeout=60) as eve:
                assert eve.get("/ui/api/turns").json()["items"] == []
                assert eve.get("/ui/api/turns/t-small-1/traces").status_code == 404
                assert eve.get("/ui/api/turns/t-small-1/sources/s0").status_code == 404

            out = client.post("/ui/logout")
            assert out.status_code == 200 and COOKIE_NAME not in client.cookies
            assert client.get("/v1/turns").status_code == 401


def test_the_turn_list_pages_and_searches(tmp_path: Path) -> None:
    with viewer(tmp_path / "data", SourceKeyedJudge(["x"])) as v:
        for i in range(7):
            v.store(small_turn(f"page-{i}"))
        first = v.api.get("/ui/api/turns", params={"limit": 3, "sort": "stored_at"}).json()
        assert [t["turn_id"] for t in first["items"]] == ["page-0", "page-1", "page-2"]
        assert first["total"] == 7
        seen = [t["turn_id"] for t in first["items"]]
        cursor = first["next_cursor"]
        while cursor:
            page = v.api.get("/ui/api/turns", params={"limit": 3, "cursor": cursor, "sort": "stored_at"}).json()
            seen += [t["turn_id"] for t in page["items"]]
            cursor = page["next_cursor"]
        assert seen == [f"page-{i}" for i in range(7)]
        found = v.api.get("/ui/api/turns", params={"q": "PAGE-5"}).json()
        assert [t["turn_id"] for t in found["items"]] == ["page-5"] and found["next_cursor"] is None
        turn = StoredTurn.model_validate(small_turn("page-0"))
        assert first["items"][0]["summary"] == free_tier.gate_view(turn).report.summary.line()
