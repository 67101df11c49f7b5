"""The viewer shows the evidence, in real headless Chromium against the service on loopback.

The turns: ``fixtures/redundant_sources_turn.json`` (three tool returns each state the layer id of the claim,
so removing any one changes nothing and each carries it kept alone), the same turn with two more tool returns
that state it (five carriers: more than the Markdown citation writes out), and the same turn whose instructions
name the id too (removing any one layer changes nothing: the verdict is redundant). Each is traced through the
real estimator, the judge scripted behind an OpenAI-compatible server: it scores 9 when a source shown states
the layer id, and its span check quotes the id — except in the permalink, where it answers silent, so one
source carries the claim alone while its span check found nothing.

Checked: the keep-alone bars and the "any one of … is enough" line; no card that both carries the claim and
"says nothing about this claim"; the sources by effect with the layer order one click away (kept in the
address); the user's question on the turn page; every glossary term in "How to read this"; a quote with
underscores legible in dark mode; the Markdown citation with every source that carries the claim, "and N
more" when cut, in the viewer's order. No step may log a console error.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from markdown_it import MarkdownIt
from playwright.sync_api import Locator, Page, expect
from support.ui import (
    FIXTURES,
    JUDGE_SYSTEM_MARK,
    OUTSIDE_VIEWPORT,
    BrowserRun,
    SourceKeyedJudge,
    Viewer,
    axe_violations,
    browser,
    load_json,
    run_trace,
    sign_in_as_admin,
    viewer,
)

from estimator.corpus.turn import StoredTurn

pytestmark = pytest.mark.timeout(300)

LAYER_ID = "MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual"
REDUNDANT = load_json(FIXTURES / "redundant_sources_turn.json")
QUIET_MARK = "worldview.earthdata"  # only the permalink's return holds it: its span check answers silent
EXTRA_CALLS = [
    {
        "name": "list_land_cover_layers",
        "arguments": {"scheme": "IGBP"},
        "response": json.dumps({"layers": [{"id": LAYER_ID, "scheme": "IGBP"}]}, indent=2),
    },
    {
        "name": "get_layer_legend",
        "arguments": {"layer": "IGBP annual"},
        "response": f"Legend of {LAYER_ID}: 17 IGBP classes, yearly.",
    },
]


def _five_carriers() -> dict[str, Any]:
    turn: dict[str, Any] = copy.deepcopy(REDUNDANT)
    turn["turn_id"] = "turn-five-carriers-0001"
    turn["response_payload"]["tool_calls"] = [*turn["response_payload"]["tool_calls"], *EXTRA_CALLS]
    return turn


FIVE = _five_carriers()


def _two_layers() -> dict[str, Any]:
    """The instructions name the layer id too: removing any one layer changes nothing (verdict redundant)."""
    turn: dict[str, Any] = copy.deepcopy(REDUNDANT)
    turn["turn_id"] = "turn-two-layers-0001"
    turn["system_prompt"] += f" For annual IGBP land cover always use {LAYER_ID}."
    return turn


LAYERS = _two_layers()


class QuietOnThePermalink(SourceKeyedJudge):
    """The scripted judge, except that its span check of the permalink answers silent."""

    def answer(self, request: dict[str, Any]) -> str:
        messages = list(request.get("messages") or [])
        system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        user = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
        if JUDGE_SYSTEM_MARK not in system and QUIET_MARK in user:
            self.calls.append("support")
            return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.7, "reason": "no such line"})
        return super().answer(request)


@dataclass
class Evidence:
    v: Viewer
    traces: dict[str, dict[str, Any]]  # turn id → its trace (GET /v1/traces/{id})
    glossary: list[dict[str, Any]]

    def hash(self, turn: dict[str, Any]) -> str:
        return f"#/turn/{turn['turn_id']}/trace/{self.traces[turn['turn_id']]['trace_id']}"

    def term(self, key: str) -> dict[str, Any]:
        return next(t for t in self.glossary if t["key"] == key)


def _claim_id(v: Viewer, turn: dict[str, Any]) -> str:
    segments = v.api.get(f"/v1/turns/{turn['turn_id']}/segments").json()["segments"]
    return str(next(s["id"] for s in segments if LAYER_ID in s["text"]))


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evidence]:
    with viewer(tmp_path_factory.mktemp("evidence") / "data", QuietOnThePermalink([LAYER_ID])) as v:
        traces = {}
        for turn in (REDUNDANT, FIVE, LAYERS):
            v.store(turn)
            traces[turn["turn_id"]] = run_trace(v, turn["turn_id"], _claim_id(v, turn))
        yield Evidence(v, traces, v.api.get("/v1/glossary").json()["terms"])


def _open(run: BrowserRun, e: Evidence, turn: dict[str, Any]) -> Page:
    sign_in_as_admin(run, e.v, e.hash(turn))
    expect(run.page.locator("#verdict")).to_be_visible()
    return run.page


def _effect_order(result: dict[str, Any]) -> list[str]:
    """The sources by effect, computed here from the numbers: |Δ|, or for a source that carries the claim
    alone its score kept alone above s(0); unmeasured last; ties in the result's (layer) order."""

    def effect(s: dict[str, Any]) -> float | None:
        lift = None if s["alone"] is None else float(s["alone"]) - float(result["s_none"])
        if s["role"] == "redundant" and lift is not None:
            return lift
        return abs(s["delta"]) if s["delta"] is not None else lift

    ranked = [(effect(s), k, s["source_id"]) for k, s in enumerate(result["sources"])]
    return [sid for e, k, sid in sorted(ranked, key=lambda x: (x[0] is None, -(x[0] or 0.0), x[1]))]


