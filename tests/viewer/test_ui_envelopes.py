"""Where each source came from, in the viewer (real headless Chromium against the service on loopback): under every
source of the turn and of a trace result, its evidence envelope — the recorded fields, "not recorded" for the rest,
its age when the answer or the action was produced, its custody (verified by the gateway, with the record's server
and time, or as the agent's history reports it); on each action when it was made and its freshness findings; and
"Export incident" on an action and on a traced sentence.

The turn is ``support.custody_turns.payment_turn``, stored as pydantic-ai stores it: ``get_balance`` observed at
09:00:00 for alice on server bank, then ``send_money`` at 09:00:45, the answer at 09:00:50; the send_money return
carries no time; nothing names a tenant, a scope or a resource. The gateway recorded the balance result (a record
put in the store), and the operator's rule wants a balance no older than 30 s for a payment: a breach (45 s)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect
from support.custody_turns import payment_turn
from support.evidence_store import put_evidence
from support.ui import (
    BrowserRun,
    SourceKeyedJudge,
    Viewer,
    axe_violations,
    browser,
    run_trace,
    sign_in_as_admin,
    viewer,
)

from provenance_api.core.evidence import EvidenceRecord, text_digest

pytestmark = pytest.mark.timeout(240)

TURN = payment_turn().model_dump(mode="json")
TURN_ID = TURN["turn_id"]
BALANCE = "Balance: 1,200.00 EUR"  # the get_balance return (s0), as the gateway relayed it
RELAYED_AT = datetime(2026, 3, 2, 9, 0, 1, tzinfo=UTC)
RULES = """
[[rules]]
action_tool = "send_money"
evidence_tool = "get_balance"
max_age_seconds = 30
"""


@dataclass
class CauseJudge(SourceKeyedJudge):
    """SourceKeyedJudge, which also rates an action (the judge "of cause") by its keys among the sources."""

    def answer(self, request: dict[str, Any]) -> str:
        messages = list(request.get("messages") or [])
        system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        if "strict judge of cause" not in system:
            return super().answer(request)
        self.calls.append("judge")
        user = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
        sources = user.split("\nSOURCES:\n", 1)[1] if "\nSOURCES:\n" in user else ""
        return "9" if self._find(sources) else "2"


@dataclass
class Served:
    v: Viewer
    segments: dict[str, Any]  # GET /v1/turns/pay/segments
    actions: dict[str, Any]  # GET /v1/turns/pay/actions
    sentence_trace: dict[str, Any]  # a finished trace of r0
    action_trace: dict[str, Any]  # a finished trace of a1
    glossary: dict[str, dict[str, Any]]

    def label(self, key: str, *, capital: bool = False) -> str:
        text: str = self.glossary[key]["label"]
        return text[:1].upper() + text[1:] if capital else text

    def source(self, source_id: str) -> dict[str, Any]:
        return next(s for s in self.segments["sources"] if s["id"] == source_id)


def _record_the_balance(v: Viewer) -> None:
    """What ``provenance gateway`` would have written when it relayed the balance: a record bound by digest."""
    record = EvidenceRecord(
        tenant=v.server.settings.admin_tenant,
        principal="gateway@bank",
        server="bank-mcp",
        transport="stdio",
        tool="get_balance",
        digest=text_digest(BALANCE),
        observed_at=RELAYED_AT,
    )

    put_evidence(v.server.settings.effective_database_url, record)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("envelopes")
    rules = root / "rules.toml"
    rules.write_text(RULES, encoding="utf-8")
    with viewer(root / "data", CauseJudge(keys=("sent", "Balance")), freshness_rules=rules) as v:
        _record_the_balance(v)
        v.store(TURN)
        segments = v.api.get(f"/v1/turns/{TURN_ID}/segments").json()
        actions = v.api.get(f"/v1/turns/{TURN_ID}/actions").json()
        glossary = {t["key"]: t for t in v.api.get("/v1/glossary").json()["terms"]}
        yield Served(v, segments, actions, run_trace(v, TURN_ID, "r0"), run_trace(v, TURN_ID, action="a1"), glossary)


def open_page(run: BrowserRun, s: Served, route: str = f"#/turn/{TURN_ID}") -> Page:
    sign_in_as_admin(run, s.v, route)
    page = run.page
    expect(page.locator("#response")).to_be_visible()
    return page


def field(block: Locator, name: str) -> Locator:
    return block.locator(f'dd[data-field="{name}"]')


# --------------------------------------------------------------------------- the turn's sources


def test_each_source_shows_its_envelope_recorded_fields_not_recorded_age_and_custody(served: Served) -> None:
    s0, s1 = served.source("s0"), served.source("s1")
    # what the page must show: s0 bound to the gateway's record, aged 50 s; s1 with no time, as the history says
    assert (s0["custody"], s0["custody_server"], s0["age"]) == ("gateway", "bank-mcp", "50 s")
    assert (s1["custody"], s1["envelope"]["observed_at"], s1["age_seconds"]) == ("history", None, None)
    not_recorded = served.label("not_recorded")
    with browser("envelopes-sources") as run:
        page = open_page(run, served)
        block = page.locator('#sources li[data-source-id="s0"] details.envelope')
        expect(block).to_have_count(1)
        # collapsed: the summary says the tool, the age and the custody; the fields wait behind it
        summary = block.locator("summary")
        expect(summary).to_contain_text(served.label("envelope", capital=True))
        expect(summary.locator(".env-tool")).to_have_text("get_balance")
        expect(summary.locator(".env-age")).to_have_text("50 s old")
        expect(summary.locator(".custody-badge")).to_have_text(served.label("custody.gateway"))
        expect(block.locator("dl.env-fields")).to_be_hidden()
        # open by keyboard
        summary.focus()
        page.keyboard.press("Enter")
        expect(block.locator("dl.env-fields")).to_be_visible()
        expect(block.locator('dt[data-field="principal"]')).to_have_text(
            served.label("envelope.principal", capital=True)
        )
        expect(field(block, "tool")).to_have_text("get_balance")
        expect(field(block, "server")).to_have_text("bank")
        expect(field(block, "principal")).to_have_text("alice")
        for missing in ("resource", "tenant", "scope"):
            expect(field(block, missing)).to_have_text(not_recorded)
        expect(field(block, "observed_at").locator("time")).to_have_text("2026-03-02T09:00:00Z")
        expect(field(block, "observed_at")).to_contain_text("50 s old when the answer was produced")
        expect(field(block, "transformations").locator("li")).to_have_text(s0["envelope"]["transformations"])
        expect(field(block, "derived_from")).to_have_text(served.label("envelope.none"))
        digest = s0["envelope"]["digest"]
        expect(field(block, "digest").locator("code")).to_have_text(digest[:12] + "…")
        expect(field(block, "digest").locator("code")).to_have_attribute("title", digest)
        custody = field(block, "custody")
        expect(custody.locator(".custody-badge")).to_have_text(served.label("custody.gateway"))
        expect(custody.locator(".custody-record")).to_have_text(" — bank-mcp, 2026-03-02T09:00:01Z")

        # the return the gateway never relayed: the history's custody, its time and age not recorded
        other = page.locator('#sources li[data-source-id="s1"] details.envelope')
        expect(other.locator("summary .custody-badge")).to_have_text(served.label("custody.history"))
        expect(other.locator("summary .env-age")).to_have_text(served.label("age") + " " + s1["age"])
        other.locator("summary").click()
        expect(field(other, "observed_at")).to_have_text(not_recorded)
        expect(field(other, "custody").locator(".custody-record")).to_have_count(0)
        run.shot("sources-envelopes", full_page=True)
        assert axe_violations(page, "#sources") == []
        assert run.errors == []


# --------------------------------------------------------------------------- actions: when made, freshness


def test_an_action_shows_when_it_was_made_and_the_freshness_breach_naming_rule_source_and_age(
    served: Served,
) -> None:
    a0, a1 = (next(a for a in served.actions["actions"] if a["id"] == i) for i in ("a0", "a1"))
    (breach,) = a1["freshness"]
    assert (breach["status"], breach["source_id"], a0["freshness"]) == ("breach", "s0", [])
    with browser("envelopes-actions") as run:
        page = open_page(run, served)
        card0, card1 = page.locator("#action-a0"), page.locator("#action-a1")
        expect(card1.locator(".produced-at")).to_contain_text(served.label("action.produced_at", capital=True))
        expect(card1.locator(".produced-at time")).to_have_text("2026-03-02T09:00:45Z")
        expect(card0.locator(".produced-at time")).to_have_text("2026-03-02T09:00:00Z")
        finding = card1.locator('.finding[data-status="breach"]')
        expect(finding).to_have_count(1)
        expect(finding.locator(".finding-status")).to_have_text(served.label("freshness.breach"))
        expect(finding.locator(".finding-rule")).to_have_text(breach["rule"])
        expect(finding.locator(".finding-source .src-ref")).to_have_text("s0 · get_balance()")
        expect(finding.locator(".finding-age")).to_have_text(" · 45 s old")
        expect(finding.locator(".finding-because")).to_have_text(breach["because"])
        # a call no rule is about: nothing judged, nothing said
        expect(card0.locator(".freshness")).to_have_count(0)
        run.shot("action-freshness", full_page=True)
        assert axe_violations(page, "#actions") == []
        assert run.errors == []


# --------------------------------------------------------------------------- trace results and incident export


def test_a_traced_sentence_shows_its_sources_envelopes_and_the_incident_export_link(served: Served) -> None:
    trace = served.sentence_trace
    assert trace["segment_id"] == "r0"
    with browser("envelopes-sentence-result") as run:
        page = open_page(run, served, f"#/turn/{TURN_ID}/trace/{trace['trace_id']}")
        expect(page.locator("#verdict")).to_be_visible()
        link = page.locator("#result-incident")
        expect(link).to_have_attribute("href", f"/v1/turns/{TURN_ID}/incident?target=r0&format=markdown")
        expect(link).to_contain_text(served.label("incident.export", capital=True))
        block = page.locator('#tree li.src-node[data-source-id="s0"] details.envelope')
        expect(block.locator("summary .custody-badge")).to_have_text(served.label("custody.gateway"))
        expect(block.locator("summary .env-age")).to_have_text("50 s old")
        block.locator("summary").click()
        expect(field(block, "principal")).to_have_text("alice")
        expect(field(block, "tenant")).to_have_text(served.label("not_recorded"))
        # a sentence's result judges no freshness
        expect(page.locator("#result-freshness")).to_have_count(0)
        run.shot("sentence-result", full_page=True)
        # every action of the turn offers its own export
        for action_id in ("a0", "a1"):
            expect(page.locator(f"#action-{action_id} .incident-link")).to_have_attribute(
                "href", f"/v1/turns/{TURN_ID}/incident?target={action_id}&format=markdown"
            )
        assert run.errors == []


def test_a_traced_action_ages_its_sources_at_the_call_and_shows_its_freshness_and_export(served: Served) -> None:
    trace = served.action_trace
    assert json.dumps(trace["result"]["freshness"]) == json.dumps(
        next(a for a in served.actions["actions"] if a["id"] == "a1")["freshness"]
    )
    with browser("envelopes-action-result") as run:
        page = open_page(run, served, f"#/turn/{TURN_ID}/trace/{trace['trace_id']}")
        expect(page.locator("#result-panel")).to_have_attribute("data-target", "action")
        expect(page.locator("#result-incident")).to_have_attribute(
            "href", f"/v1/turns/{TURN_ID}/incident?target=a1&format=markdown"
        )
        expect(page.locator('#result-freshness .finding[data-status="breach"] .finding-age')).to_have_text(
            " · 45 s old"
        )
        block = page.locator('#tree li.src-node[data-source-id="s0"] details.envelope')
        expect(block.locator("summary .env-age")).to_have_text("45 s old")  # at the call, not at the answer
        block.locator("summary").click()
        expect(field(block, "observed_at")).to_contain_text("45 s old when the action was made")
        run.shot("action-result", full_page=True)
        assert run.errors == []
