"""The viewer's link check, in real headless Chromium against the service on loopback (the other small holes:
tests/service/test_small_holes.py).

A link in a response is kept only if the browser itself would take it to this origin, or it names http, https
or mailto; the check parses the destination as the browser does (``new URL``), so a backslash that WHATWG
parsing reads as a slash cannot turn a "relative path" into another host."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect
from support.api_server import small_turn
from support.ui import SourceKeyedJudge, browser, sign_in_as_admin, viewer

pytestmark = pytest.mark.timeout(240)

REFUSED = [
    "/\\evil.example",
    "/\\/evil.example/x",
    "\\\\evil.example",
    "/\\\\evil.example",
    "\\/evil.example",
    "//evil.example",
    " //evil.example",
    "/\t/evil.example",
    "javascript:alert(1)",
    "java\tscript:alert(1)",
    "JAVASCRIPT:alert(1)",
    "data:text/html,<b>x</b>",
    "vbscript:x",
    "",
]
KEPT = {
    "https://example.org/track?id=1": "https://example.org/track?id=1",
    "HTTP://example.org/": "http://example.org/",
    "mailto:help@example.org": "mailto:help@example.org",
    "#/turn/t-1": "#/turn/t-1",
}
LINKED = """Hostile [one](/\\evil.example) and [two](/\\\\evil.example) and [three](//evil.example).
A [good one](https://example.org/track) and [a page here](/docs).
"""

SAFE_HREFS = """async (hrefs) => {
  const { safeHref } = await import('/static/js/md-inline.js');
  return hrefs.map((href) => safeHref(href));
}"""


def test_a_backslash_link_cannot_pass_the_viewers_link_check_as_a_local_path(tmp_path: Path) -> None:
    """The finding: ``[x](/\\evil.example)`` passed the check as a same-origin path ("/" not followed by "/"),
    while the browser reads the backslash as a slash and goes to https://evil.example."""
    with viewer(tmp_path, SourceKeyedJudge(keys=[])) as v, browser("small-holes-links") as run:
        v.store(small_turn("t-links", response=LINKED))
        sign_in_as_admin(run, v)
        page = run.page
        origin = page.evaluate("location.origin")
        refused = page.evaluate(SAFE_HREFS, REFUSED)
        assert refused == [None] * len(REFUSED), dict(zip(REFUSED, refused, strict=True))
        kept = page.evaluate(SAFE_HREFS, [*KEPT, "/docs", "docs?x=1", "http:docs"])
        assert kept == [*KEPT.values(), origin + "/docs", origin + "/docs?x=1", origin + "/docs"], kept
        # what the browser makes of every kept destination is this origin, or the one the link names
        resolved = page.evaluate("(hrefs) => hrefs.map((h) => new URL(h, location.origin).host)", kept[:2])
        assert resolved == ["example.org", "example.org"]

        page.goto(f"{v.base_url}/#/turn/t-links")
        response = page.locator("#response")
        expect(response.locator("a")).to_have_count(2)  # the three hostile links are text only
        hrefs = response.locator("a").evaluate_all("(links) => links.map((a) => a.href)")
        assert hrefs == ["https://example.org/track", origin + "/docs"], hrefs
        expect(response).to_contain_text("Hostile one and two and three.")
        assert run.errors == []
