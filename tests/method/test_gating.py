"""Algorithm 3 — free gating, Classify and BestVerbatim; the §8.1-shaped fixture.

Tests are named after the measured failures that forced each rule.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus, Evidence, Layer, Unit
from estimator.free_tier.anchors import ANCHOR_SETS
from estimator.free_tier.gating import (
    Citation,
    GateClass,
    GateStatus,
    GateSummary,
    VerbatimIndex,
    best_verbatim,
    best_verbatim_difflib,
    classify,
    gate_turn,
    quote_threshold,
)
from estimator.free_tier.numbers import fold
from estimator.free_tier.segment import Segment, client_segments, segment_response
from estimator.params import DEFAULT_PARAMS, Params

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LAYER_ID = "MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual"
BBOX = "In practice, I would start with an Alabama bounding box: west −88.6, south 30.1, east −84.9, north 35.1."
DISCLAIMER_81 = (
    "Non-authoritative note: classification maps can change due to real land change or mapping uncertainty "
    "(especially near edges/mixed landscapes), so treat this as an exploratory visual comparison rather than "
    "a definitive change calculation."
)


def make_corpus(*texts: str, layers: tuple[Layer, ...] = ()) -> Corpus:
    units = []
    for i, text in enumerate(texts):
        layer = layers[i] if i < len(layers) else Layer.TOOLS
        units.append(
            Unit(
                id=f"s{i}",
                kind="user_tool",
                tool="t",
                label=f"t{i}",
                text=text,
                ordinal=i,
                layer=layer,
                evidence=Evidence(digest=f"d{i}", source="t", tokens=1),
            )
        )
    return Corpus(units=tuple(units))


def gate_one(text: str, corpus: Corpus) -> tuple[GateClass, GateStatus, tuple[Citation, ...]]:
    report = gate_turn(corpus, segment_response(text))
    assert len(report.segments) == 1, [g.segment.text for g in report.segments]
    g = report.segments[0]
    return g.klass, g.status, g.citations


def test_i_can_read_the_file_for_you_is_an_offer_not_attributed_to_calls() -> None:
    corpus = make_corpus("read_file({})\ncontents")
    klass, status, citations = gate_one("I can read the file for you.", corpus)
    assert (klass, status, citations) == (GateClass.RECOMMENDATION, GateStatus.AGENT_VOICE, ())


def test_i_read_the_file_and_found_x_is_attributed_to_every_tool_call_this_turn() -> None:
    corpus = make_corpus(
        "read_file({})\nline two\nline three",
        "search({})\nhit",
        "the system prompt",
        layers=(Layer.TOOLS, Layer.TOOLS, Layer.INSTRUCTIONS),
    )
    klass, status, citations = gate_one("I read the file and found the threshold.", corpus)
    assert (klass, status) == (GateClass.SELF_REPORT, GateStatus.ACTION)
    assert citations == (Citation("s0", 1, 3), Citation("s1", 1, 2))


@pytest.mark.parametrize(
    "text",
    [
        "I can read the file for you.",
        "I could read the catalogue.",
        "I'd read the file for you.",
        "I'll look it up.",
        "I will check the logs.",
        "We can search the layers.",
        "I would have checked it.",
    ],
)
def test_modal_right_after_the_pronoun_is_never_a_self_report(text: str) -> None:
    assert classify(text)[0] == GateClass.RECOMMENDATION


@pytest.mark.parametrize(
    "text",
    [
        "I checked the three config files.",
        "I searched the catalogue.",
        "I've looked up the layer dates.",
        "I called the permalink tool.",
        "I have already queried the geocoder.",
        "We reviewed the playbook.",
    ],
)
def test_first_person_work_reports_are_self_reports(text: str) -> None:
    assert classify(text)[0] == GateClass.SELF_REPORT


def test_disclaimer_before_recommendation() -> None:
    text = "I can help you locate datasets, but I can't certify an official deforestation rate."
    assert classify(text)[0] == GateClass.DISCLAIMER
    assert gate_one(text, make_corpus("x"))[1] == GateStatus.TRACEABLE


@pytest.mark.parametrize(
    "text",
    [
        DISCLAIMER_81,
        "This view is not an official statistic.",
        "Coverage is not guaranteed for every year.",
        "I'm unable to confirm the cause.",
        "Please consult an expert before acting on it.",
    ],
)
def test_disclaimers_are_traceable_without_any_anchor(text: str) -> None:
    klass, found = classify(text)
    assert klass == GateClass.DISCLAIMER and found == ()
    assert gate_one(text, make_corpus("unrelated source text"))[1] == GateStatus.TRACEABLE


def test_alabama_bounding_box_stays_traceable_anchors_beat_modal_phrasing() -> None:
    klass, status, _ = gate_one(BBOX, make_corpus('geocode_region({"q": "Alabama"})\n{"west": -88.47}'))
    assert (klass, status) == (GateClass.ANCHORED_ASSERTION, GateStatus.TRACEABLE)


def test_offer_without_strong_anchors_is_agent_voice_and_question_mark_is_a_question() -> None:
    offer = "If you want, tell me whether you want (A) statewide Alabama or (B) a specific county."
    # "Alabama" is a proper-name anchor, a weak one: a name alone does not turn an offer into a claim
    assert classify(offer) == (GateClass.RECOMMENDATION, ("alabama",))
    assert classify("If you want, I can book 2 seats for Mia Li.")[0] == GateClass.ANCHORED_ASSERTION
    assert classify("Should I add MODIS_Terra_L3 as well?")[0] == GateClass.QUESTION
    assert classify('Did you mean "Mobile County?"')[0] == GateClass.QUESTION


def test_45_character_layer_id_sentence_is_not_filed_as_quoted() -> None:
    source = f'worldview_permalink_tool({{"layers": [{{"id": "{LAYER_ID}"}}], "t": "2015-01-01"}})\n{{"url": "..."}}'
    sentence = f"The permalink loads {LAYER_ID} at the 2015 timestamp, to compare with a later year."
    block = difflib.SequenceMatcher(None, sentence, source, autojunk=False).find_longest_match(
        0, len(sentence), 0, len(source)
    )
    assert len(LAYER_ID) == 45 and block.size >= DEFAULT_PARAMS.quote_min_chars  # length alone would quote it
    assert block.size / len(sentence) < DEFAULT_PARAMS.quote_min_fraction
    assert best_verbatim(sentence, make_corpus(source)) is None  # the ρ guard
    assert gate_one(sentence, make_corpus(source))[:2] == (GateClass.ANCHORED_ASSERTION, GateStatus.TRACEABLE)


def test_verbatim_sentence_is_quoted_with_its_line_span() -> None:
    sentence = "Comparing two annual maps shows where the class changed."
    source = 'read_file({"path": "notes.md"})\n# Notes\n\n' + sentence
    klass, status, citations = gate_one(sentence, make_corpus("unrelated", source))
    assert (klass, status) == (GateClass.GENERIC_ASSERTION, GateStatus.QUOTED)
    assert citations == (Citation("s1", 4, 4, sentence),)


def test_quote_spanning_lines_reports_both_lines() -> None:
    source = "header\nthe first half of a long quoted sentence\ncontinues right here on the next line\ntail"
    sentence = "the first half of a long quoted sentence\ncontinues right here"
    assert best_verbatim(sentence, make_corpus(source)) == Citation("s0", 2, 3, sentence)


def test_ties_go_to_the_lowest_ordinal_and_longest_block_wins() -> None:
    sentence = "The annual land cover product assigns one class per pixel per year."
    corpus = make_corpus("x " + sentence, sentence + " y", "x " + sentence[:-1])
    expected = Citation("s0", 1, 1, sentence)
    assert best_verbatim(sentence, corpus) == best_verbatim_difflib(sentence, corpus) == expected


def test_repetitive_source_takes_the_window_path_and_still_agrees_with_difflib() -> None:
    corpus = make_corpus("xy " * 2000, "ab " * 3000)  # every sampled k-gram occurs thousands of times
    for sentence in ("ab " * 50 + "c " + "ab " * 30, "ba " * 20 + "c " + "ab " * 20 + "c " + "ba " * 20):
        fast = best_verbatim(sentence, corpus)
        assert fast == best_verbatim_difflib(sentence, corpus)
    # the block "ab ab … ab " is cited without its trailing space
    assert best_verbatim("ab " * 50 + "c " + "ab " * 30, corpus) == Citation("s1", 1, 1, ("ab " * 50).strip())


def test_threshold_uses_the_same_float_comparison_as_the_definition() -> None:
    # 0.6 * 5 == 3.0000000000000004, so ceil() says 4 while 3 / 5 >= 0.6 holds: a naive T misses this quote.
    params = DEFAULT_PARAMS.override({"quote_min_chars": 1, "quote_min_fraction": 0.6})
    assert quote_threshold(5, params) == 3
    corpus = make_corpus("zz abc,zz")
    fast, slow = best_verbatim("abc x", corpus, params), best_verbatim_difflib("abc x", corpus, params)
    assert fast == slow == Citation("s0", 1, 1, "abc")


def test_no_evidence_means_unanchored_even_with_anchors() -> None:
    klass, status, _ = gate_one("The layer is MODIS_Combined_L3.", Corpus(units=()))
    assert (klass, status) == (GateClass.ANCHORED_ASSERTION, GateStatus.UNANCHORED)


def test_index_from_another_corpus_is_rejected() -> None:
    with pytest.raises(ValueError):
        gate_turn(make_corpus("a"), segment_response("Hi."), index=VerbatimIndex(make_corpus("b")))


def test_summary_line_omits_zero_categories_and_keeps_the_sum() -> None:
    summary = GateSummary(sources=8, sentences=13, traceable=3, quoted=1, agent_voice=1, action=0, unanchored=8)
    assert summary.line() == (
        "8 sources · 13 sentences: 3 you can trace, 1 quoted directly, 1 question or offer, 8 nothing specific to check"
    )
    with_action = GateSummary(sources=1, sentences=2, traceable=0, quoted=0, agent_voice=0, action=2, unanchored=0)
    assert with_action.line() == "1 source · 2 sentences: 2 reports of actions"
    one_action = GateSummary(sources=1, sentences=1, traceable=0, quoted=0, agent_voice=0, action=1, unanchored=0)
    assert one_action.line() == "1 source · 1 sentence: 1 report of an action"


def test_report_to_dict_is_the_stable_contract() -> None:
    claim = "Comparing two annual maps shows where the class changed, not why."
    corpus = make_corpus("tool({})\n" + claim)
    segments = client_segments("Hello. " + claim, [("a", claim), (None, "Hi?")])
    data = gate_turn(corpus, segments).to_dict()
    assert list(data) == ["summary", "segments"]
    assert list(data["summary"]) == [
        "sources",
        "sentences",
        "traceable",
        "quoted",
        "agent_voice",
        "action",
        "unanchored",
        "line",
    ]
    first = data["segments"][0]
    assert list(first) == ["id", "text", "start", "end", "status", "class", "anchors", "citations"]
    assert (first["id"], first["start"], first["status"]) == ("a", 7, "quoted")
    assert first["class"] == "generic_assertion"
    assert list(first["citations"][0]) == ["source_id", "line_start", "line_end", "quote"]
    assert data["segments"][1]["start"] == -1 and data["segments"][1]["status"] == "agent_voice"
    json.dumps(data)


# ---- the §8.1-shaped fixture ---------------------------------------------------------------------------


def load_fixture() -> tuple[StoredTurn, dict[str, Any]]:
    turn = StoredTurn.model_validate_json((FIXTURES / "eo_worldview_turn.json").read_text(encoding="utf-8"))
    expected = json.loads((FIXTURES / "eo_worldview_turn.expected.json").read_text(encoding="utf-8"))
    return turn, expected


WHOLE = Params(instructions_as_rules=False)  # the fixture was built for the seed's corpus: the prompt one source


def test_fixture_eo_worldview_gates_exactly_as_constructed() -> None:
    turn, expected = load_fixture()
    corpus = build_corpus(turn, WHOLE)
    report = gate_turn(corpus, segment_response(turn.response))
    assert [u.layer for u in corpus.units] == [Layer.TOOLS] * 5 + [Layer.INSTRUCTIONS] + [Layer.HISTORY] * 2
    got = {g.segment.id: {"status": g.status.value, "class": g.klass.value} for g in report.segments}
    assert got == expected["segments"]
    assert report.summary.to_dict() == expected["summary"]
    assert report.summary.line().startswith("8 sources · 13 sentences: ")
    by_id = {g.segment.id: g for g in report.segments}
    for seg_id, quote in expected["quoted"].items():
        assert by_id[seg_id].citations == (Citation(**quote),)
    for seg_id, sources in expected["action_citations"].items():
        assert [c.source_id for c in by_id[seg_id].citations] == sources


def test_fixture_has_two_sources_over_the_700_token_window_and_the_prompt_rule_near_line_64() -> None:
    turn, _ = load_fixture()
    corpus = build_corpus(turn, WHOLE)
    large = [u.id for u in corpus.units if len(u.text) >= 6000]
    assert large == ["s3", "s5"] and all(corpus.by_id(i).evidence.tokens > 1300 for i in large)
    assert all(u.evidence.tokens < 700 and len(u.text) < 1500 for u in corpus.units if u.id not in large)
    lines = corpus.by_id("s5").lines
    at = lines.index("## Non-authoritative communication")
    assert 55 <= at + 1 <= 70
    assert lines[at + 1 : at + 3] == [
        "- Use neutral language; avoid authoritative framing.",
        "- Always include a non-authoritative disclaimer in the user-facing narrative.",
    ]
    assert f'\\"layer_id\\": \\"{LAYER_ID}\\"' in corpus.by_id("s0").text
    assert "showing the MODIS annual land cover classification (IGBP)" in corpus.by_id("s7").text


# ---- properties ---------------------------------------------------------------------------------------

_ALPHABET = st.sampled_from(["a", "b", " ", "c", ".", "\n", "MODIS", "QC_Day", " 30.1", "I read ", "?", "I can "])
_TEXT = st.lists(_ALPHABET, max_size=60).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(_TEXT, max_size=5), st.lists(_TEXT, max_size=8), st.booleans())
def test_gating_accounts_for_every_sentence(sources: list[str], pieces: list[str], client: bool) -> None:
    corpus = make_corpus(*sources)
    response = " ".join(pieces) or "x"
    segments: tuple[Segment, ...] = (
        client_segments(response, [(None, p) for p in pieces]) if client else segment_response(response)
    )
    report = gate_turn(corpus, segments)
    s = report.summary
    assert [g.segment for g in report.segments] == list(segments)
    assert s.traceable + s.quoted + s.agent_voice + s.action + s.unanchored == s.sentences == len(segments)
    assert s.sources == len(corpus.units)
    assert sum(int(p.split(" ")[0]) for p in s.line().partition(": ")[2].split(", ") if p) == s.sentences


@st.composite
def _sentence_and_sources(draw: st.DrawFn) -> tuple[str, list[str]]:
    alphabet = draw(st.sampled_from(["ab", "abc \n", "abcdefghijklmnop .,\n"]))
    chars = st.text(alphabet=alphabet, max_size=400)
    sources = draw(st.lists(chars, min_size=1, max_size=4))
    donor = draw(st.sampled_from(sources))
    start = draw(st.integers(0, len(donor)))
    piece = donor[start : start + draw(st.integers(0, 150))]
    prefix = draw(st.text(alphabet=alphabet, max_size=40))
    suffix = draw(st.text(alphabet=alphabet, max_size=60))
    return prefix + piece + suffix, sources


@settings(max_examples=300, deadline=None)
@given(_sentence_and_sources(), st.sampled_from([1, 5, 12, 13, 40]), st.sampled_from([0.1, 0.5, 0.6, 0.95, 1.0]))
def test_best_verbatim_agrees_with_difflib(case: tuple[str, list[str]], min_chars: int, fraction: float) -> None:
    sentence, sources = case
    corpus = make_corpus(*sources)
    params = DEFAULT_PARAMS.override({"quote_min_chars": min_chars, "quote_min_fraction": fraction})
    fast = best_verbatim(sentence, VerbatimIndex(corpus), params)
    slow = best_verbatim_difflib(sentence, corpus, params)
    assert (fast is None) == (slow is None)
    assert fast == slow  # same source, same block, same line span


# ---- BestVerbatim: word boundaries and the folded reading ------------------------------------------------

PARCEL = "Please drop the parcel off by 2025-03-18 at the depot on Main Street, before noon."


def test_quote_starts_and_ends_on_word_boundaries() -> None:
    # the longest common block starts mid-word in the sentence ("Airdrop" / "drop"): it is trimmed
    sentence = "Airdrop the parcel off by 2025-03-18 at the depot on Main Street, or call us."
    block = difflib.SequenceMatcher(None, sentence.lower(), PARCEL.lower(), autojunk=False).find_longest_match(
        0, len(sentence), 0, len(PARCEL)
    )
    assert sentence[block.a : block.a + block.size].startswith("drop")  # what the seed would have quoted
    got = best_verbatim(sentence, make_corpus(PARCEL))
    assert got == best_verbatim_difflib(sentence, make_corpus(PARCEL))
    assert got == Citation("s0", 1, 1, "the parcel off by 2025-03-18 at the depot on Main Street")


def test_a_quote_never_ends_mid_word() -> None:
    sentence = "Drop the parcel off by 2025-03-18 at the depot on Main Streets in town."
    got = best_verbatim(sentence, make_corpus(PARCEL))
    assert got is not None and got.quote is not None
    assert got.quote.endswith("Main")  # "Street" vs "Streets": the partial word is dropped
    assert got.quote.startswith("drop")  # case folded on both sides; the source's own text is shown


def test_amounts_written_two_ways_are_quoted_with_the_source_text() -> None:
    source = 'get_refund({"id": "X1"})\nThe refund of 1234.50 USD for 3 passengers was issued to the card ending 9448.'
    sentence = "The refund of $1,234.50 for 3 passengers was issued to the card ending 9448."
    assert best_verbatim_difflib(sentence, make_corpus(source), DEFAULT_PARAMS) is not None
    got = best_verbatim(sentence, make_corpus(source))
    assert got == Citation("s0", 2, 2, "The refund of 1234.50 USD for 3 passengers was issued to the card ending 9448.")
    # and the other way round, with a zero fraction and a code written first
    other = best_verbatim(
        "The refund of USD 1,234.50 for 3 passengers was issued to the card ending 9448.", make_corpus(source)
    )
    assert other == got
    # a different amount is not the same text
    assert best_verbatim("The refund of $1,234.60 for 3 passengers was issued.", make_corpus(source)) is None


def test_a_line_break_in_the_source_reads_as_a_space() -> None:
    source = "header\nThe permalink loads the annual land cover layer\nfor the 2015 timestamp.\ntail"
    sentence = "The permalink loads the annual land cover layer for the 2015 timestamp."
    assert best_verbatim(sentence, make_corpus(source)) == Citation(
        "s0", 2, 3, "The permalink loads the annual land cover layer\nfor the 2015 timestamp."
    )


# ---- the new anchor groups on the seed's own fixture (§8.1) ---------------------------------------------


def test_fixture_tally_is_unchanged_by_the_agent_groups_and_these_anchors_change() -> None:
    """§8.1's tally counts statuses; the agent groups add anchors to five sentences and change no status:
    r0 (a self-report: "Worldview", "Alabama" are names), r1 (a `Layer: …` line), r2 ("2015", a long
    number), r8 ("1–5", a range), r9 ("Alabama"); r11's "Alabama" is a name — a weak anchor — so the
    offer stays agent voice."""
    turn, _ = load_fixture()
    corpus = build_corpus(turn)
    segments = segment_response(turn.response)
    seed = gate_turn(corpus, segments, anchor_set=ANCHOR_SETS["seed"])
    agent = gate_turn(corpus, segments)
    assert seed.summary == agent.summary
    assert [g.status for g in seed.segments] == [g.status for g in agent.segments]
    added = {
        a.segment.id: tuple(x for x in a.anchors if x not in s.anchors)
        for s, a in zip(seed.segments, agent.segments, strict=True)
        if a.anchors != s.anchors
    }
    assert added == {
        "r0": ("worldview", "alabama"),
        "r1": ("layer: modis annual land cover type",),
        "r2": ("2015",),
        "r8": ("1–5",),
        "r9": ("alabama",),
        "r11": ("alabama",),
    }
    assert agent.segments[11].klass == GateClass.RECOMMENDATION


_FOLDING = st.sampled_from(
    ["ab", "Ab", " ", "\n", "$1,234.50", "1234.50 USD", "USD 7", "7 usd", "12,000", "x.", "  ", "Main", "street", ","]
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(_FOLDING, max_size=40).map("".join), min_size=1, max_size=3),
    st.lists(_FOLDING, max_size=30).map("".join),
    st.sampled_from([1, 5, 12, 40]),
    st.sampled_from([0.1, 0.6, 1.0]),
)
def test_best_verbatim_agrees_with_difflib_on_folded_text(
    sources: list[str], sentence: str, min_chars: int, fraction: float
) -> None:
    corpus = make_corpus(*sources)
    params = DEFAULT_PARAMS.override({"quote_min_chars": min_chars, "quote_min_fraction": fraction})
    fast = best_verbatim(sentence, VerbatimIndex(corpus), params)
    assert fast == best_verbatim_difflib(sentence, corpus, params)
    if fast is not None:
        assert fast.quote is not None and fast.quote in corpus.by_id(fast.source_id).text  # the source's own text
        assert fast.quote == fast.quote.strip() and fold(fast.quote).text[:1].isalnum()  # "$1" reads "1 usd"


def test_fixture_against_the_papers_own_tally_with_every_difference_named() -> None:
    """§8.1 prints the free tier of the real turn: "8 sources · 13 sentences: 3 you can trace, 1 quoted directly,
    1 questions or offers, 8 nothing specific to check", and names the three traceable sentences (the layer
    identification, the forest-vs-non-forest procedure, the non-authoritative note). The paper does not print
    the response, so the fixture is written in its shape; this test starts from the paper's tally and moves
    exactly the sentences where the fixture differs, each for a stated reason, under the seed's own anchors and
    under the shipped ones alike."""
    paper = {"traceable": 3, "quoted": 1, "action": 0, "agent_voice": 1, "unanchored": 8}
    moves = [
        # the permalink sentence names MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual, a snake_case identifier
        # §7.2 anchors; the paper's response showed the permalink as a link with nothing specific around it
        ("r2", "unanchored", "traceable"),
        # the bounding box gives decimal coordinates (−88.6, 30.1, …), which §7.2's decimal pattern anchors
        ("r9", "unanchored", "traceable"),
        # "I searched the Worldview layer catalogue …" reports the agent's own action: §7.3's ACTION status,
        # a class the paper's tally has no entry for because its response had no such sentence
        ("r0", "unanchored", "action"),
        # the fixture ends on a question ("Would you like me to add a second year …?") where the paper's
        # 13th sentence carried nothing specific
        ("r12", "unanchored", "agent_voice"),
    ]
    expected = dict(paper)
    for _, source, target in moves:
        expected[source] -= 1
        expected[target] += 1
    turn, _ = load_fixture()
    corpus = build_corpus(turn)
    segments = segment_response(turn.response)
    for anchor_set in (ANCHOR_SETS["seed"], None):
        report = gate_turn(corpus, segments, anchor_set=anchor_set) if anchor_set else gate_turn(corpus, segments)
        summary = report.summary.to_dict()
        assert {k: summary[k] for k in expected} == expected
        status = {g.segment.id: g.status.value for g in report.segments}
        assert all(status[seg] == target for seg, _, target in moves)
        # the three sentences the paper marks are traceable here too
        assert {status["r1"], status["r8"], status["r10"]} == {"traceable"}
