"""Evidence integrity: a quote is the source's content (never our label or header), its line numbers are
the content's own, and every cut or cap of the corpus is disclosed in words naming the source."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus, Layer, Unit
from estimator.cost import quote_cost
from estimator.fence import MARKER_RE, split_fenced
from estimator.free_tier.gating import gate_turn
from estimator.free_tier.segment import segment_response
from estimator.loo.judged import trace_claim
from estimator.params import DEFAULT_PARAMS
from estimator.seams.llm import LLMRequest, ScriptedLLM
from estimator.spans.support import check_support
from estimator.spans.verify import normalise, verify_quote
from estimator.tokens import ApproxTokenizer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FIXTURE_NAMES = ("eo_worldview_turn.json", "failures_turn.json", "fallback_path_turn.json", "ndvi_parametric_turn.json")
LINE_39 = "Comparing two annual classification maps shows where the assigned class changed, not why it changed."


def load(name: str) -> tuple[StoredTurn, Corpus]:
    turn = StoredTurn.model_validate_json((FIXTURES / name).read_text(encoding="utf-8"))
    return turn, build_corpus(turn)


def supported(quote: str) -> str:
    return json.dumps({"verdict": "supported", "evidence_quote": quote, "confidence": 0.9, "reason": "-"})


def ours(unit: Unit) -> list[str]:
    """The lines this project writes about a unit: its header lines and the ``[id] label`` line."""
    return [*(line for line in unit.header.split("\n") if line), f"[{unit.id}] {unit.label}"]


# ----------------------------------------------------------------------------- quotes are content only


def test_a_units_text_is_its_content_and_the_header_is_only_shown() -> None:
    _, corpus = load("failures_turn.json")
    spruce = next(u for u in corpus.units if u.label == "species_profile(name=Picea sitchensis)")
    assert spruce.header == 'species_profile({"name": "Picea sitchensis"})'
    assert spruce.header not in spruce.text and spruce.shown == spruce.header + "\n" + spruce.text
    history = next(u for u in corpus.units if u.label == "user said · 3 turn(s) ago")
    assert history.header == "[user said, 3 turn(s) ago]" and not history.text.startswith("[")
    failed = next(u for u in corpus.units if u.kind == "tool_error")  # a failed call: its error text is the content
    assert failed.header.split("\n")[1] == "[the call failed; its error text follows]"
    assert failed.text == "statement timeout after 30s" and "[the call failed" not in failed.text


async def test_an_adversarial_judge_quoting_lines_of_its_prompt_never_verifies_a_label() -> None:
    """Every line of every span-check prompt that is not the source's content, and every ``[id] label``
    line the judge is shown, answered as the quote: none verifies, so none comes back as evidence."""
    tried: set[str] = set()
    for name in FIXTURE_NAMES:
        turn, corpus = load(name)
        claim = segment_response(turn.response)[0].text
        for unit in corpus.units:
            content = normalise(unit.text)
            prompt: list[str] = []

            def capture(request: LLMRequest, sink: list[str] = prompt) -> str:
                sink.extend(m.content for m in request.messages)
                return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"})

            await check_support(ScriptedLLM(capture), claim, unit)
            lines = {line.strip() for text in prompt for line in text.split("\n")} | set(ours(unit))
            candidates = [line for line in lines if len(line) >= 12 and normalise(line) not in content]
            for line in candidates:

                def answer(request: LLMRequest, quote: str = line) -> str:
                    return supported(quote)

                verdict = await check_support(ScriptedLLM(answer), claim, unit)
                assert verdict.quote is None and verdict.downgraded, (name, unit.id, line)
            tried.update(candidates)
    # The lines the issue names were among those tried, so the test cannot pass vacuously.
    for named in (
        "[agent replied, 5 turn(s) ago]",
        "[user said, 2 turn(s) ago]",
        'species_profile({"name": "Picea sitchensis"})',
        "[s3] read_file: playbooks/land_cover_change.md",
    ):
        assert named in tried, named
    assert any(MARKER_RE.fullmatch(line) for line in tried)  # the fence lines too


async def test_a_whole_trace_with_a_judge_quoting_our_headers_verifies_no_quote() -> None:
    turn, corpus = load("eo_worldview_turn.json")
    claim = next(s.text for s in segment_response(turn.response) if s.text.startswith("The permalink"))

    def script(request: LLMRequest) -> str:
        if request.purpose != "support":
            return "9"
        region = request.messages[-1].content.split("\n")
        marker = region[1]
        body = region[region.index(marker, region.index(marker, 2) + 1) + 1]  # the source region's first line
        return supported(body)

    result = await trace_claim(ScriptedLLM(script), claim, turn.effective_query(), corpus)
    headed = [s for s in result.sources if corpus.by_id(s.source_id).header]
    assert headed and all(s.support is not None for s in headed)
    for score in headed:
        assert score.support is not None and score.support.quote is None, score.source_id


# ----------------------------------------------------------------------------- true line numbers


def raw_read_file(turn_json: dict[str, Any]) -> str:
    for message in turn_json["model_messages"]:
        for part in message["parts"]:
            if part.get("tool_name") == "read_file" and part["part_kind"] == "tool-return":
                return str(part["content"])
    raise AssertionError("no read_file return in the fixture")


async def test_a_quote_is_located_on_the_line_of_the_original_file() -> None:
    raw = json.loads((FIXTURES / "eo_worldview_turn.json").read_text(encoding="utf-8"))
    line = raw_read_file(raw).split("\n").index(LINE_39) + 1
    assert line == 39  # the file as the tool returned it
    _, corpus = load("eo_worldview_turn.json")
    s3 = corpus.by_id("s3")
    verdict = await check_support(ScriptedLLM(lambda r: supported(LINE_39)), LINE_39, s3)
    assert (verdict.line_start, verdict.line_end) == (39, 39)
    assert s3.lines[38] == LINE_39  # and the source view numbers it the same way


def test_a_verbatim_citation_of_the_gate_uses_the_files_line_too() -> None:
    turn, corpus = load("eo_worldview_turn.json")
    report = gate_turn(corpus, segment_response(turn.response))
    gate = next(g for g in report.segments if g.segment.text.startswith("Comparing two annual"))
    (citation,) = gate.citations
    assert (citation.source_id, citation.line_start, citation.line_end) == ("s3", 39, 39)


async def test_a_json_escaped_return_is_located_on_its_own_line() -> None:
    raw = json.loads((FIXTURES / "eo_worldview_turn.json").read_text(encoding="utf-8"))
    returns = [
        p["content"]
        for m in raw["model_messages"]
        for p in m["parts"]
        if p.get("tool_name") == "search_worldview_layers" and p["part_kind"] == "tool-return"
    ]
    returned = json.dumps(returns[0], ensure_ascii=False, indent=2).split("\n")
    escaped = '\\"layer_id\\": \\"MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual\\"'
    expected = next(i for i, text in enumerate(returned, 1) if escaped in text)
    _, corpus = load("eo_worldview_turn.json")
    quote = '"layer_id": "MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual"'
    verdict = await check_support(ScriptedLLM(lambda r: supported(quote)), "x", corpus.by_id("s0"))
    assert verdict.quote == quote and (verdict.line_start, verdict.line_end) == (expected, expected)


def test_a_history_message_starts_on_line_one() -> None:
    _, corpus = load("ndvi_parametric_turn.json")
    reply = corpus.by_id("s10")
    first = reply.text.split("\n")[0][:60]
    assert verify_quote(first, reply.text).line_start == 1  # not 2: the [agent replied, …] line is not in it
    assert not verify_quote(reply.header, reply.text).verified


# ----------------------------------------------------------------------------- truncation is disclosed


def long_history_turn() -> tuple[StoredTurn, str]:
    """24 earlier messages; the newest user message is long, its grounding fact past the cut."""
    long = " ".join(["wxyz"] * 2_720) + " The grounding fact is QX-7731."
    messages: list[dict[str, Any]] = []
    for i in range(24):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": long if i == 22 else f"message {i} of the history"})
    messages.append({"role": "user", "content": "And the fact?"})
    turn = StoredTurn.model_validate(
        {"turn_id": "t-long", "model": "m", "response": "QX-7731.", "request_payload": {"messages": messages}}
    )
    return turn, long


def test_a_cut_history_message_and_the_count_cap_are_warnings_naming_the_sources() -> None:
    turn, long = long_history_turn()
    corpus = build_corpus(turn)
    history = corpus.units
    assert len(history) == 12 and (history[0].id, history[-1].id) == ("s0", "s11")
    cut = next(u for u in history if u.text.startswith("wxyz"))
    assert "QX-7731" not in cut.text  # the fact is past the cut
    tokens = ApproxTokenizer().count(long)
    assert tokens > 2_700
    (message,) = [w for w in corpus.warnings if w.startswith(f"{cut.id} ")]
    assert f"{tokens:,}-token message cut to its first 300 tokens" in message
    (capped,) = [w for w in corpus.warnings if w.startswith("history: ")]
    assert "24 earlier messages, capped to 12" in capped and "s0–s11" in capped and "12 oldest" in capped
    assert len(corpus.warnings) == 2


def test_per_source_caps_are_warnings_naming_the_source() -> None:
    body = "\n".join(f"row {i} of the table" for i in range(60))
    turn = StoredTurn.model_validate(
        {
            "turn_id": "t-cap",
            "model": "m",
            "response": "r",
            "query": "q",
            "response_payload": {
                "tool_calls": [
                    {"name": "read_file", "arguments": {"path": "big.csv"}, "response": body},
                    {"name": "read_file", "arguments": {"path": "small.csv"}, "response": "one row"},
                ]
            },
        }
    )
    params = DEFAULT_PARAMS.override({"source_token_cap": 40, "support_token_cap": 100})
    corpus = build_corpus(turn, params)
    assert [w.split(" ", 1)[0] for w in corpus.warnings] == ["s0", "s0"]
    window, span = corpus.warnings
    assert "(read_file: big.csv)" in window and "40-token scoring window" in window
    assert "cut to 100 for the span check" in span
    assert build_corpus(turn).warnings == []  # under the default caps nothing is cut


async def test_the_quote_and_the_result_carry_every_corpus_warning() -> None:
    turn, _ = long_history_turn()
    corpus = build_corpus(turn)
    quote = quote_cost(corpus, "The grounding fact is QX-7731.", model="m")
    assert set(corpus.warnings) <= set(quote.warnings)
    assert set(corpus.warnings) <= set(quote.to_dict()["warnings"])
    result = await trace_claim(
        ScriptedLLM(lambda r: "5" if r.purpose == "judge" else "{}"),
        "The grounding fact is QX-7731.",
        turn.effective_query(),
        corpus,
    )
    assert set(corpus.warnings) <= set(result.warnings)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_every_warning_names_a_source_of_the_corpus(name: str) -> None:
    _, corpus = load(name)
    ids = {u.id for u in corpus.units}
    for warning in corpus.warnings:
        assert re.match(r"(s\d+) ", warning) and warning.split(" ", 1)[0] in ids, warning


async def test_the_model_still_sees_the_call_and_role_headers_inside_the_source_regions() -> None:
    """The header left the evidence, not the prompt: the agent's own call is part of what it saw."""
    turn, corpus = load("eo_worldview_turn.json")
    llm = ScriptedLLM(
        lambda r: (
            "5"
            if r.purpose == "judge"
            else json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"})
        )
    )
    await trace_claim(llm, LINE_39, turn.effective_query(), corpus)
    judge = next(r for r in llm.calls if r.purpose == "judge").messages[-1].content
    block = next(region for region in split_fenced(judge)[0] if region.startswith("\n[s3] "))
    assert block.split("\n")[1:3] == [
        "[s3] read_file: playbooks/land_cover_change.md",
        'read_file({"path": "playbooks/land_cover_change.md"})',
    ]
    reply = corpus.in_layer(Layer.HISTORY)[-1].id  # the agent's last reply, after the prompt's rules
    history = next(region for region in split_fenced(judge)[0] if region.startswith(f"\n[{reply}] "))
    assert history.split("\n")[2] == "[agent replied, 1 turn(s) ago]"
    span = next(r for r in llm.calls if r.purpose == "support" and "read_file(" in r.messages[-1].content)
    assert split_fenced(span.messages[-1].content)[0][-1].split("\n")[1].startswith("read_file({")