def _ids(nodes: Locator) -> list[str]:
    return [str(x) for x in nodes.evaluate_all("els => els.map(e => e.dataset.sourceId || e.dataset.key)")]


# --------------------------------------------------------------------------- keep-alone bars, "any one of"


def test_a_redundant_result_draws_keep_alone_bars_and_the_any_one_of_line(evidence: Evidence) -> None:
    result = evidence.traces[REDUNDANT["turn_id"]]["result"]
    carriers = [s for s in result["sources"] if s["role"] == "redundant"]
    assert [s["source_id"] for s in carriers] == ["s0", "s1", "s3"], result["sources"]
    assert all(s["delta"] == 0.0 and s["alone"] == result["s_all"] == 9.0 for s in carriers)
    assert any("any one of s0, s1 and s3 is enough" in line for line in result["redundancy"])
    alone_label = evidence.term("alone")["label"]
    with browser("evidence-alone") as run:
        page = _open(run, evidence, REDUNDANT)
        lines = page.locator("#redundancy #redundancy-lines li")
        expect(lines).to_have_text(list(result["redundancy"]))
        box = page.locator("#redundancy").bounding_box()
        chart = page.locator("#drops-chart").bounding_box()
        assert box and chart and box["y"] < chart["y"]  # above the sources
        for s in carriers:
            row = page.locator(f'#drops-chart li.alone-row[data-key="{s["source_id"]}"]')
            expect(row.locator(".alone-value")).to_contain_text(f"{alone_label} 9.00")
            bar, s1 = row.locator(".bar.alone").bounding_box(), row.locator(".chart-s1").bounding_box()
            zero = row.locator(".chart-zero").bounding_box()
            assert bar and s1 and zero and bar["width"] > 40, bar
            assert abs(bar["x"] - (zero["x"] + zero["width"] / 2)) <= 2  # from s(0), the zero line
            assert abs(bar["x"] + bar["width"] - (s1["x"] + s1["width"] / 2)) <= 2  # up to s(1): alone = s(1)
            head = page.locator(f'#tree li.src-node[data-source-id="{s["source_id"]}"] .src-head')
            expect(head.locator(".alone-score")).to_have_text(f"{alone_label} 9.00 (s(1) 9.00)")
        values = page.locator("#drops-chart .chart-row:not(.chart-scale)").evaluate_all(
            "rows => rows.map(r => [r.dataset.key, r.querySelector('.chart-value').textContent])"
        )
        assert {k for k, text in values if text.startswith("+0.00")}.isdisjoint({"s0", "s1", "s3"}), values
        expect(page.locator('#drops-chart li.chart-row[data-key="s2"] .chart-value')).to_contain_text("+0.00")
        expect(page.locator("#alone-caption")).to_contain_text("s(0) = 2.00")
        assert "\nnull\n" not in "\n" + page.locator("#result-panel").inner_text() + "\n"
        run.shot("alone", full_page=True)
        assert axe_violations(page, "#result-panel") == []
        assert run.errors == []
    with browser("evidence-alone-390", width=390, height=844, color_scheme="dark") as run:
        page = _open(run, evidence, REDUNDANT)
        expect(page.locator("#drops-chart li.alone-row")).to_have_count(3)
        page.locator("#how-to-read summary").click()
        assert page.evaluate(OUTSIDE_VIEWPORT) == []
        assert axe_violations(page, "#result-panel") == []
        run.shot("alone-390", full_page=True)
        assert run.errors == []


