"""Algorithm 2 — anchors, df, discriminative, cov.

Tests are named after the measured failures that forced each guard."""

from __future__ import annotations

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from estimator.anchors import COMPILED, STOPWORDS, anchors, cov, df, discriminative, path_like
from estimator.params import DEFAULT_PARAMS
from estimator.units import Evidence, Layer, Unit


def _unit(i: int, text: str) -> Unit:
    return Unit(id=f"s{i}", kind="user_tool", tool="t", label="t", text=text, ordinal=i, layer=Layer.TOOLS,
                evidence=Evidence(digest="d", source="t", tokens=1))


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
    text = "See playbooks/land_cover_change.md, data/v2 and src/estimator/anchors.py or docs/readme.md."
    found = anchors(text)
    assert found[0] == "playbooks/land_cover_change.md"
    assert {"data/v2", "src/estimator/anchors.py", "docs/readme.md"} <= set(found)
    assert "land_cover_change" in found  # every pattern scans the text: the identifier inside the path too


def test_mixed_case_underscore_ids_modis_combined_and_qc_day() -> None:
    found = anchors("Use MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual and mask with QC_Day.")
    assert found == ("modis_combined_l3_igbp_land_cover_type_annual", "qc_day")


def test_camel_case_identifier() -> None:
    assert anchors("call getLayerDates first") == ("getlayerdates",)


def test_alabama_bounding_box_decimals_are_anchors() -> None:
    text = ("In practice, I would start with an Alabama bounding box: "
            "west −88.6, south 30.1, east −84.9, north 35.1.")
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
