"""Normalise and Algorithm 5a (VerifyQuote), named after the failures that forced them."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from estimator.spans.verify import normalise, verify_quote

MIN_QUOTE_LEN = 12


def test_escaped_json_quote_verifies_against_json_in_json_payload() -> None:
    # Stored tool returns carry JSON whose payload is itself a JSON string; a readable quote does not.
    stored = '{"result": "{\\"layergroup\\": \\"Aerosol Albedo\\", \\"id\\": 7}"}'
    check = verify_quote('"layergroup": "Aerosol Albedo"', stored)
    assert check.verified
    assert (check.line_start, check.line_end) == (1, 1)


def test_without_escape_decoding_the_honest_quote_would_not_be_a_substring() -> None:
    stored = '{"result": "{\\"layergroup\\": \\"Aerosol Albedo\\"}"}'
    assert '"layergroup": "Aerosol Albedo"'.casefold() not in stored.casefold()
    assert verify_quote('"layergroup": "Aerosol Albedo"', stored).verified


def test_blank_lines_never_renumber_lines() -> None:
    source = "header line\n\n\nfirst fact is here\n\n   \nsecond fact is here\nend"
    check = verify_quote("second fact is here", source)
    assert check.verified
    assert (check.line_start, check.line_end) == (7, 7)
    spanning = verify_quote("first fact is here second fact", source)
    assert (spanning.line_start, spanning.line_end) == (4, 7)


def test_quote_shorter_than_min_quote_len_never_verifies() -> None:
    source = "the value is 5 km for each pixel of the grid"
    assert not verify_quote("the value", source).verified
    assert not verify_quote("   for each   ", source).verified
    assert verify_quote("the value is 5 km", source).verified


def test_fabricated_quote_does_not_verify() -> None:
    source = "Resolution: 500 m. Temporal coverage: 2001 to present, yearly."
    assert not verify_quote("Resolution: 1 km, updated monthly", source).verified


def test_whitespace_and_case_are_normalised() -> None:
    source = "Always include a NON-AUTHORITATIVE\n   disclaimer in the narrative."
    check = verify_quote("always include a non-authoritative disclaimer", source)
    assert check.verified and (check.line_start, check.line_end) == (1, 2)


def test_literal_backslash_paths_verify_against_escaped_storage() -> None:
    stored = '{"path": "C:\\\\data\\\\modis\\\\lst_day.tif"}'
    assert verify_quote("C:\\data\\modis\\lst_day.tif", stored).verified


def test_long_source_line_search_is_linear_not_quadratic() -> None:
    # The instructions unit holds the whole system prompt; 20k lines must still verify at once.
    lines = [f"rule {i}: keep answer {i} short and neutral" for i in range(20_000)]
    check = verify_quote("rule 19998: keep answer 19998 short", "\n".join(lines))
    assert check.verified and check.line_start == 19_999


# --- properties -------------------------------------------------------------------------------

_plain = st.characters(blacklist_characters="\\", blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc"))
_escape = st.sampled_from(['\\"', "\\n", "\\t", "\\r", "\\/", "\\\\"])
_token = st.one_of(_plain, _plain, _plain, _escape, st.sampled_from(["\n", " "]))


@st.composite
def source_and_substring(draw: st.DrawFn) -> tuple[str, str]:
    tokens = draw(st.lists(_token, min_size=3 * MIN_QUOTE_LEN, max_size=120))
    i = draw(st.integers(0, len(tokens) - 2 * MIN_QUOTE_LEN))
    j = draw(st.integers(i + 2 * MIN_QUOTE_LEN, len(tokens)))
    return "".join(tokens), "".join(tokens[i:j])


@pytest.mark.slow  # property-test volume: 400 generated sources and substrings
@settings(max_examples=400, deadline=None)
@given(source_and_substring())
def test_any_unsplit_substring_verifies_and_its_span_contains_it(pair: tuple[str, str]) -> None:
    source, sub = pair
    assume(len(sub.strip()) >= MIN_QUOTE_LEN and normalise(sub))
    check = verify_quote(sub, source)
    assert check.verified
    assert check.line_start is not None and check.line_end is not None
    window = "\n".join(source.split("\n")[check.line_start - 1 : check.line_end])
    assert normalise(sub) in normalise(window)


@settings(max_examples=400, deadline=None)
@given(st.text(st.one_of(_plain, st.sampled_from(["\\", '"', "n", "t", "/", "N", "\n", " "]))))
def test_normalise_is_idempotent(text: str) -> None:
    once = normalise(text)
    assert normalise(once) == once
