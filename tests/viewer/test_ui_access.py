"""The viewer for everyone, in real headless Chromium against the service on loopback (issue 16): dark mode
following the system, keyboard shortcuts listed by "?", a 390 px layout where nothing is clipped (the drop
chart shows both halves), "Sign out" only while signed in, and axe-core finding nothing serious or critical
on any screen, light or dark. No step may log a console error. Pictures land in docs/."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect
from support.ui import OUTSIDE_VIEWPORT, axe_violations, browser, save_docs_picture, sign_in_as_admin
from support.ui_served import EO_TURN, Served, served, turn_ids

pytestmark = pytest.mark.timeout(240)
__all__ = ["served"]  # the module's fixture


# --------------------------------------------------------------------------- 7. dark mode, shortcuts, 390 px


def test_dark_mode_follows_the_system_and_shortcuts_work_from_the_keyboard(served: Served) -> None:
    v = served.v
    with browser("trust-dark", color_scheme="dark") as run:
        page = run.page
        page.goto(v.base_url + "/")
        expect(page.get_by_label("API key")).to_be_visible()
        expect(page.locator("#sign-out")).to_be_hidden()  # signed out: no "Sign out"
        colours = page.evaluate(
            "() => [getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color]"
        )
        assert colours == ["rgb(13, 17, 23)", "rgb(230, 237, 243)"], colours
        sign_in_as_admin(run, v)
        expect(page.locator("#sign-out")).to_be_visible()
        expect(page.locator("#turn-count")).to_have_text(f"{turn_ids(v)[1]} turns")

        page.keyboard.press("?")
        help_dialog = page.locator("#shortcuts-help")
        expect(help_dialog).to_be_visible()
        expect(help_dialog.locator("tbody tr")).to_have_count(9)
        expect(help_dialog).to_contain_text("Go to the traces")
        run.shot("shortcuts")
        page.keyboard.press("Escape")
        expect(help_dialog).to_be_hidden()

        page.keyboard.press("/")
        expect(page.locator("#search")).to_be_focused()
        page.keyboard.type("jk")  # typed into the field, not taken as shortcuts
        expect(page.locator("#search")).to_have_value("jk")
        expect(page.locator("#search")).to_be_focused()
        page.locator("#search").fill("")
        page.locator("#turns-title").focus()
        expect(page).not_to_have_url(re.compile(r"q="))
        expect(page.locator("#turn-count")).to_have_text(f"{turn_ids(v)[1]} turns")
        links = page.locator(".turn-link")
        page.keyboard.press("j")
        expect(links.nth(0)).to_be_focused()
        page.keyboard.press("j")
        expect(links.nth(1)).to_be_focused()
        page.keyboard.press("k")
        expect(links.nth(0)).to_be_focused()
        first = links.nth(0).get_attribute("data-turn-id") or ""
        page.keyboard.press("Enter")
        expect(page).to_have_url(re.compile(re.escape("#/turn/" + first)))
        page.keyboard.press("g")
        page.keyboard.press("r")
        expect(page.locator("#traces-title")).to_be_visible()
        page.keyboard.press("g")
        page.keyboard.press("t")
        expect(page.locator("#turns-title")).to_be_visible()

        page.goto(v.base_url + "/" + served.result_hash)
        expect(page.locator("#verdict")).to_be_visible()
        page.keyboard.press("c")
        expect(page.locator("#calls-panel")).to_be_visible()
        page.keyboard.press("Escape")
        expect(page.locator("#calls-panel")).to_be_hidden()
        page.evaluate("document.activeElement.blur()")
        run.shot("dark-result", full_page=True)
        save_docs_picture(page, "result-view-dark.png", page.locator("#result-panel"))
        assert run.errors == []


def test_at_390_px_nothing_is_clipped_and_the_chart_shows_both_halves(served: Served) -> None:
    v = served.v
    with browser("trust-390", width=390, height=844) as run:
        page = run.page
        page.goto(v.base_url + "/")
        expect(page.get_by_label("API key")).to_be_visible()
        assert page.locator("#sign-out").bounding_box() is None
        sign_in_as_admin(run, v)
        expect(page.locator(".turn-link").first).to_be_visible()
        assert page.evaluate(OUTSIDE_VIEWPORT) == []
        page.goto(v.base_url + "/" + served.result_hash)
        expect(page.locator("#verdict")).to_be_visible()
        expect(page.locator('.quote-box[data-evidence="json"]')).to_have_count(1)
        assert page.evaluate(OUTSIDE_VIEWPORT) == []
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")

        tracks = page.locator("#drops-chart .chart-track")
        expect(tracks.first).to_be_visible()
        for k in range(tracks.count()):
            track = tracks.nth(k).bounding_box()
            zero = tracks.nth(k).locator(".chart-zero").bounding_box()
            assert track and zero and track["x"] >= 0 and track["x"] + track["width"] <= 390
            assert track["x"] + 40 < zero["x"] < track["x"] + track["width"] - 40  # both halves shown
        grounds = page.locator("#drops-chart .bar.role-grounds")
        expect(grounds).to_have_count(2)
        for k in range(2):
            box = grounds.nth(k).bounding_box()
            assert box and box["width"] > 40 and box["x"] >= 0 and box["x"] + box["width"] <= 390
        run.shot("result-390", full_page=True)
        save_docs_picture(page, "result-view-390.png", page.locator("#result-panel"), max_height=1600)

        page.locator("#open-calls").click()
        expect(page.locator("#calls-panel #call-list .call").first).to_be_visible()
        page.locator("#calls-panel .call summary").first.click()
        assert page.evaluate(OUTSIDE_VIEWPORT) == []
        page.keyboard.press("Escape")
        page.goto(v.base_url + "/#/traces")
        expect(page.locator(".trace-link").first).to_be_visible()
        assert page.evaluate(OUTSIDE_VIEWPORT) == []
        page.locator("#sign-out").click()
        expect(page.get_by_label("API key")).to_be_visible()
        expect(page.locator("#sign-out")).to_be_hidden()
        assert run.errors == []


# --------------------------------------------------------------------------- 8. accessibility (axe-core)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_serious_on_any_screen(served: Served, scheme: str) -> None:
    v = served.v
    found: dict[str, list[dict[str, Any]]] = {}
    with browser(f"trust-axe-{scheme}", color_scheme=scheme) as run:
        page = run.page
        sign_in_as_admin(run, v)
        expect(page.locator(".turn-link").first).to_be_visible()
        found["turn list"] = axe_violations(page)
        page.goto(v.base_url + f"/#/turn/{EO_TURN['turn_id']}")
        expect(page.locator("#past-traces li").first).to_be_visible()
        found["turn view"] = axe_violations(page)
        page.locator('#response .seg-traceable[data-seg="r2"]').first.click()
        expect(page.locator("#gate-accept")).to_be_enabled()
        found["cost gate"] = axe_violations(page)
        page.keyboard.press("Escape")
        page.goto(v.base_url + "/" + served.result_hash)
        expect(page.locator('.quote-box[data-evidence="json"]')).to_have_count(1)
        page.locator("#result-panel details.explain").first.locator("summary").click()
        page.locator("#result-panel .term-toggle").first.click()
        found["result"] = axe_violations(page)
        page.locator("#open-calls").click()
        expect(page.locator("#call-list .call").first).to_be_visible()
        page.locator("#call-list .call summary").first.click()
        found["model calls"] = axe_violations(page)
        page.keyboard.press("Escape")
        page.locator(".quote-button").first.click()
        expect(page.locator("#source-lines mark")).to_have_count(1)
        found["source viewer"] = axe_violations(page)
        page.keyboard.press("Escape")
        page.goto(v.base_url + "/#/traces")
        expect(page.locator(".trace-link").first).to_be_visible()
        found["trace list"] = axe_violations(page)
        page.keyboard.press("?")
        expect(page.locator("#shortcuts-help")).to_be_visible()
        found["shortcuts"] = axe_violations(page)
        assert {k: x for k, x in found.items() if x} == {}, json.dumps(found, indent=1)
        assert run.errors == []
