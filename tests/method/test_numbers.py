"""The folded reading BestVerbatim compares (numbers.fold): case, spacing, amounts and grouped numbers
read alike on both sides, and every folded span maps back to the original text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimator.free_tier.numbers import fold, literal


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("$1,234.50", "1234.50 usd"),
        ("1234.50 USD", "1234.50 usd"),
        ("USD 1,234.50", "1234.50 usd"),
        ("$350.00", "350 usd"),
        ("€12", "12 eur"),
        ("£1,000", "1000 gbp"),
        ("12,000 seats", "12000 seats"),
        ("Drop  the\nparcel", "drop the parcel"),
        ("a\tb\r\nc", "a b c"),
        # left alone
        ("1234.50", "1234.50"),
        ("2024-05-19", "2024-05-19"),
        ("[100, 200]", "[100, 200]"),
        ("v1.2.3", "v1.2.3"),
        ("the $ sign", "the $ sign"),
        ("1,2,3", "1,2,3"),  # a list, not a number
        # a decimal comma reads as a point; a comma before three digits stays English grouping
        ("1,23", "1.23"),
        ("39,90 €", "39.90 eur"),
        ("1.234,50", "1234.50"),
        ("1\u202f234,50\xa0€", "1234.50 eur"),
        ("189,00 zł", "189 pln"),
        ("CHF 12.50", "12.50 chf"),
        ("3,980円", "3980 jpy"),
        ("２０２５年３月３日", "2025年3月3日"),
        ("in 2 123 cases", "in 2 123 cases"),
    ],
)
def test_fold_table(text: str, folded: str) -> None:
    assert fold(text).text == folded


def test_amount_written_two_ways_reads_the_same() -> None:
    assert fold("The total is $1,234.50.").text == fold("the total is 1234.50 USD.").text


def test_a_folded_span_maps_back_to_the_exact_original_text() -> None:
    text = "Refund: $1,234.50\n  to the card"
    f = fold(text)
    at = f.text.index("1234.50 usd")
    begin, end = f.original_span(at, at + len("1234.50 usd"))
    assert text[begin:end] == "$1,234.50"
    at = f.text.index("to the card")
    begin, end = f.original_span(at, at + len("to the card"))
    assert text[begin:end] == "to the card"
    begin, end = f.original_span(0, len(f.text))
    assert (begin, end) == (0, len(text))


def test_characters_whose_lower_case_is_longer_keep_their_offsets() -> None:
    text = "İstanbul costs $5"
    f = fold(text)
    assert f.text == "İstanbul costs 5 usd"  # "İ".lower() is two characters: left as written
    at = f.text.index("costs")
    assert text[slice(*f.original_span(at, at + 5))] == "costs"


def test_literal_reading_is_the_identity() -> None:
    f = literal("Drop  the $1,234")
    assert f.text == "Drop  the $1,234" and f.original_span(5, 9) == (5, 9)
    assert literal("").text == ""


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["a", "B", " ", "  ", "\n", "$", "1", ",", "234", ".", "50", " USD", "usd", "€", "İ", "\t"]),
        max_size=40,
    ).map("".join)
)
def test_fold_spaces_lowers_and_maps_the_whole_text(text: str) -> None:
    f = fold(text)
    assert "  " not in f.text and "\n" not in f.text and "\t" not in f.text
    assert not any("A" <= c <= "Z" for c in f.text)
    if text:
        assert f.original_span(0, len(f.text)) == (0, len(text))
    for start in range(len(f.text) + 1):
        begin = f.original_start(start)
        assert 0 <= begin <= len(text)
        assert f.original_end(start) <= len(text)