def test_a_redundant_verdict_draws_each_layer_and_source_with_its_score_kept_alone(evidence: Evidence) -> None:
    result = evidence.traces[LAYERS["turn_id"]]["result"]
    assert result["verdict"] == "redundant", result["verdict"]
    layers = {x["layer"]: x for x in result["layers"]}
    assert layers["tools"]["role"] == layers["instructions"]["role"] == "redundant"
    carriers = [s["source_id"] for s in result["sources"] if s["role"] == "redundant"]
    assert carriers == ["s0", "s1", "s3", "s4"] and all(s["delta"] is None for s in result["sources"])
    alone_label = evidence.term("alone")["label"]
    with browser("evidence-layers-alone") as run:
        page = _open(run, evidence, LAYERS)
        expect(page.locator("#redundancy-lines li")).to_have_text(list(result["redundancy"]))
        expect(page.locator("#redundancy-lines")).to_contain_text("Any one of the tools, instructions layers")
        for key in ("layer-tools", "layer-instructions", *carriers):
            row = page.locator(f'#drops-chart li.alone-row[data-key="{key}"]')
            expect(row.locator(".alone-value")).to_contain_text(f"{alone_label} 9.00")
            bar = row.locator(".bar.alone").bounding_box()
            assert bar and bar["width"] > 40, key
        expect(page.locator('#drops-chart li.chart-row:not(.alone-row)[data-key="layer-history"]')).to_have_count(1)
        assert _ids(page.locator("#tree li.src-node")) == _effect_order(result)
        page.locator('#source-order button[data-order="layers"]').click()
        head = page.locator('#tree > li[data-layer="instructions"] .layer-head')
        expect(head).to_contain_text(f"{alone_label} 9.00")
        run.shot("layers-alone", full_page=True)
        assert run.errors == []


def test_a_source_that_carries_the_claim_alone_never_reads_says_nothing(evidence: Evidence) -> None:
    result = evidence.traces[REDUNDANT["turn_id"]]["result"]
    permalink = next(s for s in result["sources"] if s["source_id"] == "s3")
    assert permalink["role"] == "redundant" and permalink["support"]["verdict"] == "silent"
    silent, no_quote = evidence.term("support.silent")["label"], evidence.term("support.no_quote")["label"]
    with browser("evidence-silent") as run:
        page = _open(run, evidence, REDUNDANT)
        card = page.locator('#tree li.src-node[data-source-id="s3"]')
        expect(card.locator(".verdict-words")).to_have_attribute("data-support", "support.no_quote")
        expect(card.locator(".verdict-words .words")).to_have_text(no_quote)
        expect(card).not_to_contain_text(silent)
        term = card.locator('.term[data-term="support.no_quote"]')
        term.locator(".term-toggle").click()
        expect(term.locator(".term-pop .short")).to_have_text(evidence.term("support.no_quote")["short"])
        # a source that does not carry it keeps the span check's own words
        other = page.locator('#tree li.src-node[data-source-id="s2"] .verdict-words .words')
        expect(other).to_have_text(silent)
        for node in page.locator("#tree li.src-node").all():
            if (node.get_attribute("data-role") or "") in ("grounds", "redundant"):
                expect(node).not_to_contain_text(silent)
        # the score and the span check disagree about s3: said, with the numbers, without hedging the verdict
        found = [d for d in result["disagreements"] if d["subject"] == "s3"]
        assert [d["kind"] for d in found] == ["carrier_silent"]
        line = page.locator('#disagreement-lines li[data-kind="carrier_silent"][data-subject="s3"]')
        expect(line).to_contain_text(found[0]["text"])
        expect(line).to_contain_text(evidence.term("disagreement.carrier_silent")["label"], ignore_case=True)
        expect(page.locator("#verdict-hedge")).to_have_count(0)
        assert not result["verdict_text"].endswith(evidence.term("disagreement")["label"])
        assert run.errors == []


