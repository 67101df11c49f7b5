"""The viewer's labels are the glossary's (GET /v1/glossary): a trace result's first paint shows them, and
when the glossary cannot be loaded the page shows each value's own name until it arrives, then rewrites
the labels in place (Chromium)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Route, expect
from support.ui import browser, sign_in_as_admin
from support.ui_served import Served, open_result, served

__all__ = ["served"]  # the module's fixture


def _checked_source(result: dict[str, Any]) -> dict[str, Any]:
    """A span-checked source outside the instructions layer whose support label is not its own name."""
    return next(
        s
        for s in result["sources"]
        if s["support"] and not s["support"]["no_information"] and s["layer"] != "instructions"
    )


def test_a_results_first_paint_shows_the_glossarys_labels(served: Served) -> None:
    g, r = served.glossary, served.trace["result"]
    source = _checked_source(r)
    with browser("labels-first-paint") as run:
        page = open_result(run, served)
        verdict_label = g["verdict." + r["verdict"]]["label"]
        expect(page.locator("#verdict .verdict-title")).to_have_text(verdict_label[0].upper() + verdict_label[1:])
        support = g["support." + source["support"]["verdict"]]["label"]
        words = page.locator(f'#tree li[data-source-id="{source["source_id"]}"] .verdict-words .words')
        expect(words).to_have_text(support)
        legend = page.locator(".chart-legend .legend-item .term")
        expect(legend).to_have_count(4)
        for k, role in enumerate(("grounds", "distractor", "irrelevant", "redundant")):
            expect(legend.nth(k).locator("[data-glossary-label]")).to_have_text(g["role." + role]["label"])
        estimator = r.get("estimator") or "judged"
        expect(page.locator("#result-estimator [data-glossary-label]")).to_have_text(
            g["estimator." + estimator]["label"]
        )
        assert run.errors == []


def test_without_the_glossary_values_show_their_own_names_until_it_arrives(served: Served) -> None:
    g, r = served.glossary, served.trace["result"]
    source = _checked_source(r)
    blocked = {"on": True, "asked": 0}

    def glossary(route: Route) -> None:
        blocked["asked"] += 1
        if blocked["on"]:
            route.abort()
        else:
            route.continue_()

    with browser("labels-late-glossary") as run:
        page = run.page
        page.route("**/v1/glossary", glossary)
        sign_in_as_admin(run, served.v, served.result_hash)
        expect(page.locator("#verdict")).to_have_attribute("data-verdict", r["verdict"])
        assert blocked["asked"] >= 1
        own_name = source["support"]["verdict"]
        words = page.locator(f'#tree li[data-source-id="{source["source_id"]}"] .verdict-words .words')
        expect(words).to_have_text(own_name)  # the value's own name: no second copy of the words
        assert g["support." + own_name]["label"] != own_name
        expect(page.locator("#verdict .verdict-title")).to_have_text(
            r["verdict_text"][0].upper() + r["verdict_text"][1:]  # the result's own words
        )
        blocked["on"] = False  # the page tries again by itself, then rewrites the labels in place
        expect(words).to_have_text(g["support." + own_name]["label"], timeout=30_000)
        verdict_label = g["verdict." + r["verdict"]]["label"]
        expect(page.locator("#verdict .verdict-title")).to_have_text(verdict_label[0].upper() + verdict_label[1:])
