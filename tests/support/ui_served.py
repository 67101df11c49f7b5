"""The service the viewer's trust tests share (tests/viewer/test_ui_trust.py, tests/viewer/test_ui_access.py):
one server per test module with the EO fixture turn, three small turns to filter, one finished trace and
the glossary."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from support.api_server import small_turn
from support.ui import FIXTURES, BrowserRun, SourceKeyedJudge, Viewer, load_json, run_trace, sign_in_as_admin, viewer

EO_TURN = load_json(FIXTURES / "eo_worldview_turn.json")
EO_KEY = "Land Cover Type (MCD12Q1) Version 6.1"  # only the search_worldview_layers return (s0) says it
LIST_TURNS = [
    small_turn("list-a", model="openai/gpt-4o", agent="billing bot", created_at="2025-01-10T10:00:00Z"),
    small_turn("list-b", model="openai/gpt-4o", agent="support bot", created_at="2025-02-10T10:00:00Z"),
    small_turn(
        "list-c",
        model="anthropic/claude-x",
        agent="billing bot",
        created_at="2025-01-20T10:00:00Z",
        response="Hello! How can I help you today?",
    ),
]


@dataclass
class Served:
    v: Viewer
    trace: dict[str, Any]  # the EO turn's first trace (every call sent), as GET /v1/traces/{id}
    glossary: dict[str, dict[str, str]]

    @property
    def result_hash(self) -> str:
        return f"#/turn/{EO_TURN['turn_id']}/trace/{self.trace['trace_id']}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with viewer(tmp_path_factory.mktemp("trust") / "data", SourceKeyedJudge([EO_KEY])) as v:
        for turn in (EO_TURN, *LIST_TURNS):
            v.store(turn)
        trace = run_trace(v, EO_TURN["turn_id"], "r1")
        glossary = v.api.get("/v1/glossary")
        assert glossary.status_code == 200, "GET /v1/glossary is missing: the explanations come from it"
        yield Served(v, trace, {t["key"]: t for t in glossary.json()["terms"]})


def open_result(run: BrowserRun, s: Served) -> Page:
    sign_in_as_admin(run, s.v, s.result_hash)
    page = run.page
    expect(page.locator("#verdict")).to_have_attribute("data-verdict", "attributed")
    return page


def check_explained(page: Page, scope: str, key: str, term: dict[str, str]) -> None:
    """The term's one line shown in place, its detail one click away."""
    box = page.locator(f'{scope} details.explain[data-term="{key}"]').first
    expect(box.locator(".short")).to_have_text(term["short"])
    expect(box.locator(".detail")).to_be_hidden()
    box.locator("summary").click()
    expect(box.locator(".detail")).to_have_text(term["detail"])


def turn_ids(v: Viewer, **params: str) -> tuple[list[str], int]:
    body = v.api.get("/v1/turns", params={"limit": 25, **params}).json()
    return [t["turn_id"] for t in body["items"]], body["total"]