# --------------------------------------------------------------------------- order by effect, or by layer


def test_sources_by_effect_with_the_layer_order_one_click_away(evidence: Evidence) -> None:
    result = evidence.traces[REDUNDANT["turn_id"]]["result"]
    by_effect = _effect_order(result)
    by_layer = [s["source_id"] for s in result["sources"]]
    assert by_effect[:4] == ["s0", "s1", "s3", "s2"] and by_effect != by_layer
    measured = {s["source_id"] for s in result["sources"] if s["delta"] is not None or s["alone"] is not None}
    with browser("evidence-order") as run:
        page = _open(run, evidence, REDUNDANT)
        nodes, rows = page.locator("#tree li.src-node"), page.locator("#drops-chart li.chart-row[data-key^='s']")
        expect(page.locator("#tree")).to_have_attribute("data-order", "effect")
        assert _ids(nodes) == by_effect
        assert _ids(rows) == [sid for sid in by_effect if sid in measured]
        expect(page.locator('#source-order button[data-order="effect"]')).to_have_attribute("aria-pressed", "true")

        page.locator('#source-order button[data-order="layers"]').click()
        expect(page.locator("#tree")).to_have_attribute("data-order", "layers")
        expect(page).to_have_url(re.compile(r"\?order=layers$"))
        assert _ids(nodes) == by_layer
        assert _ids(rows) == [sid for sid in by_layer if sid in measured]
        expect(page.locator("#tree > li[data-layer]")).to_have_count(len(result["layers"]))
        run.shot("by-layer", full_page=True)

        page.reload()  # kept in the address
        expect(page.locator("#tree")).to_have_attribute("data-order", "layers")
        expect(page.locator('#source-order button[data-order="layers"]')).to_have_attribute("aria-pressed", "true")
        past = page.locator(f'#past-traces a[data-trace-id="{evidence.traces[REDUNDANT["turn_id"]]["trace_id"]}"]')
        expect(past).to_have_attribute("href", re.compile(r"\?order=layers$"))  # and in the links to a result
        page.go_back()  # Back restores the order before
        expect(page.locator("#tree")).to_have_attribute("data-order", "effect")
        assert _ids(nodes) == by_effect
        assert run.errors == []


# --------------------------------------------------------------------------- the question, the terms


def test_the_turn_page_shows_the_users_question(evidence: Evidence) -> None:
    assert "query" not in REDUNDANT  # the question is the request's last user message
    question = StoredTurn.model_validate(REDUNDANT).effective_query()
    assert question.startswith("Which Worldview layer")
    with browser("evidence-question") as run:
        sign_in_as_admin(run, evidence.v, f"#/turn/{REDUNDANT['turn_id']}")
        page = run.page
        expect(page.locator("#turn-question-text")).to_have_text(question)
        asked = page.locator("#turn-question").bounding_box()
        response = page.locator("#response").bounding_box()
        assert asked and response and asked["y"] < response["y"]
        assert run.errors == []


def test_how_to_read_this_lists_every_glossary_term_with_its_definition(evidence: Evidence) -> None:
    terms = evidence.glossary
    assert len(terms) > 40 and any(t["key"] == "support.no_quote" for t in terms)
    with browser("evidence-terms") as run:
        page = _open(run, evidence, REDUNDANT)
        guide = page.locator("#how-to-read")
        guide.locator("summary").click()
        entries = guide.locator(".glossary-entry")
        expect(entries).to_have_count(len(terms))
        shown = entries.evaluate_all(
            """els => els.map(e => [e.dataset.glossaryTerm, e.querySelector('.glossary-label').textContent,
                 e.querySelector('.short').textContent, e.querySelector('.detail').textContent])"""
        )
        assert shown == [[t["key"], t["label"], t["short"], t["detail"]] for t in terms]
        expect(entries.first).to_be_visible()
        assert run.errors == []


# --------------------------------------------------------------------------- dark mode


