"""Support for the viewer's browser tests: the service with a scripted judge behind the real litellm
adapter, headless Chromium driven by Playwright, and screenshots.

The judge is an OpenAI-compatible server on loopback (``FakeOpenAI``) answering from
``SourceKeyedJudge``; the service reaches it through its default ``LiteLLMClient`` (settings
``judge_api_base``/``judge_api_key``), exactly as it would reach a provider.

Chromium is the distribution's package (``/usr/bin/chromium``, or ``PROVENANCE_CHROMIUM``); no
browser is downloaded. Each browser starts with a fresh, temporary profile.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, FloatRect, Locator, Page, expect, sync_playwright

from estimator.fence import split_fenced
from provenance_api.providers.llm_litellm import load_litellm
from support.api_server import TEST_MODELS, ApiServer
from support.fake_openai import FakeOpenAI, FakeReply

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
ARTIFACTS = REPO / "test-artifacts" / "ui"
DOCS = REPO / "docs"
DOCS_SCREENSHOT = DOCS / "result-view.png"
AXE = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"  # axe-core 4.14.1, VENDOR.md
TAU_BENCH = Path(__file__).resolve().parents[2] / "tests/data/tau-bench/airline-gpt-4o-dev.json"
CHROMIUM = Path(os.environ.get("PROVENANCE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
JUDGE_KEY = "test-judge-key"
JUDGE_SYSTEM_MARK = "strict judge of support"
SUPPORT_HEADINGS = ("\n\nSOURCE:\n", "\n\nAGENT INSTRUCTIONS:\n")


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def require_chromium() -> Path:
    if not CHROMIUM.is_file():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: install the Debian package 'chromium' "
            "(scripts/system-deps.sh does) or set PROVENANCE_CHROMIUM"
        )
    return CHROMIUM


def require_tau_bench() -> list[dict[str, Any]]:
    if not TAU_BENCH.is_file():
        pytest.fail(f"τ-bench data missing: expected {TAU_BENCH} (shipped in tests/data/tau-bench)")
    data: list[dict[str, Any]] = load_json(TAU_BENCH)
    return data


# --------------------------------------------------------------------------- the scripted judge


def _split(messages: Sequence[Any]) -> tuple[str, str]:
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    user = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
    return system, user


def _fenced(text: str) -> str:
    """The data of the last fenced region (the source's own text; the claim's region comes first), else ''."""
    regions = split_fenced(text)[0]
    return regions[-1] if regions else ""


def quote_around(text: str, at: int, length: int, margin: int = 40) -> str:
    """A verbatim span of ``text`` around ``text[at:at+length]``, within its line and cut at spaces
    (so no JSON escape is split): what a careful judge would copy."""
    line_start = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at + length)
    line_end = len(text) if line_end < 0 else line_end
    start = max(line_start, at - margin)
    if start > line_start:
        space = text.find(" ", start, at)
        start = space + 1 if space >= 0 else at
    end = min(line_end, at + length + margin)
    if end < line_end:
        space = text.rfind(" ", at + length, end)
        end = space if space >= 0 else at + length
    return text[start:end].strip()


@dataclass
class SourceKeyedJudge:
    """A forced-choice judge keyed on phrases: 9 when any key is among the sources shown, else 2; a span
    check answers "supported" quoting the text around the key when the source holds it, else
    "silent". Keys are matched case-insensitively, in the sources only (never in the claim)."""

    keys: Sequence[str]
    delay: float = 0.0
    calls: list[str] = field(default_factory=list)
    failing: bool = False  # answer every call with a provider error (400)

    def _find(self, text: str) -> tuple[int, int] | None:
        """The key's last occurrence: a source's text comes after its header (the tool call that produced
        it, whose arguments often repeat the key), and only the text is evidence a quote can verify in."""
        lowered = text.casefold()
        for key in self.keys:
            at = lowered.rfind(key.casefold())
            if at >= 0:
                return at, len(key)
        return None

    def answer(self, request: dict[str, Any]) -> str:
        system, user = _split(list(request.get("messages") or []))
        if JUDGE_SYSTEM_MARK in system:
            self.calls.append("judge")
            sources = user.split("\nSOURCES:\n", 1)[1] if "\nSOURCES:\n" in user else ""
            return "9" if self._find(sources) else "2"
        self.calls.append("support")
        body = next((_fenced(user.split(h, 1)[1]) for h in SUPPORT_HEADINGS if h in user), "")
        found = self._find(body)
        if found is None:
            return json.dumps(
                {"verdict": "silent", "evidence_quote": "", "confidence": 0.77, "reason": "nothing on it"}
            )
        quote = quote_around(body, *found)
        return json.dumps(
            {"verdict": "supported", "evidence_quote": quote, "confidence": 0.86, "reason": "the source says so"}
        )

    def __call__(self, request: dict[str, Any]) -> FakeReply:
        if self.failing:
            return FakeReply.error(400, "the scripted provider refuses this request")
        return FakeReply(text=self.answer(request), delay=self.delay)


# --------------------------------------------------------------------------- the service


@dataclass
class Viewer:
    """The running service (judge behind FakeOpenAI) and an API client signed in as the admin."""

    server: ApiServer
    judge_server: FakeOpenAI
    judge: SourceKeyedJudge
    api: httpx.Client

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def admin_key(self) -> str:
        return self.server.admin_key

    def store(self, turn: dict[str, Any]) -> None:
        r = self.api.post("/v1/turns", json=turn)
        assert r.status_code in (200, 201), r.text


@contextmanager
def viewer(data_dir: Path, judge: SourceKeyedJudge, **settings: Any) -> Iterator[Viewer]:
    """The service in this process, its judge behind FakeOpenAI. litellm (seconds to import) is
    loaded first, so the first quote a page asks for is as quick as the rest."""
    load_litellm()
    # the operator allows the EO fixture's own model (priced by litellm), beside the test servers' models
    settings.setdefault("allowed_models", [*TEST_MODELS, "openai/gpt-5.2"])
    with FakeOpenAI(judge) as fake:
        server = ApiServer(
            data_dir,
            judge_api_base=fake.base_url,
            judge_api_key=JUDGE_KEY,
            warm_up=False,
            **settings,
        )
        with server, server.client(server.admin_key) as api:
            yield Viewer(server=server, judge_server=fake, judge=judge, api=api)


# --------------------------------------------------------------------------- the browser


@dataclass
class BrowserRun:
    """One Chromium profile and its page, with every console error and page error collected."""

    context: BrowserContext
    page: Page
    prefix: str
    errors: list[str] = field(default_factory=list)
    shots: list[Path] = field(default_factory=list)

    def shot(self, name: str, *, full_page: bool = False) -> Path:
        """A screenshot of the page as test-artifacts/ui/<prefix>-<step>-<name>.png."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.prefix}-{len(self.shots) + 1:02d}-{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        self.shots.append(path)
        return path


