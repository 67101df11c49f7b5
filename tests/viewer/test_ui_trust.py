"""The viewer a user can trust, in real headless Chromium against the service on loopback (issue 16).

The page is ES modules with no build step; every number is explained where it appears (texts from
GET /v1/glossary); the gate, the progress panel and the result state one set of call counts, the API's; the
model-call panel shows what GET /v1/traces/{id}/calls kept; a quote from a JSON tool return reads
pretty-printed with its span marked, in the result and in the source; the turn list's filters, sort and
total live in the address; the trace list; the exports. No step may log a console error. Pictures land in
docs/ (see ``updating_docs``). Dark mode, shortcuts, 390 px and axe-core: tests/viewer/test_ui_access.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from support.ui import browser, save_docs_picture, sign_in_as_admin
from support.ui_served import EO_KEY, EO_TURN, Served, check_explained, open_result, served, turn_ids

from estimator.spans.verify import normalise

pytestmark = pytest.mark.timeout(240)
__all__ = ["served"]  # the module's fixture

STATIC = Path(__file__).resolve().parents[2] / "provenance_api" / "http" / "static"


# --------------------------------------------------------------------------- 1. modules, no build step


def test_the_viewer_is_es_modules_served_under_its_csp(served: Served) -> None:
    v = served.v
    page = v.api.get("/")
    scripts = re.findall(r"<script[^>]*>", page.text)
    assert scripts == ['<script type="module" src="/static/js/main.js">'], scripts
    assert "script-src 'self';" in page.headers["content-security-policy"]
    assert not (STATIC / "app.js").exists()
    sheets = re.findall(r'<link rel="stylesheet" href="(/static/[\w.-]+)">', page.text)
    assert sheets == ["/static/theme.css", "/static/app.css", "/static/result.css"], sheets
    for sheet in sheets:
        assert v.api.get(sheet).headers["content-type"].startswith("text/css"), sheet
    modules = sorted((STATIC / "js").glob("*.js"))
    assert len(modules) >= 12
    for path in modules:
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) <= 400, f"{path.name} has more than 400 lines"
        for banned in ("innerHTML", "outerHTML =", "insertAdjacentHTML", "document.write", "eval("):
            assert banned not in text, f"{path.name} uses {banned}: text goes in as text nodes only"
        for name in re.findall(r"from '\./([\w-]+\.js)'", text):
            assert (STATIC / "js" / name).is_file(), f"{path.name} imports a missing {name}"
        served_module = v.api.get(f"/static/js/{path.name}")
        assert served_module.status_code == 200 and served_module.text == text
        assert served_module.headers["content-type"].startswith("text/javascript")
    with browser("trust-modules") as run:
        sign_in_as_admin(run, v)
        expect(run.page.locator("#turn-count")).to_have_attribute("data-total", re.compile(r"^\d+$"))
        assert run.errors == []


# --------------------------------------------------------------------------- 2. every number explained


def test_every_number_is_explained_where_it_appears(served: Served) -> None:
    g = served.glossary
    with browser("trust-glossary") as run:
        page = open_result(run, served)
        for key in (
            "verdict.attributed",
            "gamma",
            "s_all",
            "s_none",
            "tau_gamma",
            "delta",
            "tau",
            "calls.planned",
            "calls.made",
            "calls.cached",
            "calls.billed",
            "calls.failed",
            "warning.truncated",
        ):
            check_explained(page, "#result-panel", key, g[key])
        for key in (
            "role.grounds",
            "role.irrelevant",
            "role.redundant",
            "support.supported",
            "support.silent",
            "confidence",
            "estimator.judged",
        ):
            term = page.locator(f'#result-panel .term[data-term="{key}"]').first
            toggle = term.locator(".term-toggle")
            expect(term.locator(".term-pop")).to_be_hidden()
            toggle.click()
            expect(toggle).to_have_attribute("aria-expanded", "true")
            expect(term.locator(".term-pop .short")).to_have_text(g[key]["short"])
            expect(term.locator(".term-pop .detail")).to_have_text(g[key]["detail"])
        page.keyboard.press("Escape")
        expect(page.locator('.term-toggle[aria-expanded="true"]')).to_have_count(0)
        expect(page.locator("#tree .confidence").first).to_contain_text("judge's own confidence 0.86")
        run.shot("explained", full_page=True)

        # labels speak plain words: no "memo", no "model knew it"
        labels = page.evaluate("""() => {
          const copy = document.getElementById('result-panel').cloneNode(true);
          copy.querySelectorAll('.explain, .term-pop, .claim, .quote-text, .note, .warnings').forEach(e => e.remove());
          return copy.textContent; }""")
        assert "memo" not in labels.lower() and "model knew it" not in labels
        plain = page.evaluate(
            "async () => (await import('/static/js/words.js')).diagnosisWords('model knew it, data agrees')"
        )
        assert "knew it" not in plain and "already knew" in plain

        # the gate explains its planned calls
        page.locator('#response .seg-traceable[data-seg="r2"]').first.click()
        expect(page.locator("#gate-accept")).to_be_enabled()
        check_explained(page, "#gate", "calls.planned", g["calls.planned"])
        page.keyboard.press("Escape")
        assert run.errors == []


# --------------------------------------------------------------------------- 3. one set of numbers


def test_gate_progress_and_result_state_the_same_call_numbers_as_the_api(served: Served) -> None:
    v = served.v
    with browser("trust-numbers") as run:
        sign_in_as_admin(run, v, f"#/turn/{EO_TURN['turn_id']}")
        page = run.page
        # the claim traced before: the judgement cache answers this time (the run that read "0 calls made")
        page.locator('#response .seg-traceable[data-seg="r1"]').first.click()
        expect(page.locator("#gate-accept")).to_be_enabled()
        planned = int(page.locator("#gate-calls").text_content() or "0")
        page.locator("#gate-accept").click()
        status = page.locator("#run-status")
        expect(status).to_have_attribute("data-done", "true", timeout=90_000)
        expect(page.locator("#result-panel")).to_be_visible()
        trace_id = page.url.rsplit("/", 1)[-1]
        calls = v.api.get(f"/v1/traces/{trace_id}").json()["calls"]
        assert calls["planned"] == planned and calls["cached"] > 0, calls
        assert calls["made"] + calls["cached"] <= planned
        sentence = (
            f"{calls['made']} made of {calls['planned']} planned · {calls['cached']} answered from cache ($0)"
            f" · {calls['billed']} billed · {calls['failed']} failed"
        )
        expect(status).to_have_text(f"Finished: {sentence}.")
        expect(page.locator("#result-calls")).to_contain_text(sentence)
        for word in ("planned", "made", "cached", "billed", "failed"):
            figure = page.locator(f'#result-calls-figures [data-count="{word}"] .count')
            expect(figure).to_have_text(str(calls[word]))
        listed = v.api.get("/v1/traces", params={"turn_id": EO_TURN["turn_id"]}).json()["items"]
        assert next(t for t in listed if t["trace_id"] == trace_id)["calls"] == calls
        expect(page.locator("#past-traces li")).to_have_count(2)
        run.shot("numbers", full_page=True)
        assert run.errors == []


# --------------------------------------------------------------------------- 4. the model-call panel


def _parsed(value: float | None) -> str:
    if value is None:
        return "—"
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def test_the_model_call_panel_shows_what_the_api_kept(served: Served) -> None:
    v = served.v
    data = v.api.get(f"/v1/traces/{served.trace['trace_id']}/calls").json()
    assert data["kept"] > 0, f"GET /v1/traces/{{id}}/calls kept no call of a finished trace: {data}"
    with browser("trust-calls") as run:
        page = open_result(run, served)
        page.locator("#open-calls").click()
        panel = page.locator("#calls-panel")
        expect(panel).to_be_visible()
        expect(panel.locator("#calls-count")).to_have_attribute("data-total", str(data["total"]))
        items = panel.locator("#call-list > .call")
        expect(items).to_have_count(data["kept"])
        for k, call in enumerate(data["calls"]):
            item = items.nth(k)
            expect(item).to_have_attribute("data-stage", call["stage"])
            expect(item).to_have_attribute("data-outcome", call["outcome"])
            summary = item.locator("summary")
            expect(summary.locator(".call-index")).to_have_text(f"#{call['index']}")
            expect(summary.locator(".call-mask")).to_have_text(call["mask"])
            expect(summary.locator(".call-parsed")).to_have_text("read " + _parsed(call["parsed"]))
            expect(summary.locator(".call-tokens")).to_have_text(
                f"{call['input_tokens']:,} in → {call['output_tokens']:,} out"
            )
        first = data["calls"][0]
        items.first.locator("summary").click()
        messages = items.first.locator(".msg")
        expect(messages).to_have_count(len(first["prompt"]))
        for k, message in enumerate(first["prompt"]):
            expect(messages.nth(k)).to_have_attribute("data-role", message["role"])
            assert messages.nth(k).locator(".msg-text").text_content() == message["content"]
        if first["reply"] is not None:
            assert items.first.locator(".call-reply").text_content() == first["reply"]
        for k, call in enumerate(data["calls"]):
            expect(items.nth(k).locator(".call-truncated")).to_have_count(1 if call["prompt_truncated"] else 0)
        # the keyboard moves between calls; Escape closes the panel and focus returns to its button
        page.keyboard.press("j")
        expect(items.nth(1).locator("summary")).to_be_focused()
        page.keyboard.press("k")
        expect(items.first.locator("summary")).to_be_focused()
        run.shot("calls")
        save_docs_picture(page, "model-calls.png", panel)
        page.keyboard.press("Escape")
        expect(panel).to_be_hidden()
        expect(page.locator("#open-calls")).to_be_focused()
        assert run.errors == []


# --------------------------------------------------------------------------- 5. readable evidence


def test_a_quote_from_a_json_return_reads_pretty_printed_with_its_span_marked(served: Served) -> None:
    with browser("trust-evidence") as run:
        page = open_result(run, served)
        box = page.locator('.quote-box[data-source-id="s0"]')
        expect(box).to_have_attribute("data-evidence", "json")
        text = box.locator(".quote-text").text_content() or ""
        assert '"description": "The Terra and Aqua' in text and '\\"' not in text
        assert re.search(r'\n {4,}"period": "yearly"', text), text  # one field a line, indented
        marked = box.locator(".quote-text mark").text_content() or ""
        assert normalise(EO_KEY) in normalise(marked)

        box.locator(".quote-button").click()
        dialog = page.locator("#source-viewer")
        expect(dialog).to_be_visible()
        span = dialog.locator("#source-lines mark.quote-span")
        expect(span).to_have_count(1)
        assert normalise(EO_KEY) in normalise(span.text_content() or "")
        start = int(box.locator(".quote-button").get_attribute("data-line-start") or 0)
        expect(span.locator("xpath=ancestor::li[1]")).to_have_attribute("data-line", str(start))
        expect(span).to_be_in_viewport()
        run.shot("span-in-source")
        dialog.locator("#source-format").click()
        pretty = dialog.locator("#source-formatted mark")
        expect(pretty).to_be_in_viewport()
        assert normalise(EO_KEY) in normalise(pretty.text_content() or "")
        run.shot("span-formatted")
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()
        assert run.errors == []


# --------------------------------------------------------------------------- 6. lists, the address, exports


def _listed(page: Page) -> list[str]:
    return [str(x) for x in page.locator(".turn-link").evaluate_all("els => els.map(e => e.dataset.turnId)")]


def test_turn_filters_sort_and_total_live_in_the_address(served: Served) -> None:
    v = served.v
    with browser("trust-turns") as run:
        sign_in_as_admin(run, v)
        page = run.page
        ids, total = turn_ids(v)
        expect(page.locator("#turn-count")).to_have_text(f"{total} turns")
        assert _listed(page) == ids

        page.get_by_label("Model").fill("openai/gpt-4o")
        page.get_by_label("Model").press("Enter")
        ids, total = turn_ids(v, model="openai/gpt-4o")
        expect(page.locator("#turn-count")).to_have_text(f"{total} turns match")
        assert "model=openai%2Fgpt-4o" in page.url and _listed(page) == ids and total == 2

        page.get_by_label("Sort").select_option("-traceable")
        expect(page).to_have_url(re.compile(r"sort=-traceable"))
        page.get_by_label("To (UTC date, included)").fill("2025-01-31")
        ids, total = turn_ids(v, model="openai/gpt-4o", sort="-traceable", until="2025-02-01T00:00:00Z")
        expect(page.locator("#turn-count")).to_have_text(f"{total} turn matches")
        assert _listed(page) == ids == ["list-a"]
        run.shot("filtered")

        page.reload()  # the address restores every filter
        expect(page.get_by_label("Model")).to_have_value("openai/gpt-4o")
        expect(page.get_by_label("Sort")).to_have_value("-traceable")
        expect(page.get_by_label("To (UTC date, included)")).to_have_value("2025-01-31")
        expect(page.locator("#turn-count")).to_have_text("1 turn matches")

        page.go_back()  # Back: the filter before the date
        expect(page.get_by_label("To (UTC date, included)")).to_have_value("")
        ids, total = turn_ids(v, model="openai/gpt-4o", sort="-traceable")
        expect(page.locator("#turn-count")).to_have_text(f"{total} turns match")
        assert _listed(page) == ids

        page.goto(v.base_url + "/#/?agent=billing%20bot&min_traceable=1&since=2025-01-01")  # a shared link
        ids, total = turn_ids(v, agent="billing bot", min_traceable="1", since="2025-01-01T00:00:00Z")
        expect(page.locator("#turn-count")).to_have_text(f"{total} turn matches")
        expect(page.get_by_label("Sentences to trace, at least")).to_have_value("1")
        assert _listed(page) == ids == ["list-a"]
        assert run.errors == []


def test_the_trace_list_and_a_result_exported(served: Served) -> None:
    v = served.v
    with browser("trust-traces") as run:
        run.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=v.base_url)
        sign_in_as_admin(run, v, "#/traces")
        page = run.page
        body = v.api.get("/v1/traces", params={"limit": 25}).json()
        noun = "trace" if body["total"] == 1 else "traces"
        expect(page.locator("#trace-count")).to_have_text(f"{body['total']} {noun}")
        rows = page.locator(".trace-link")
        expect(rows).to_have_count(len(body["items"]))
        for k, item in enumerate(body["items"]):
            expect(rows.nth(k)).to_have_attribute("data-trace-id", item["trace_id"])
            expect(rows.nth(k)).to_have_attribute("data-source", item["source"])
            expect(rows.nth(k).locator(".meta").first).to_contain_text(item["model"])
        page.get_by_label("Status").select_option("succeeded")
        expect(page).to_have_url(re.compile(r"#/traces\?status=succeeded"))
        ok = v.api.get("/v1/traces", params={"status": "succeeded"}).json()
        expect(page.locator("#trace-count")).to_have_text(re.compile(rf"^{ok['total']} traces? match"))
        run.shot("traces")
        save_docs_picture(page, "traces-list.png", page.locator("#view"), max_height=900)

        page.locator(f'.trace-link[data-trace-id="{served.trace["trace_id"]}"]').click()
        expect(page.locator("#verdict")).to_be_visible()
        trace_id = served.trace["trace_id"]
        for button, fmt in (("#export-json", "json"), ("#export-markdown", "markdown")):
            with page.expect_download() as caught:
                page.locator(button).click()
            got = Path(caught.value.path()).read_text(encoding="utf-8")
            want = v.api.get(f"/v1/traces/{trace_id}/export", params={"format": fmt}).text
            assert (json.loads(got) == json.loads(want)) if fmt == "json" else got == want
        page.locator("#copy-citation").click()
        expect(page.locator("#export-status")).to_have_text("Citation copied.")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied == v.api.get(f"/v1/traces/{trace_id}/export", params={"format": "markdown"}).text
        assert run.errors == []
