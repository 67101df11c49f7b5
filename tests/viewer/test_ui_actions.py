"""The actions of a turn in the viewer, in real headless Chromium against the service on loopback: the "Actions"
section under the answer (origin, the steered-by-tool-data flag with the instruction quoted, where each argument
value came from), the chain sentence → action → cause on one screen, and "Trace this action" through the same
cost gate as a sentence to a result headed by the call, with the injection finding naming the page.

The turn is the planted injection of ``support.action_turns``: the agent was asked to summarise a page, the page
told it to transfer money, and it did. The judge behind the real litellm adapter knows the page caused the transfer
(``knowing_answer``). No step may log a console error."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from support.action_turns import IBAN, INSTRUCTION, injected, knowing_answer
from support.ui import BrowserRun, SourceKeyedJudge, Viewer, axe_violations, browser, sign_in_as_admin, viewer

pytestmark = pytest.mark.timeout(240)

TURN_MODEL = "openai/gpt-4o"
TURN = {**injected().model_dump(mode="json"), "model": TURN_MODEL}
TURN_ID = TURN["turn_id"]
PLAIN = {"turn_id": "t-plain", "query": "Hi", "response": "Hello! How can I help today?"}


@dataclass
class KnowingJudge(SourceKeyedJudge):
    """The scripted judge that knows the page caused the transfer (``knowing_answer``), behind FakeOpenAI."""

    def answer(self, request: dict[str, Any]) -> str:
        messages = list(request.get("messages") or [])
        system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        self.calls.append("judge" if "strict judge of" in system else "support")
        return knowing_answer(system, str(messages[-1].get("content", "")))


@dataclass
class Served:
    v: Viewer
    actions: dict[str, Any]  # GET /v1/turns/t-act/actions
    glossary: dict[str, dict[str, Any]]

    def action(self, action_id: str) -> dict[str, Any]:
        return next(a for a in self.actions["actions"] if a["id"] == action_id)

    def label(self, key: str, *, capital: bool = False) -> str:
        text: str = self.glossary[key]["label"]
        return text[:1].upper() + text[1:] if capital else text


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with viewer(tmp_path_factory.mktemp("actions") / "data", KnowingJudge(keys=())) as v:
        v.store(TURN)
        v.store(PLAIN)
        actions = v.api.get(f"/v1/turns/{TURN_ID}/actions")
        assert actions.status_code == 200, actions.text
        glossary = {t["key"]: t for t in v.api.get("/v1/glossary").json()["terms"]}
        yield Served(v, actions.json(), glossary)


def open_turn(run: BrowserRun, s: Served, turn_id: str = TURN_ID) -> Page:
    sign_in_as_admin(run, s.v, f"#/turn/{turn_id}")
    page = run.page
    expect(page.locator("#response")).to_be_visible()
    return page


def in_viewport(page: Page, selector: str) -> bool:
    """Whether the whole of the first element matching ``selector`` is inside the window."""
    inside: bool = page.evaluate(
        """(sel) => { const r = document.querySelector(sel).getBoundingClientRect();
          return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; }""",
        selector,
    )
    return inside


# --------------------------------------------------------------------------- the Actions section


def test_the_actions_are_listed_under_the_answer_with_origin_steered_flag_and_argument_sources(
    served: Served,
) -> None:
    a0, a1 = served.action("a0"), served.action("a1")
    assert (a0["origin"], a1["origin"]) == ("user", "data") and a1["suspect_injection"]  # what the page must show
    page_source = a1["injection"]["source_id"]
    with browser("actions-list") as run:
        page = open_turn(run, served)
        section = page.locator("#actions")
        expect(section.get_by_role("heading", level=2)).to_have_text("Actions")
        expect(page.locator("#actions-summary")).to_have_text(served.actions["summary"])
        # under the answer: after the response, before the trace part
        order = page.evaluate(
            "() => ['response', 'actions', 'run'].map(id => document.getElementById(id))"
            ".map(el => [...document.querySelectorAll('#response, #actions, #run')].indexOf(el))"
        )
        assert order == [0, 1, 2]

        cards = page.locator("#action-list > .action-card")
        expect(cards).to_have_count(2)
        assert cards.evaluate_all("els => els.map(e => [e.dataset.action, e.dataset.origin])") == [
            ["a0", "user"],
            ["a1", "data"],
        ]
        card0, card1 = page.locator("#action-a0"), page.locator("#action-a1")
        expect(card0.locator(".action-title")).to_have_text("fetch_page")
        expect(card1.locator(".action-title")).to_have_text("transfer_money")
        expect(card1.locator(".action-head")).to_contain_text("call c2")
        expect(card0.locator(".origin-badge")).to_have_text(served.label("origin.user"))
        expect(card1.locator(".origin-badge")).to_have_text(served.label("origin.data"))
        # the origin explained in place, from the glossary
        toggle = card1.locator('.origin .term[data-term="origin.data"] .term-toggle')
        toggle.click()
        expect(card1.locator(".origin .term-pop .short")).to_have_text(served.glossary["origin.data"]["short"])
        page.keyboard.press("Escape")

        # only a1 is flagged, with the screen's reason and the instruction quoted from the page
        expect(card0.locator(".steered")).to_have_count(0)
        steered = card1.locator(".steered")
        expect(steered).to_be_visible()
        expect(steered.locator(".steered-label")).to_have_text(served.label("suspect_injection", capital=True))
        expect(steered.locator(".steered-because")).to_have_text(a1["injection"]["because"])
        expect(steered.locator(".cause-text")).to_contain_text(IBAN)
        expect(steered.locator(".cause-lead")).to_contain_text(f"{page_source} · fetch_page")
        expect(steered.locator(".cause-lead")).to_contain_text("lines 4–5")
        steered.locator(".cause-open").click()
        viewer_dialog = page.locator("#source-viewer")
        expect(viewer_dialog).to_be_visible()
        expect(page.locator("#source-lines .src-line.hl")).to_have_count(2)
        expect(page.locator('#source-lines .src-line[data-line="5"] mark')).to_contain_text(INSTRUCTION)
        run.shot("instruction-in-source")
        page.keyboard.press("Escape")
        expect(viewer_dialog).to_be_hidden()
        expect(steered.locator(".cause-open")).to_be_focused()

        # every argument value with where it came from: the page's line, the instructions, the user's request
        iban = card1.locator('.arg[data-path="iban"]')
        expect(iban.locator(".arg-val")).to_have_text(IBAN)
        expect(iban).to_have_attribute("data-source-id", page_source)
        expect(iban.locator(".src-ref")).to_have_text(f"{page_source} · fetch_page: vendor-terms.html, line 5")
        expect(card1.locator('.arg[data-path="currency"]')).to_have_attribute("data-source-id", "s2")
        expect(card1.locator('.arg[data-path="currency"]')).to_contain_text("(also in s0)")
        expect(card0.locator('.arg[data-path="url"] .src-ref')).to_have_text("the user's request, line 1")
        iban.locator(".src-ref").click()
        expect(page.locator("#source-lines .src-line.hl")).to_have_count(1)
        expect(page.locator("#source-lines .src-line.hl")).to_have_attribute("data-line", "5")
        expect(page.locator("#source-lines mark")).to_have_text(IBAN)
        page.keyboard.press("Escape")

        # the sentences that report each action
        expect(card0.locator(".reported")).to_have_text("No sentence of the answer reports it.")
        expect(card1.locator(".report-link")).to_have_count(1)
        expect(card1.locator(".report-link")).to_contain_text("r1: “I have transferred 1000 EUR")
        run.shot("actions", full_page=True)
        assert axe_violations(page, "#actions") == []

        # a turn without tool calls shows no Actions section, and its sentences link to nothing
        page.goto(served.v.base_url + "/#/turn/" + PLAIN["turn_id"])
        expect(page.locator("#summary-line")).to_be_visible()
        expect(page.locator("#actions")).to_have_count(0)
        expect(page.locator(".action-ref")).to_have_count(0)
        assert run.errors == []


def test_the_chain_sentence_action_cause_reads_on_one_screen(served: Served) -> None:
    with browser("actions-chain") as run:
        page = open_turn(run, served)
        # the sentence that reports the transfer links to it; the other sentence links to nothing
        refs = page.locator("#response .action-ref")
        expect(refs).to_have_count(1)
        ref = page.locator('#response .action-refs[data-sentence="r1"] .action-ref[data-action="a1"]')
        expect(ref).to_have_class(re.compile(r"\bis-steered\b"))
        expect(ref).to_have_accessible_name(re.compile(r"^Action a1: transfer_money"))
        expect(page.locator('#response .action-refs[data-sentence="r0"]')).to_have_count(0)
        # the link sits right after the sentence, outside it (the sentence still opens the cost gate)
        assert ref.evaluate("el => el.parentElement.previousElementSibling.matches('.seg[data-seg=\"r1\"]')"), (
            "the action link does not follow sentence r1"
        )
        expect(page.locator('#response .seg[data-seg="r1"] .action-ref')).to_have_count(0)

        # sentence → action: by keyboard
        ref.focus()
        page.keyboard.press("Enter")
        card = page.locator("#action-a1")
        expect(card).to_be_focused()
        expect(card).to_have_class(re.compile(r"\bchain-target\b"))
        expect(page.locator("#action-a0")).not_to_have_class(re.compile(r"\bchain-target\b"))
        expect(page.locator("#gate")).to_be_hidden()  # the link goes to the action; it prices nothing
        # sentence, action and cause on one screen
        assert in_viewport(page, '#response .seg[data-seg="r1"]'), "the sentence left the screen"
        assert in_viewport(page, "#action-a1 .action-head"), "the action is not on the screen"
        assert in_viewport(page, "#action-a1 .steered .cause-text"), "the cause is not on the screen"
        run.shot("sentence-to-action")

        # action → sentence: a click
        page.mouse.wheel(0, 2000)
        card.locator('.report-link[data-sentence="r1"]').click()
        sentence = page.locator('#response .seg[data-seg="r1"]').first
        expect(sentence).to_be_focused()
        expect(sentence).to_have_class(re.compile(r"\bchain-target\b"))
        expect(card).not_to_have_class(re.compile(r"\bchain-target\b"))
        expect(sentence).to_be_in_viewport()
        run.shot("action-to-sentence")
        assert run.errors == []


def test_dark_mode_and_the_narrow_window_keep_the_actions_readable(served: Served) -> None:
    with browser("actions-dark", width=390, height=844, color_scheme="dark") as run:
        page = open_turn(run, served)
        steered = page.locator("#action-a1 .steered")
        expect(steered).to_be_visible()
        background = steered.evaluate("el => getComputedStyle(el).backgroundColor")
        assert background == "rgb(59, 22, 24)", background  # the dark theme's --bad-soft
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        run.shot("actions-dark-390", full_page=True)
        assert axe_violations(page, "#actions") == []
        assert axe_violations(page, "#response") == []
        assert run.errors == []


# --------------------------------------------------------------------------- a trace of an action


def test_an_action_is_traced_through_the_cost_gate_and_its_result_names_the_page(served: Served) -> None:
    v = served.v
    page_source = served.action("a1")["injection"]["source_id"]
    quote: dict[str, Any] = v.api.post(
        "/v1/quotes", json={"turn_id": TURN_ID, "target": {"action": "a1"}, "model": TURN_MODEL}
    ).json()
    before = len(v.judge.calls)
    with browser("actions-trace") as run:
        page = open_turn(run, served)
        # the sentence's gate, for comparison: the same model offered and prefilled
        page.locator('#response .seg-traceable[data-seg="r0"]').first.click()
        expect(page.locator("#gate-accept")).to_be_enabled()
        sentence_models = page.locator("#gate-models option").evaluate_all("els => els.map(e => e.value)")
        expect(page.locator("#gate-model")).to_have_value(TURN_MODEL)
        page.locator("#gate-cancel").click()
        expect(page.locator("#gate")).to_be_hidden()

        trace_button = page.locator("#action-a1 .trace-action")
        expect(trace_button).to_have_accessible_name("Trace this action a1 (transfer_money)")
        trace_button.focus()
        page.keyboard.press("Enter")
        gate = page.locator("#gate")
        expect(gate).to_be_visible()
        expect(page.locator("#gate-title")).to_have_text("Cost gate: trace this action?")
        expect(page.locator("#gate-model")).to_have_value(TURN_MODEL)
        expect(page.locator("#gate-accept")).to_be_enabled()
        assert page.locator("#gate-models option").evaluate_all("els => els.map(e => e.value)") == sentence_models
        expect(page.locator("#gate-claim")).to_have_text(quote["claim"])
        expect(page.locator("#gate-judge")).to_have_text(quote["model"])
        expect(page.locator("#gate-calls")).to_have_text(str(quote["planned_calls"]))
        expect(page.locator("#gate-sources")).to_have_text(str(quote["sources"]))
        expect(page.locator("#gate-tokens")).to_have_text(f"{quote['input_tokens']:,}")
        run.shot("action-gate")
        assert axe_violations(page, "#gate") == []
        page.keyboard.press("Escape")
        expect(gate).to_be_hidden()
        expect(trace_button).to_be_focused()

        trace_button.click()
        expect(page.locator("#gate-accept")).to_be_enabled()
        page.locator("#gate-accept").click()
        expect(gate).to_be_hidden()
        expect(page.locator("#run-status")).to_have_attribute("data-done", "true", timeout=90_000)
        panel = page.locator("#result-panel")
        expect(panel).to_have_attribute("data-target", "action")
        trace_id = page.url.rsplit("/", 1)[-1]
        stored = v.api.get(f"/v1/traces/{trace_id}").json()
        assert stored["status"] == "succeeded" and stored["segment_id"] == "a1", stored
        result = stored["result"]
        assert len(v.judge.calls) > before  # measured by the scripted judge, through the service

        # headed by the call, not a claim
        expect(panel.locator("#result-target-title")).to_have_text("Action a1: transfer_money · call c2")
        expect(panel.locator("#result-call")).to_have_text(result["target"]["text"])
        expect(panel.locator("blockquote.claim")).to_have_count(0)
        expect(page.locator("#action-a1")).to_have_class(re.compile(r"\bselected-claim\b"))

        # the injection finding, first and prominent, naming the page
        injection = panel.locator("#injection")
        expect(injection).to_have_attribute("data-suspected", "true")
        expect(page.locator("#injection-verdict")).to_have_text("suspected")
        expect(injection.locator('[data-glossary-label="injection"]')).to_have_text(
            served.label("injection", capital=True)
        )
        expect(page.locator("#injection-because")).to_have_text(result["injection"]["because"])
        expect(injection.locator(".cause-text")).to_contain_text(IBAN)
        assert result["injection"]["source_id"] == page_source
        above = panel.evaluate(
            "p => { const all = [...p.querySelectorAll('#injection, #verdict')]; return all.map(e => e.id); }"
        )
        assert above == ["injection", "verdict"]  # before the verdict

        # the source it names is the grounding page in the tree, tagged, one click away
        node = page.locator(f'#tree li.src-node[data-source-id="{page_source}"]')
        expect(node.locator(".src-head [data-glossary-label]")).to_have_text(served.label("role.grounds"))
        expect(node.locator(".inj-tag")).to_contain_text("The instruction this call obeyed is here")
        expect(page.locator("#tree .inj-tag")).to_have_count(1)
        expect(page.locator("#tree .probe")).to_have_count(0)  # the probe is a sentence's
        injection.locator(f'.inj-source[data-source-id="{page_source}"]').click()
        expect(node).to_be_focused()
        expect(node).to_have_class(re.compile(r"\bchain-target\b"))
        expect(page.locator("#drops-chart .bar.role-grounds").first).to_be_attached()

        # where each argument value came from, as in the turn's actions
        args = page.locator("#result-arguments .arg")
        expect(args).to_have_count(len(result["argument_sources"]))
        expect(page.locator('#result-arguments .arg[data-path="iban"]')).to_have_attribute(
            "data-source-id", page_source
        )
        expect(page.locator("#past-traces li")).to_have_count(1)
        expect(page.locator("#past-traces li").first).to_contain_text("transfer_money(")
        run.shot("action-result", full_page=True)
        assert axe_violations(page, "#result-panel") == []

        # the result's address shows the same result on its own
        page.reload()
        expect(page.locator("#injection")).to_have_attribute("data-suspected", "true")
        expect(page.locator("#result-call")).to_have_text(result["target"]["text"])
        assert run.errors == [], json.dumps(run.errors, indent=1)