@contextmanager
def browser(prefix: str, width: int = 1280, height: int = 900, color_scheme: str = "light") -> Iterator[BrowserRun]:
    executable = require_chromium()
    for old in ARTIFACTS.glob(f"{prefix}-*.png"):
        old.unlink()
    profile = tempfile.mkdtemp(prefix="provenance-ui-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=str(executable),
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": width, "height": height},
                color_scheme="dark" if color_scheme == "dark" else "light",
                accept_downloads=True,
                locale="en-US",
                timezone_id="UTC",
            )
            try:
                page = context.pages[0] if context.pages else context.new_page()
                run = BrowserRun(context=context, page=page, prefix=prefix)

                def on_console(message: ConsoleMessage) -> None:
                    if message.type == "error":
                        run.errors.append(f"console: {message.text} @ {message.location}")

                page.on("console", on_console)
                page.on("pageerror", lambda exc: run.errors.append(f"page error: {exc}"))
                page.set_default_timeout(15_000)
                expect.set_options(timeout=15_000)
                yield run
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


# --------------------------------------------------------------------------- pictures for docs/, accessibility


def updating_docs(path: Path) -> bool:
    """Whether to (re)write a picture under docs/: when it is missing, or PROVENANCE_UPDATE_SCREENSHOTS=1."""
    return not path.exists() or os.environ.get("PROVENANCE_UPDATE_SCREENSHOTS") == "1"


