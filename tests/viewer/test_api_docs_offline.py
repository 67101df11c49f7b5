"""The API's documentation pages work with no network: ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) reference
only this service's own URLs, every asset they reference is served from the package, the vendored files are the
ones VENDOR.md records, and in real Chromium, with every request off loopback aborted, both pages render the
operations with no console error and no request that tried to leave.

Screenshots: ``docs/api-docs-offline.png`` and ``docs/redoc-offline.png``, written when missing or when
PROVENANCE_UPDATE_SCREENSHOTS=1 (as the viewer's ``docs/result-view.png``)."""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Page, Route, expect
from support.api_server import ApiServer
from support.ui import REPO, BrowserRun, browser

from provenance_api.core.settings import Settings
from provenance_api.http.app import create_app

pytestmark = pytest.mark.timeout(180)

VENDOR = REPO / "provenance_api" / "http" / "static" / "vendor"
SWAGGER_SHOT = REPO / "docs" / "api-docs-offline.png"
REDOC_SHOT = REPO / "docs" / "redoc-offline.png"
PAGES = ("/docs", "/redoc")
EXTERNAL_URL = re.compile(r"(?:https?:)?//[A-Za-z0-9.-]+", re.IGNORECASE)
REFERENCE = re.compile(r"""(?:src|href|spec-url)\s*=\s*["']([^"']+)["']|url:\s*'([^']+)'""")
START_TRACE = "tag/traces/operation/start_trace_v1_traces_post"  # ReDoc's id of POST /v1/traces
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("data"), warm_up=False)
    with TestClient(create_app(settings)) as c:
        yield c


def references(html: str) -> list[str]:
    found = [a or b for a, b in REFERENCE.findall(html)]
    assert found, "the page references no asset at all"
    return found


@pytest.mark.parametrize("path", PAGES)
def test_page_has_no_external_url_and_every_asset_is_served(client: TestClient, path: str) -> None:
    page = client.get(path)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert EXTERNAL_URL.findall(html) == [], "the page names a URL off this service"
    refs = references(html)
    assert all(ref.startswith("/") and not ref.startswith("//") for ref in refs), refs
    for ref in refs:
        asset = client.get(ref)
        assert asset.status_code == 200, (ref, asset.status_code)
        assert asset.content, ref
    scripts = [r for r in refs if r.endswith(".js")]
    assert scripts, "no script: the page would render nothing"
    # the browser is told to load nothing from elsewhere
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "connect-src 'self'" in csp and "https:" not in csp and "*" not in csp


def test_swagger_inline_script_is_the_only_one_the_policy_allows(client: TestClient) -> None:
    page = client.get("/docs")
    inline = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
    assert len(inline) == 1
    digest = base64.b64encode(hashlib.sha256(inline[0].encode()).digest()).decode()
    script_src = next(p for p in page.headers["content-security-policy"].split(";") if "script-src" in p)
    assert script_src.split() == ["script-src", "'self'", f"'sha256-{digest}'"]