def _channel(c: float) -> float:
    c /= 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _luminance(css: str) -> float:
    values = [float(x) for x in re.findall(r"[\d.]+", css)]
    assert len(values) == 3 or (len(values) == 4 and values[3] == 1), f"not an opaque colour: {css}"
    r, g, b = (_channel(x) for x in values[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


COLOURS = """(el) => {
  const opaque = (e) => { for (let p = e; p; p = p.parentElement) {
      const bg = getComputedStyle(p).backgroundColor;
      if (bg !== 'rgba(0, 0, 0, 0)' && bg !== 'transparent') return bg; } return 'rgb(255, 255, 255)'; };
  return { text: getComputedStyle(el).color, own: opaque(el), around: opaque(el.parentElement),
           content: el.textContent, emphasis: el.querySelectorAll('em, strong, i, b').length };
}"""


def _legible(mark: Locator) -> str:
    """The marked quote's text, its colour at least 4.5:1 on its highlight and on what is around it (where a
    glyph that reaches below the highlight, such as an underscore, is drawn)."""
    seen = mark.evaluate(COLOURS)
    assert seen["emphasis"] == 0
    assert contrast(seen["text"], seen["own"]) >= 4.5, seen
    assert contrast(seen["text"], seen["around"]) >= 4.5, seen
    return str(seen["content"])


def test_a_quote_with_underscores_is_legible_in_dark_mode(evidence: Evidence) -> None:
    with browser("evidence-dark", color_scheme="dark") as run:
        page = _open(run, evidence, REDUNDANT)
        assert page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
        box = page.locator('#tree .quote-box[data-source-id="s0"]')
        expect(box).to_have_attribute("data-evidence", "json")
        assert LAYER_ID in _legible(box.locator("mark"))
        seen = box.evaluate(COLOURS)
        assert LAYER_ID in seen["content"] and contrast(seen["text"], seen["own"]) >= 4.5
        box.locator(".quote-button").click()
        marked = page.locator("#source-viewer #source-lines mark.quote-span")
        expect(marked).to_be_visible()
        assert LAYER_ID in _legible(marked)
        run.shot("dark-quote")
        assert run.errors == []
    md = evidence.v.api.get(
        f"/v1/traces/{evidence.traces[REDUNDANT['turn_id']]['trace_id']}/export", params={"format": "markdown"}
    ).text
    html = MarkdownIt().render(md)
    assert "<em>" not in html and html.count(LAYER_ID) >= 3  # the claim and the quotes, underscores intact


# --------------------------------------------------------------------------- the Markdown citation


def _citation(e: Evidence, turn: dict[str, Any]) -> str:
    trace_id = e.traces[turn["turn_id"]]["trace_id"]
    return str(e.v.api.get(f"/v1/traces/{trace_id}/export", params={"format": "markdown"}).text)


def test_the_markdown_citation_has_every_source_that_carries_the_claim(evidence: Evidence) -> None:
    no_quote, silent = evidence.term("support.no_quote")["label"], evidence.term("support.silent")["label"]
    few = evidence.traces[REDUNDANT["turn_id"]]["result"]
    md = _citation(evidence, REDUNDANT)
    assert "and 1 more" not in md and "more that carry it" not in md  # three carriers: none cut
    for s in few["sources"]:
        if s["role"] == "redundant":
            assert f"(`{s['source_id']}`, tools layer) — redundant: kept alone" in md
            if s["support"]["quote"]:
                assert f"   > {s['support']['quote'].replace('_', chr(92) + '_')}\n" in md
    assert no_quote[:1].upper() + no_quote[1:] in md and silent not in md
    assert "**What carries the claim alone**" in md and "any one of s0, s1 and s3 is enough" in md

    many = evidence.traces[FIVE["turn_id"]]["result"]
    carriers = [
        sid
        for sid in _effect_order(many)
        if next(s for s in many["sources"] if s["source_id"] == sid)["role"] in ("grounds", "redundant")
    ]
    assert len(carriers) == 5, many["sources"]
    md = _citation(evidence, FIVE)
    assert "… and 2 more that carry it:" in md
    at = [md.index(f"`{sid}`") for sid in carriers]
    assert at == sorted(at)  # every one, by effect
    assert md.count("Verified quote") + md.count(no_quote[:1].upper() + no_quote[1:]) == 3  # three in full
    with browser("evidence-citation") as run:
        run.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=evidence.v.base_url)
        page = _open(run, evidence, FIVE)
        shown = [sid for sid in _ids(page.locator("#tree li.src-node")) if sid in carriers]
        assert shown == carriers  # the viewer's order is the citation's
        page.locator("#copy-citation").click()
        expect(page.locator("#export-status")).to_have_text("Citation copied.")
        assert page.evaluate("navigator.clipboard.readText()") == md
        assert run.errors == []
