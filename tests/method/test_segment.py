"""Default segmentation (markdown-aware sentences) and client-supplied segments."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimator.free_tier.segment import Segment, client_segments, segment_response

SEPARATOR_ROW = re.compile(r"^\s*\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*\|?\s*$")


def texts(response: str) -> list[str]:
    return [s.text for s in segment_response(response)]


def test_sentences_with_stable_ids_and_exact_offsets() -> None:
    response = "First claim here. Second claim! Third one?  Fourth."
    segments = segment_response(response)
    assert [s.text for s in segments] == ["First claim here.", "Second claim!", "Third one?", "Fourth."]
    assert [s.id for s in segments] == ["r0", "r1", "r2", "r3"]
    for s in segments:
        assert response[s.start : s.end] == s.text


def test_abbreviations_e_g_i_e_and_titles_do_not_split() -> None:
    response = (
        "Use a layer, e.g. MODIS or VIIRS, i.e. Terra products. Dr. Smith agreed. See the U.S. Geological Survey."
    )
    assert texts(response) == [
        "Use a layer, e.g. MODIS or VIIRS, i.e. Terra products.",
        "Dr. Smith agreed.",
        "See the U.S. Geological Survey.",
    ]


def test_decimals_and_urls_do_not_split() -> None:
    response = (
        "The box is west −88.6, south 30.1. "
        "Open https://worldview.earthdata.nasa.gov/?v=-88.6,30.1&t=2015-01-01 now. "
        "Version 6.1 is current."
    )
    assert texts(response) == [
        "The box is west −88.6, south 30.1.",
        "Open https://worldview.earthdata.nasa.gov/?v=-88.6,30.1&t=2015-01-01 now.",
        "Version 6.1 is current.",
    ]


def test_lowercase_continuation_does_not_split() -> None:
    response = "Roughly 25 ha. per pixel at 500 m. Next sentence."
    assert texts(response) == ["Roughly 25 ha. per pixel at 500 m.", "Next sentence."]


def test_list_items_never_merge_with_the_next_item() -> None:
    response = "Steps:\n\n1. Open the link\n2. Use the date slider\n- a bullet without a full stop\n- another"
    assert texts(response) == [
        "Steps:",
        "1. Open the link",
        "2. Use the date slider",
        "- a bullet without a full stop",
        "- another",
    ]


def test_list_item_with_two_sentences_splits_into_sentences() -> None:
    assert texts("1. Open the link. Then zoom in.\n2. Toggle the layer.") == [
        "1. Open the link.",
        "Then zoom in.",
        "2. Toggle the layer.",
    ]


def test_list_item_continuation_line_stays_in_its_item() -> None:
    assert texts("- first item\n  continues here.\n- second item") == [
        "- first item\n  continues here.",
        "- second item",
    ]


def test_heading_is_one_segment() -> None:
    assert texts("## Results. Overview\nBody text. More text.") == ["## Results. Overview", "Body text.", "More text."]


def test_table_rows_are_never_torn_apart_and_separator_is_skipped() -> None:
    response = "| Class | Name. Note |\n|---|:---:|\n| 1. | Evergreen. Needleleaf. |\n\nAfter."
    assert texts(response) == ["| Class | Name. Note |", "| 1. | Evergreen. Needleleaf. |", "After."]


def test_fenced_code_block_is_never_torn_apart() -> None:
    block = "```python\nx = 1. \n\ny = 'A. B'\n\n- not a list\n```"
    response = f"Before it.\n\n{block}\n\nAfter it."
    assert texts(response) == ["Before it.", block, "After it."]


def test_unclosed_fence_runs_to_the_end() -> None:
    assert texts("Intro.\n\n~~~\ncode. More code.") == ["Intro.", "~~~\ncode. More code."]


def test_soft_line_break_inside_a_paragraph_is_a_space() -> None:
    response = "This sentence wraps\nonto a second line. Next."
    assert texts(response) == ["This sentence wraps\nonto a second line.", "Next."]


def test_empty_and_blank_response() -> None:
    assert segment_response("") == ()
    assert segment_response("  \n\n \t") == ()


def test_client_segments_are_used_as_given_never_resplit() -> None:
    response = "One. Two. Three."
    segs = client_segments(response, [("a", "One. Two."), (None, "Three.")])
    assert segs == (Segment("a", "One. Two.", 0, 9), Segment("r1", "Three.", 10, 16))


def test_client_segments_search_forward_and_mark_missing() -> None:
    response = "Same. Same. Other."
    segs = client_segments(response, [(None, "Same."), (None, "Rendered **bold**"), (None, "Same.")])
    assert [(s.id, s.start, s.end) for s in segs] == [("r0", 0, 5), ("r1", -1, -1), ("r2", 6, 11)]


_WORDS = st.sampled_from(
    [
        "MODIS",
        "layer",
        "e.g.",
        "30.1",
        "Dr.",
        "the",
        "Alabama",
        "QC_Day",
        "a/b.md",
        "https://x.org/a?b=1",
        "i.e.",
        "etc.",
        "Open",
        "1–5",
        "(A)",
        "**bold**",
    ]
)
_ENDS = st.sampled_from([".", "!", "?", "", ":", "."])


@st.composite
def _markdown(draw: st.DrawFn) -> str:
    blocks: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["para", "list", "heading", "table", "code"]))
        sentence = st.lists(_WORDS, min_size=1, max_size=8).map(" ".join)
        if kind == "para":
            blocks.append(" ".join(s + draw(_ENDS) for s in draw(st.lists(sentence, min_size=1, max_size=4))))
        elif kind == "list":
            items = draw(st.lists(sentence, min_size=1, max_size=4))
            blocks.append("\n".join(f"{i + 1}. {s}." for i, s in enumerate(items)))
        elif kind == "heading":
            blocks.append("## " + draw(sentence))
        elif kind == "table":
            blocks.append("| a | b |\n|---|---|\n| " + draw(sentence) + " | x. Y |")
        else:
            blocks.append("```\n" + draw(sentence) + ". Next.\n```")
    return draw(st.sampled_from(["\n\n", "\n\n\n"])).join(blocks)


@settings(max_examples=150, deadline=None)
@given(_markdown())
def test_segments_cover_the_response_in_order_with_exact_offsets(response: str) -> None:
    segments = segment_response(response)
    assert [s.id for s in segments] == [f"r{i}" for i in range(len(segments))]
    covered = [False] * len(response)
    previous_end = 0
    for s in segments:
        assert response[s.start : s.end] == s.text
        assert s.text == s.text.strip() and s.text
        assert s.start >= previous_end
        previous_end = s.end
        for i in range(s.start, s.end):
            covered[i] = True
    for line_start, line in _lines_with_offsets(response):
        if SEPARATOR_ROW.match(line):
            continue
        for offset, char in enumerate(line):
            if not char.isspace():
                assert covered[line_start + offset], (line, response)


def _lines_with_offsets(response: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    offset = 0
    for raw in response.splitlines(keepends=True):
        out.append((offset, raw.rstrip("\r\n")))
        offset += len(raw)
    return out


@settings(max_examples=100, deadline=None)
@given(_markdown())
def test_code_blocks_and_list_items_stay_whole(response: str) -> None:
    segments = segment_response(response)
    for seg in segments:
        if seg.text.startswith("```"):
            assert seg.text.endswith("```")
        # an item never merges with the next one: no segment spans two list markers at line starts
        item_starts = [ln for ln in seg.text.split("\n")[1:] if ln[:3] in {f"{i}. " for i in range(1, 10)}]
        assert not item_starts or seg.text.startswith("```")


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("Lieferung bis zum 3. März 2025. Danke.", ["Lieferung bis zum 3. März 2025.", "Danke."]),
        ("Ab dem 1. Juli gilt der Tarif. Danke.", ["Ab dem 1. Juli gilt der Tarif.", "Danke."]),
        ("Prüfen Sie z. B. die Rechnung. Danke.", ["Prüfen Sie z. B. die Rechnung.", "Danke."]),
        (
            "Vgl. Abschnitt 3. Die Rechnung Nr. 4711 ist offen.",
            ["Vgl. Abschnitt 3.", "Die Rechnung Nr. 4711 ist offen."],
        ),
        ("Siehe Art. 5 der AGB. Danke.", ["Siehe Art. 5 der AGB.", "Danke."]),
        ("M. Dupont a payé. Voir p. ex. la facture.", ["M. Dupont a payé.", "Voir p. ex. la facture."]),
        ("Adres: ul. Długa 5. Dostawa zajmie ok. 3 dni.", ["Adres: ul. Długa 5.", "Dostawa zajmie ok. 3 dni."]),
        ("Kwota: 189,00 zł. Dziękujemy.", ["Kwota: 189,00 zł.", "Dziękujemy."]),
        (
            "発送しました。合計は3,980円です！ありがとう？はい",
            ["発送しました。", "合計は3,980円です！", "ありがとう？", "はい"],
        ),
        (
            "Η παραγγελία έφτασε. Θέλετε κάτι άλλο; Ευχαριστώ.",
            ["Η παραγγελία έφτασε.", "Θέλετε κάτι άλλο;", "Ευχαριστώ."],
        ),
        # English sentence ends that are abbreviations elsewhere still end a sentence
        ("That is ok. Next one.", ["That is ok.", "Next one."]),
        ("I love modern art. The museum is open.", ["I love modern art.", "The museum is open."]),
        ("The total is 3. Then we stop.", ["The total is 3.", "Then we stop."]),
    ],
)
def test_abbreviations_ordinal_dates_and_sentence_ends_of_other_languages(response: str, expected: list[str]) -> None:
    assert texts(response) == expected
    for segment in segment_response(response):
        assert response[segment.start : segment.end] == segment.text