def save_docs_picture(page: Page, name: str, target: Locator, max_height: float = 1150) -> Path:
    """A picture of ``target`` (its top ``max_height`` px) as docs/<name>, written by the update policy."""
    path = DOCS / name
    if not updating_docs(path):
        return path
    target.scroll_into_view_if_needed()
    box = target.bounding_box()
    assert box is not None, f"{name}: nothing to picture"
    top = box["y"] + float(page.evaluate("window.scrollY"))
    clip: FloatRect = {"x": box["x"], "y": top, "width": box["width"], "height": min(box["height"], max_height)}
    DOCS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), clip=clip, full_page=True)
    return path


def axe_source() -> str:
    """The vendored axe-core, checked against the sha256 recorded in its VENDOR.md."""
    if not AXE.is_file():
        pytest.fail(f"axe-core missing: expected {AXE} (vendored from the npm registry, see VENDOR.md there)")
    data = AXE.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    assert digest == AXE_SHA256, f"{AXE} changed: sha256 {digest}, VENDOR.md records {AXE_SHA256}"
    return data.decode("utf-8")


SERIOUS = ("serious", "critical")


def axe_violations(page: Page, include: str | None = None) -> list[dict[str, Any]]:
    """axe-core's violations of impact serious or critical on the page (or within ``include``), each as
    {id, impact, help, targets}. axe is evaluated through the DevTools protocol, so the page's
    Content-Security-Policy stays as it is."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(axe_source())
    found: list[dict[str, Any]] = page.evaluate(
        """async (include) => {
          const context = include ? { include: [include] } : document;
          const result = await window.axe.run(context, { resultTypes: ['violations'] });
          return result.violations.map(v => ({ id: v.id, impact: v.impact, help: v.help,
            targets: v.nodes.slice(0, 6)
              .map(n => n.target.join(' ') + ' :: ' + (n.failureSummary || '').slice(0, 300)) }));
        }""",
        include,
    )
    return [v for v in found if v["impact"] in SERIOUS]


# --------------------------------------------------------------------------- steps the viewer tests share


def sign_in_as_admin(run: BrowserRun, v: Viewer, hash_route: str = "") -> None:
    """Sign in on the page (the key typed once), then open ``hash_route`` when given."""
    page = run.page
    page.goto(v.base_url + "/" + hash_route)
    page.get_by_label("API key").fill(v.admin_key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#who-name")).to_contain_text("admin")
    expect(page.locator("#signin-key")).to_have_count(0)  # the route's view replaced the form


def run_trace(v: Viewer, turn_id: str, sentence: str | None = None, *, action: str | None = None) -> dict[str, Any]:
    """A trace of a sentence (or, with ``action``, of an action) run through the API to its end; its TraceOut."""
    target: dict[str, Any] = {"target": {"action": action}} if action is not None else {"sentence": sentence}
    quote = v.api.post("/v1/quotes", json={"turn_id": turn_id, **target})
    assert quote.status_code == 201, quote.text
    started = v.api.post("/v1/traces", json={"quote_id": quote.json()["quote_id"]})
    assert started.status_code == 202, started.text
    done: dict[str, Any] = v.api.get(f"/v1/traces/{started.json()['trace_id']}", params={"wait": "true"}).json()
    assert done["status"] == "succeeded", done
    return done


OUTSIDE_VIEWPORT = """() => {
  // elements of the view whose box leaves the viewport sideways, unless inside a box that scrolls sideways
  const width = document.documentElement.clientWidth;
  const scrolls = (el) => { for (let p = el.parentElement; p; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll') return true; } return false; };
  const out = [];
  for (const el of document.querySelectorAll('#view *, header *, dialog[open] *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || getComputedStyle(el).visibility === 'hidden') continue;
    if (el.closest('.visually-hidden')) continue;
    if ((r.left < -0.5 || r.right > width + 0.5) && !scrolls(el)) {
      out.push(el.tagName + '.' + el.className + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
    }
  }
  return out.slice(0, 10);
}"""