def test_assets_revalidate_and_unknown_ones_are_problems(client: TestClient) -> None:
    first = client.get("/docs/assets/redoc/redoc.standalone.js")
    assert first.headers["content-type"].startswith("text/javascript")
    again = client.get("/docs/assets/redoc/redoc.standalone.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    for wrong in ("/docs/assets/redoc/LICENSE", "/docs/assets/redoc/..%2F..%2Fapp.py", "/docs/assets/x/y.js"):
        missing = client.get(wrong)
        assert missing.status_code == 404, wrong
        assert missing.headers["content-type"].startswith("application/problem+json")
    assert client.get("/docs/oauth2-redirect").status_code == 404  # Bearer keys only, no OAuth2 flow


def test_vendored_files_are_the_recorded_ones() -> None:
    record = (VENDOR / "VENDOR.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([^`]+)` \| [\d,]+ \| `([0-9a-f]{64})` \|$", record, re.MULTILINE)
    shipped = sorted(str(p.relative_to(VENDOR)) for p in VENDOR.glob("*/*") if p.is_file())
    assert sorted(name for name, _ in rows) == shipped
    for name, digest in rows:
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name
    for package in ("swagger-ui-dist", "redoc"):
        assert (VENDOR / package / "LICENSE").stat().st_size > 500, package


# --------------------------------------------------------------------------- in Chromium, network blocked


def block_off_loopback(page: Page, base_url: str) -> tuple[list[str], list[str]]:
    """Abort every request whose host is not loopback; return (blocked, served) URL lists."""
    blocked: list[str] = []
    served: list[str] = []

    def handle(route: Route) -> None:
        url = route.request.url
        host = urlsplit(url).hostname or ""
        if url.startswith(("data:", "blob:")) or host in LOOPBACK:
            served.append(url)
            route.continue_()
        else:
            blocked.append(url)
            route.abort("internetdisconnected")

    page.route("**/*", handle)
    assert urlsplit(base_url).hostname in LOOPBACK
    return blocked, served


def save_screenshot(page: Page, target: Path) -> None:
    if target.exists() and os.environ.get("PROVENANCE_UPDATE_SCREENSHOTS") != "1":
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target))


def check_clean(run: BrowserRun, blocked: list[str]) -> None:
    assert blocked == [], f"the page tried to leave loopback: {blocked}"
    assert run.errors == [], run.errors


def test_swagger_ui_renders_offline_in_chromium(tmp_path: Path) -> None:
    with ApiServer(tmp_path / "data", warm_up=False) as srv, browser("api-docs") as run:
        page = run.page
        blocked, served = block_off_loopback(page, srv.base_url)
        page.goto(srv.base_url + "/docs")
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("Response-provenance service")
        operation = page.locator(".opblock.opblock-post").filter(has=page.locator('[data-path="/v1/traces"]'))
        expect(operation).to_have_count(1)
        expect(operation.locator(".opblock-summary-method")).to_have_text("POST")
        expect(page.locator(".opblock")).not_to_have_count(0)
        operation.locator(".opblock-summary-control").click()  # expands: its parameters and responses render
        expect(operation.locator(".responses-wrapper")).to_be_visible()
        operation.locator(".opblock-summary-control").click()
        page.wait_for_load_state("networkidle")
        page.evaluate("window.scrollTo(0, 0)")  # the picture: title, then the operations by tag
        run.shot("swagger")
        save_screenshot(page, SWAGGER_SHOT)
        assert any(urljoin(srv.base_url, "/docs/assets/") in url for url in served)
        check_clean(run, blocked)


def test_redoc_renders_offline_in_chromium(tmp_path: Path) -> None:
    with ApiServer(tmp_path / "data", warm_up=False) as srv, browser("redoc") as run:
        page = run.page
        blocked, served = block_off_loopback(page, srv.base_url)
        page.goto(srv.base_url + "/redoc")
        expect(page.locator("h1").first).to_contain_text("Response-provenance service")
        # POST /v1/traces: its entry in the side menu (under its tag) and its section in the body
        page.get_by_role("menuitem", name="traces", exact=True).click()
        entry = page.locator(f'[role="menuitem"][data-item-id="{START_TRACE}"]')
        expect(entry).to_be_visible()
        expect(entry).to_contain_text("Start a trace")
        entry.click()
        section = page.locator(f'[data-section-id="{START_TRACE}"]')
        expect(section.locator("h2")).to_have_text("Start a trace")
        expect(section.get_by_text("/v1/traces", exact=True).first).to_be_attached()
        # the search box works (its index runs in a web worker built from a blob: URL)
        page.get_by_placeholder("Search...").fill("quote")
        expect(page.locator('[data-role="search:results"] li').first).to_be_visible()
        page.get_by_placeholder("Search...").fill("")
        page.wait_for_load_state("networkidle")
        run.shot("redoc")
        save_screenshot(page, REDOC_SHOT)
        assert any(urljoin(srv.base_url, "/docs/assets/redoc/") in url for url in served)
        check_clean(run, blocked)
