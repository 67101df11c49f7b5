"""The viewer's cost gate pre-fills the judge model the service will actually run, and offers only allowed models.

Reported: on default settings (no allow-list) every click on a sentence opened a gate pre-filled with the turn's own
model, which the default policy refuses when a request names it (422), so no gate could be accepted. Now the gate
asks for its first quote without naming a model, pre-fills the model the service chose (the turn's own when the
operator allows it, else the default), says why, and offers only the models ``GET /ui/session`` lists as allowed.

Two services: the default policy (no ``PROVENANCE_ALLOWED_MODELS``, no operator prices; the EO turn's own model
``openai/gpt-5.2`` is not allowed, the default ``openai/gpt-4o-mini`` runs), where the gate is accepted and the
trace runs to its verdict; and an allow-list with the turn's own model on it, which is then the one pre-filled.
"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect
from support.ui import FIXTURES, BrowserRun, SourceKeyedJudge, browser, load_json, sign_in_as_admin, viewer

EO_TURN = load_json(FIXTURES / "eo_worldview_turn.json")
EO_KEY = "Land Cover Type (MCD12Q1) Version 6.1"  # only the search_worldview_layers return (s0) says it
TURN_MODEL = EO_TURN["model"]
DEFAULT_MODEL = "openai/gpt-4o-mini"  # the service's default judge when PROVENANCE_DEFAULT_MODEL is unset


def offered(page: Page) -> list[str]:
    values: list[str] = page.locator("#gate-models option").evaluate_all("els => els.map(e => e.value)")
    return values


def open_gate(run: BrowserRun) -> Page:
    page = run.page
    expect(page.locator("#response .seg-traceable").first).to_be_visible()
    page.locator('#response .seg-traceable[data-seg="r1"]').first.click()
    expect(page.locator("#gate")).to_be_visible()
    expect(page.locator("#gate-calls")).not_to_be_empty()
    return page


def test_on_default_settings_the_gate_prefills_the_default_judge_and_can_be_accepted(tmp_path: Path) -> None:
    with viewer(tmp_path / "data", SourceKeyedJudge([EO_KEY]), allowed_models=[], model_prices={}) as v:
        v.store(EO_TURN)
        session = v.api.get("/ui/session").json()
        assert session["allowed_models"] == [DEFAULT_MODEL]  # the default policy: the default alone
        named = v.api.post("/v1/quotes", json={"turn_id": EO_TURN["turn_id"], "sentence": "r1", "model": TURN_MODEL})
        assert named.status_code == 422 and named.json()["field"] == "model"  # what the old pre-fill asked for
        with browser("gate-model-default") as run:
            sign_in_as_admin(run, v, f"#/turn/{EO_TURN['turn_id']}")
            page = open_gate(run)
            expect(page.locator("#gate-model")).to_have_value(DEFAULT_MODEL)
            expect(page.locator("#gate-judge")).to_have_text(DEFAULT_MODEL)
            expect(page.locator("#gate-model-hint")).to_contain_text("is not on this service's allow-list")
            assert offered(page) == session["allowed_models"]
            expect(page.locator("#gate-error")).to_be_empty()
            expect(page.locator("#gate-refused")).to_have_count(0)
            accept = page.locator("#gate-accept")
            expect(accept).to_be_enabled()
            run.shot("gate")
            accept.click()
            expect(page.locator("#gate")).to_be_hidden()
            expect(page.locator("#verdict")).to_have_attribute("data-verdict", "attributed", timeout=60_000)
            run.shot("result")
            assert run.errors == [], run.errors
        traces = v.api.get("/v1/traces", params={"turn_id": EO_TURN["turn_id"]}).json()["items"]
        assert [(t["model"], t["status"]) for t in traces] == [(DEFAULT_MODEL, "succeeded")]


def test_with_the_turns_model_allowed_the_gate_prefills_it_and_offers_the_allowed_models(tmp_path: Path) -> None:
    allowed = ["openai/gpt-4o", TURN_MODEL]
    with viewer(tmp_path / "data", SourceKeyedJudge([EO_KEY]), allowed_models=allowed) as v:
        v.store(EO_TURN)
        with browser("gate-model-allowed") as run:
            sign_in_as_admin(run, v, f"#/turn/{EO_TURN['turn_id']}")
            page = open_gate(run)
            expect(page.locator("#gate-model")).to_have_value(TURN_MODEL)
            expect(page.locator("#gate-model-hint")).to_contain_text("the turn's own model, on the allow-list")
            assert offered(page) == [TURN_MODEL, DEFAULT_MODEL, "openai/gpt-4o"]  # the turn's own first
            expect(page.locator("#gate-accept")).to_be_enabled()
            assert run.errors == [], run.errors
