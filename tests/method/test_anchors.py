"""Algorithm 2 — anchors, df, discriminative, cov.

Tests are named after the measured failures that forced each guard."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from estimator.corpus.units import Evidence, Layer, Unit
from estimator.free_tier.anchors import (
    ANCHOR_SETS,
    COMPILED,
    STOPWORDS,
    AnchorSet,
    anchor_hits,
    anchors,
    cov,
    df,
    discriminative,
    path_like,
)
from estimator.params import DEFAULT_PARAMS


def _unit(i: int, text: str) -> Unit:
    return Unit(
        id=f"s{i}",
        kind="user_tool",
        tool="t",
        label="t",
        text=text,
        ordinal=i,
        layer=Layer.TOOLS,
        evidence=Evidence(digest="d", source="t", tokens=1),
    )


def test_case_sensitive_identifiers_do_not_harvest_load_all_and_each() -> None:
    # An IGNORECASE identifier pattern turned [A-Z][A-Z0-9_]{2,} into "any word of 3+ letters".
    assert anchors("Load all and each of the layers, then read them one by one.") == ()
    assert all(not (p.flags & regex.IGNORECASE) for p in COMPILED)


def test_acronym_exemption_keeps_nasa_modis_lst_igbp() -> None:
    found = anchors("NASA MODIS LST and the IGBP scheme")
    assert found == ("nasa", "modis", "lst", "igbp")


def test_refusal_mentioning_nasa_is_not_left_without_anchors() -> None:
    refusal = "there isn't a single NASA Worldview layer that provides an official deforestation rate"
    assert anchors(refusal) == ("nasa",)


def test_short_lowercase_backticked_word_is_a_word_not_an_identifier() -> None:
    assert anchors("run `load` then `layer_config`") == ("layer_config",)


def test_pathlike_rejects_county_watershed_and_legal_administrative() -> None:
    text = "Pick a county/watershed boundary and check legal/administrative limits."
    assert anchors(text) == ()
    assert not path_like("county/watershed")
    assert not path_like("legal/administrative")


def test_pathlike_keeps_real_paths() -> None:
    text = "See playbooks/land_cover_change.md, data/v2 and src/estimator/free_tier/anchors.py or docs/readme.md."
    found = anchors(text)
    assert found[0] == "playbooks/land_cover_change.md"
    assert {"data/v2", "src/estimator/free_tier/anchors.py", "docs/readme.md"} <= set(found)
    assert "land_cover_change" in found  # every pattern scans the text: the identifier inside the path too


def test_mixed_case_underscore_ids_modis_combined_and_qc_day() -> None:
    found = anchors("Use MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual and mask with QC_Day.")
    assert found == ("modis_combined_l3_igbp_land_cover_type_annual", "qc_day")


def test_camel_case_identifier() -> None:
    assert anchors("call getLayerDates first") == ("getlayerdates",)


def test_alabama_bounding_box_decimals_are_anchors() -> None:
    text = "In practice, I would start with an Alabama bounding box: west −88.6, south 30.1, east −84.9, north 35.1."
    assert anchors(text, anchor_set=ANCHOR_SETS["seed"]) == ("88.6", "30.1", "84.9", "35.1")
    # the agent groups add the place name (a proper name after a lower-case word) as a weak anchor:
    # it marks the sentence as specific but is left out of the presence detector's anchors
    assert anchors(text, weak=True) == ("alabama", "88.6", "30.1", "84.9", "35.1")
    assert anchors(text) == ("88.6", "30.1", "84.9", "35.1")


def test_dates_versions_degrees_and_units() -> None:
    found = anchors("At 2015-01-01 the v6.1 product covers 500 km at 45° resolution.")
    assert found == ("2015-01-01", "v6.1", "500 km", "45°")


def test_unit_group_is_case_insensitive_but_nothing_else() -> None:
    assert anchors("a 12 KM swath and a 3 GB file") == ("12 km", "3 gb")


def test_stopwords_and_min_anchor_len() -> None:
    assert anchors("the `json` and `id` and `name` fields, plus `ab`") == ()
    assert {"json", "id", "name", "path", "file"} <= STOPWORDS
    assert anchors("`abc_d`", DEFAULT_PARAMS.override({"min_anchor_len": 6})) == ()


def test_dedup_preserves_order_of_appearance() -> None:
    found = anchors("QC_Day then MODIS then QC_Day then 2015-01-01 then MODIS")
    assert found == ("qc_day", "modis", "2015-01-01")


def test_regex_timeout_on_hostile_input_returns_without_raising() -> None:
    hostile = [
        "a/" + "." * 50_000,
        "x_" * 25_000,
        ("aB" * 10 + "_") * 2_300,
        "`" + "a" * 50_000,
        "1." * 25_000,
        " ".join(["a/b"] * 12_500),
    ]
    for text in hostile:
        # Returns (each pattern is cut off by its timeout) and yields only well-formed anchors.
        result = anchors(text)
        assert isinstance(result, tuple)
        assert all(isinstance(a, str) and len(a) >= DEFAULT_PARAMS.min_anchor_len for a in result)


def test_pattern_that_times_out_is_skipped_not_raised() -> None:
    text = " ".join(["MODIS_Combined_L3"] * 2_500)  # 45k characters
    assert anchors(text) == ("modis_combined_l3",)
    # A timeout far below what a 45k-character scan needs: the pattern is skipped, nothing raises.
    assert anchors(text, DEFAULT_PARAMS.override({"regex_timeout_seconds": 1e-7})) == ()


def test_df_counts_units_through_normalisation() -> None:
    units = [_unit(0, '{\\"layer_id\\": \\"QC_Day\\"}'), _unit(1, "mask with qc_day"), _unit(2, "nothing")]
    assert df("qc_day", units) == 2
    assert df('"layer_id": "qc_day"', units) == 1  # JSON escapes are decoded by ν


def test_discriminative_drops_anchor_carried_by_too_many_sources() -> None:
    units = [_unit(i, f"MODIS source {i}" + (" QC_Day" if i == 0 else "")) for i in range(5)]
    # ceil(0.8 * 5) = 4: "modis" is in all 5 sources, "qc_day" in one
    assert discriminative(("modis", "qc_day"), units) == ("qc_day",)
    everything = DEFAULT_PARAMS.override({"discriminative_df_fraction": 1.0})
    assert discriminative(("modis", "qc_day"), units, everything) == ("modis", "qc_day")


def test_cov_fraction_and_empty_set_is_zero() -> None:
    assert cov((), "anything at all") == 0.0
    assert cov(("modis", "qc_day"), "The MODIS layer") == 0.5
    assert cov(("modis", "qc_day"), "MODIS with QC_Day") == 1.0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_anchors_are_lowercase_unique_and_long_enough(text: str) -> None:
    found = anchors(text)
    assert len(found) == len(set(found))
    for token in found:
        assert token == token.lower()
        assert len(token) >= DEFAULT_PARAMS.min_anchor_len
        assert token not in STOPWORDS
        assert path_like(token)


def test_percentage_followed_by_space_is_an_anchor() -> None:
    # §7.2's unit group ends in \b, which can never hold after "%" followed by a space or the end:
    # "50% cloud cover" carried no anchor. The pattern accepts the end of a "%" as a boundary.
    assert "50%" in anchors("Cloud cover was 50% over the scene.")
    assert "12.5%" in anchors("The error was 12.5%")


# ---- the agent pattern groups: one table per group, with cases that must not anchor -------------------


def group_tokens(text: str, group: str) -> tuple[str, ...]:
    """The anchors of ``text`` that ``group`` found (through the whole of Algorithm 2)."""
    return tuple(h.token for h in anchor_hits(text) if h.group == group)


def test_seed_set_is_the_seed_s_nine_patterns_and_the_default_adds_the_agent_groups() -> None:
    seed = ANCHOR_SETS["seed"]
    assert [g.name for g in seed.groups] == [
        "backticked",
        "path",
        "allcaps",
        "underscore_identifier",
        "camel_case",
        "quantity_unit",
        "degrees",
        "iso_date",
        "version_decimal",
    ]
    assert [g.name for g in ANCHOR_SETS["agent"].groups[:9]] == [g.name for g in seed.groups]
    assert {g.name for g in ANCHOR_SETS["agent"].groups[9:]} == {
        "currency",
        "clock_time",
        "natural_date",
        "count",
        "range",
        "digit_code",
        "long_number",
        "email",
        "url",
        "phone",
        "percentage",
        "key_value",
        "list_item_name",
        "service_tier",
        "proper_name",
        "currency_intl",
        "clock_time_intl",
        "natural_date_intl",
        "count_intl",
        "seat_or_gate",
        "dashed_number",
    }
    # the seed's set misses what the issue lists; the default set does not
    for text in ("Economy Price: $121", "Seats: 12", "- **Insurance:** No"):
        assert anchor_hits(text, anchor_set=seed) == ()
        assert anchor_hits(text) != ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The total is $1,234.50 for 3 passengers.", ("$1,234.50",)),
        ("Your refund of 286 USD will arrive soon.", ("286 usd",)),
        ("A fee of €12 applies.", ("€12",)),
        ("Charged USD 1,000 today.", ("usd 1,000",)),
        ("- Price: $186", ("$186",)),
        ("It costs £1,234 in total.", ("£1,234",)),
        # must not anchor
        ("The $ sign and the USD code alone.", ()),
        ("Prices are in dollars.", ()),
        ("Only $5 left.", ()),  # shorter than the minimum anchor length (a guard of the seed)
        ("Pay with $x.", ()),
    ],
)
def test_currency_group(text: str, expected: tuple[str, ...]) -> None:
    assert group_tokens(text, "currency") == expected


def test_currency_amount_absorbs_its_decimal_and_code() -> None:
    # before: "$1,234.50" anchored only "234.50", "286 USD" only "usd"
    assert anchors("The total is $1,234.50.", anchor_set=ANCHOR_SETS["seed"]) == ("234.50",)
    assert anchors("The total is $1,234.50.") == ("$1,234.50",)
    assert anchors("A refund of 286 USD.") == ("286 usd",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It departs at 06:00 AM EST.", ("06:00 am est",)),
        ("Arrival at 19:00.", ("19:00",)),
        ("- Arrival: 03:00+1 EST", ("03:00+1 est",)),
        ("Boarding closes at 6 PM.", ("6 pm",)),
        ("Check-in opens at 7:45 a.m.", ("7:45 a.m",)),
        # must not anchor
        ("A ratio of 3:1 is fine.", ()),
        ("The score was 25:00 and 12:75.", ()),
        ("I am here to help.", ()),
    ],
)
def test_clock_time_group(text: str, expected: tuple[str, ...]) -> None:
    assert group_tokens(text, "clock_time") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The flight is on May 26, 2024.", ("may 26, 2024",)),
        ("It leaves on 26 May.", ("26 may",)),
        ("Until the 3rd of June 2025 only.", ("3rd of june 2025",)),
        ("Your card expires in March 2027.", ("march 2027",)),
        ("on Sept. 4", ("sept. 4",)),
        # must not anchor
        ("We can rebook you next Tuesday.", ()),
        ("Flights in May are busy.", ()),
        ("May I help you with 2 bags?", ()),
    ],
)
def test_natural_date_group(text: str, expected: tuple[str, ...]) -> None:
    assert group_tokens(text, "natural_date") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The booking is for 3 passengers.", ("3 passengers",)),
        ("The aircraft has 12 seats left.", ("12 seats",)),
        ("You have 2 checked bags.", ("2 checked bags",)),
        ("You get 4 free checked bags.", ("4 free checked bags",)),
        ("Two checked bags included.", ("two checked bags",)),
        ("It takes 5-7 business days.", ("5-7 business days",)),
        ("Refunds take 5 to 7 business days.", ("5 to 7 business days",)),
        # must not anchor
        ("Choose one of these flights.", ()),
        ("Flight 2 departs later.", ()),
        ("On 2024-05-19 flights were full.", ()),
        ("Several passengers asked.", ()),
    ],
)
def test_count_group(text: str, expected: tuple[str, ...]) -> None:
    assert group_tokens(text, "count") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Group classes 1–5 as forest.", ("1–5",)),
        ("Expect 10-20 minutes of delay", ()),  # a count with a noun takes the whole phrase
        ("between 100 to 200", ("100 to 200",)),
        # must not anchor
        ("On 2024-05-19 at noon.", ()),  # an ISO date is not two ranges
        ("COVID-19 rules apply.", ()),
        ("The trip is one-way.", ()),
    ],
)
def test_range_group(text: str, expected: tuple[str, ...]) -> None:
    assert group_tokens(text, "range") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Your booking code is 5XR2KQ.", ("5xr2kq",)),
        ("- 4NQLHD", ("4nqlhd",)),
        # must not anchor
        ("It is the 3rd time.", ()),
        ("A 2FA code was sent.", ()),  # shorter than five characters
        ("the 10am slot", ()),
    ],
)
def test_digit_code_group(text: str, expected: tuple[str, ...]) -> None:
    assert group_tokens(text, "digit_code") == expected


def test_booking_and_record_codes_in_capitals_were_already_anchors() -> None:
    assert anchors("Reservation MDCLVA on flight HAT043.", anchor_set=ANCHOR_SETS["seed"]) == ("mdclva", "hat043")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mastercard ending in 9448.", ("9448",)),
        ("Gift card 7091239 has a balance.", ("7091239",)),
        # must not anchor
        ("Pay $2544 now.", ()),  # an amount, not a bare number
        ("On 2024-05-19.", ()),
        ("Only 123 left.", ()),
        ("It is 12.3456 wide.", ()),
    ],
)
def test_long_number_group(text: str, expected: tuple[str, ...]) -> None:
    assert group_tokens(text, "long_number") == expected


@pytest.mark.parametrize(
    ("group", "text", "expected"),
    [
        ("email", "Write to help.desk@example.co.uk today.", ("help.desk@example.co.uk",)),
        ("email", "Mention @support in the chat.", ()),
        ("email", "Use a@b here.", ()),
        ("url", "See https://example.com/help?x=1.", ("https://example.com/help?x=1",)),
        ("url", "Visit www.example.org for details.", ("www.example.org",)),
        ("url", "The http scheme and a www prefix.", ()),
        ("phone", "Call +1 555-123-4567 now.", ("+1 555-123-4567",)),
        ("phone", "Call (555) 123-4567 now.", ("555) 123-4567",)),  # the seed's strip takes the "("
        ("phone", "Order 123 456 items.", ()),
        ("phone", "On 2024-05-19.", ()),
        ("percentage", "A 50 percent discount.", ("50 percent",)),
        ("percentage", "It is 12.5 per cent off.", ("12.5 per cent",)),  # "12.5%" is the seed's unit group's
        ("percentage", "A high percentage of users.", ()),
    ],
)
def test_email_url_phone_percentage_groups(group: str, text: str, expected: tuple[str, ...]) -> None:
    assert group_tokens(text, group) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- **Cabin:** Business", ("cabin: business",)),
        ("- **Insurance:** No", ("insurance: no",)),
        ("Seats: 12", ("seats: 12",)),
        ("Economy Price: $121", ("economy price: $121",)),
        ("1. Reservation ID: 5XR2KQ (Business class)", ("reservation id: 5xr2kq",)),
        ("- **Baggage**: 0 total, 0 non-free", ("baggage: 0 total, 0 non-free",)),
        # must not anchor: a label without a value, a value that is prose, a time's colon
        ("3. **Payment Method:**", ()),
        ("2. **Reservation ID**: The reservation ID of the booking you wish to cancel.", ()),
        ("Note: please send the form by Friday.", ()),
        ("Here's how we can proceed:", ()),
        ("Check-in opens at 7:45 a.m.", ()),
        ("- **Details:** a long value that keeps going well past six words of text", ()),
    ],
)
def test_key_value_group(text: str, expected: tuple[str, ...]) -> None:
    assert group_tokens(text, "key_value") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2. James Kim", ("james kim",)),
        ("- Basic Economy", ("basic economy",)),
        # must not anchor
        ("- Great!", ()),
        ("3. Zoom to the area you care about.", ()),
        ("1. **Upgrade to Business Class:**", ()),
        ("James Kim is travelling.", ()),  # not a list item
    ],
)
def test_list_item_name_group(text: str, expected: tuple[str, ...]) -> None:
    assert group_tokens(text, "list_item_name") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The passenger is Mia Li.", ("mia li",)),
        ("You are flying from Newark (EWR) to Los Angeles.", ("newark", "los angeles")),
        ("The ticket is for Ivan Garcia, born in 1990.", ("ivan garcia",)),
        # must not anchor: sentence-initial words, weekdays, short single words (a guard of the seed)
        ("Thank you for waiting.", ()),
        ("We can rebook you next Tuesday.", ()),
        ("It departs from Miami.", ()),
        ("Seattle is rainy.", ()),
        ("I'll check. Please wait.", ()),
    ],
)
def test_proper_name_group(text: str, expected: tuple[str, ...]) -> None:
    assert group_tokens(text, "proper_name") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Your reservation is in basic economy class.", ("basic economy",)),
        ("As a gold member, the bags are free.", ("gold member",)),
        ("The flights are in business class.", ("business class",)),
        ("You are on the premium plan.", ("premium plan",)),
        # must not anchor
        ("For the first time, thanks.", ()),
        ("Basic questions are welcome.", ()),
        ("Business as usual.", ()),
    ],
)
def test_service_tier_group(text: str, expected: tuple[str, ...]) -> None:
    assert group_tokens(text, "service_tier") == expected


def test_weak_groups_are_names_tiers_and_whole_lines() -> None:
    weak = {g.name for g in ANCHOR_SETS["agent"].groups if g.weak}
    assert weak == {"proper_name", "service_tier", "key_value", "list_item_name"}
    # a key: value line is weak as a whole, its value is a strong anchor of its own group
    assert anchors("- Economy Price: $121", weak=True) == ("economy price: $121", "$121")
    assert anchors("- Economy Price: $121") == ("$121",)
    text = "Book it for Mia Li in business class at $1,234."
    assert {h.token: h.weak for h in anchor_hits(text)} == {"mia li": True, "business class": True, "$1,234": False}
    # the presence detector (the probe's cov) uses the strong anchors only
    assert anchors(text) == ("$1,234",)
    assert anchors(text, weak=True) == ("mia li", "business class", "$1,234")


def test_new_groups_keep_the_seed_guards() -> None:
    # stop-words, short alphabetic words and path-likeness apply to every group's token
    assert anchors("Only $5 and 2 id and Ann") == ()
    assert anchors("Pick a county/watershed boundary for Ann Lee.", weak=True) == ("ann lee",)
    assert anchors("A 12 KM swath", anchor_set=ANCHOR_SETS["seed"]) == anchors("A 12 KM swath") == ("12 km",)


def _unguarded(name: str) -> AnchorSet:
    """The same groups without their skip conditions: every pattern scans every text."""
    groups = tuple(dataclasses.replace(g, digit=False, trigger=None) for g in ANCHOR_SETS[name].groups)
    return AnchorSet(name, groups, ANCHOR_SETS[name].compiled, tuple(range(len(groups))))


_UNGUARDED = _unguarded("agent")
_PIECES = st.sampled_from(
    [
        "$",
        "1",
        "2,345",
        ".5",
        " ",
        "\n",
        ":",
        "- ",
        "1. ",
        "**",
        "USD",
        "usd",
        "May",
        "26",
        "th",
        "of",
        "June",
        "AM",
        "pm",
        "EST",
        "+1",
        "-",
        "to",
        "seats",
        "two",
        "Two",
        "@",
        "a.b",
        ".com",
        "http",
        "://",
        "www.",
        "%",
        "percent",
        "Mia",
        "Li",
        "the",
        "gold",
        "member",
        "Business",
        "class",
        "5XR2KQ",
        "(",
        ")",
        "555",
        "-1234",
        "Key",
        "Value",
        "x",
        "ö",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_skip_conditions_never_change_the_anchors(text: str) -> None:
    # each group's digit / trigger condition is necessary for a match: skipping changes nothing
    assert anchor_hits(text) == anchor_hits(text, anchor_set=_UNGUARDED)


def test_skip_conditions_never_change_the_anchors_on_the_labelled_sentences() -> None:
    path = Path(__file__).resolve().parents[1] / "data" / "gating" / "labelled.jsonl"
    texts = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(texts) >= 300
    for text in texts:
        assert anchor_hits(text) == anchor_hits(text, anchor_set=_UNGUARDED), text
