"""The expected digit from top log-probabilities: ties, one digit, non-digit mass, whitespace, absence."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from estimator.loo.expected_digit import digit_distribution, digit_position, expected_digit
from estimator.seams.llm import LLMRequest, LLMResponse, Message, ScriptedLLM


def lp(p: float) -> float:
    return math.log(p)


@pytest.mark.parametrize(
    ("top", "expected"),
    [
        # a single digit alternative: its own value, whatever its probability
        ([{"7": lp(0.2)}], 7.0),
        ([{"3": lp(0.9), "Yes": lp(0.1)}], 3.0),
        # a tie between two digits: their mean
        ([{"2": lp(0.4), "8": lp(0.4)}], 5.0),
        # three-way tie
        ([{"1": lp(0.3), "5": lp(0.3), "9": lp(0.3)}], 5.0),
        # non-digit mass is ignored, then the digits are renormalised: 0.3*2 + 0.1*6 over 0.4
        ([{"The": lp(0.6), "2": lp(0.3), "6": lp(0.1)}], (0.3 * 2 + 0.1 * 6) / 0.4),
        # "7" and " 7" are the same digit: masses add (0.3 + 0.3 for 7 against 0.2 for 1)
        ([{"7": lp(0.3), " 7": lp(0.3), "1": lp(0.2)}], (0.6 * 7 + 0.2 * 1) / 0.8),
        # leading whitespace tokens are skipped; the digit alternatives at that position do not count
        ([{"\n": lp(0.7), "9": lp(0.3)}, {"4": lp(0.5), "6": lp(0.5)}], 5.0),
        ([{" ": lp(0.9)}, {"\t": lp(0.8)}, {"2": lp(0.75), "6": lp(0.25)}], 3.0),
        # "0", "10", "7." are not digits 1–9
        ([{"0": lp(0.5), "10": lp(0.2), "7.": lp(0.2), "5": lp(0.1)}], 5.0),
    ],
)
def test_expected_digit_examples(top: list[dict[str, float]], expected: float) -> None:
    value = expected_digit(top)
    assert value is not None
    assert value == pytest.approx(expected)


@pytest.mark.parametrize(
    "top",
    [
        None,
        [],
        [{}],  # the provider reported no alternatives at the digit position
        [{"Yes": lp(0.9), "No": lp(0.1)}],  # the first non-whitespace position has no digit
        [{" ": lp(0.9), "\n": lp(0.1)}],  # nothing but whitespace
        [{"0": lp(0.9), "10": lp(0.1)}],  # digits outside 1–9
        [{"7": -math.inf, "x": lp(0.5)}],  # a digit with zero probability is not present
        [{"The": lp(0.9), "A": lp(0.1)}, {"7": lp(0.9)}],  # a digit after a word is not the judge's digit
    ],
)
def test_no_digit_alternative_is_none(top: list[dict[str, float]] | None) -> None:
    assert expected_digit(top) is None


def test_digit_position_skips_only_leading_whitespace() -> None:
    top = [{" ": lp(0.6), "3": lp(0.4)}, {"\n": lp(0.5), "8": lp(0.4)}, {"5": lp(0.9)}]
    assert digit_position(top) == 2
    assert digit_position([{"5": lp(0.9)}, {" ": lp(0.9)}]) == 0


def test_distribution_is_renormalised_over_present_digits() -> None:
    dist = digit_distribution([{"2": lp(0.1), "4": lp(0.3), "Sure": lp(0.6)}])
    assert dist is not None
    assert set(dist) == {2, 4}
    assert dist[2] == pytest.approx(0.25)
    assert dist[4] == pytest.approx(0.75)


def test_very_small_logprobs_do_not_underflow() -> None:
    # exp(-800) underflows to 0.0; the digits still have a well-defined relative weight
    assert expected_digit([{"3": -800.0, "9": -800.0 + math.log(3)}]) == pytest.approx((3 + 27) / 4)


digits = st.integers(min_value=1, max_value=9)
logprobs = st.floats(min_value=-30.0, max_value=0.0, allow_nan=False)
noise = st.sampled_from(["The", "Yes", "0", "10", "**", "7.", "answer"])


@given(
    st.dictionaries(digits, logprobs, min_size=1), st.dictionaries(noise, logprobs), st.sampled_from(["", " ", "\n"])
)
def test_bounds_and_non_digit_mass_ignored(digit_lps: dict[int, float], other: dict[str, float], pad: str) -> None:
    top = [{**{f"{pad}{d}": v for d, v in digit_lps.items()}, **other}]
    value = expected_digit(top)  # even where a word is the likeliest token, the digit mass alone decides
    assert value is not None
    assert min(digit_lps) - 1e-9 <= value <= max(digit_lps) + 1e-9
    # the same digits without the non-digit alternatives give the same value
    alone = expected_digit([{str(d): v for d, v in digit_lps.items()}])
    assert alone is not None
    assert value == pytest.approx(alone)


@given(digits, st.integers(min_value=2, max_value=9), logprobs)
def test_equal_mass_on_digits_is_their_mean(first: int, count: int, value: float) -> None:
    chosen = sorted({(first + i - 1) % 9 + 1 for i in range(count)})
    top = [{str(d): value for d in chosen}]
    result = expected_digit(top)
    assert result == pytest.approx(sum(chosen) / len(chosen))


@given(digits, logprobs, st.lists(st.sampled_from([" ", "\n", "\t", "  "]), max_size=4))
def test_single_digit_after_whitespace_is_that_digit(digit: int, value: float, spaces: list[str]) -> None:
    top = [{s: 0.0} for s in spaces] + [{str(digit): value, "x": value - 1.0}]
    assert expected_digit(top) == pytest.approx(float(digit))


async def test_a_scripted_judge_returns_top_logprobs() -> None:
    def judge(request: LLMRequest) -> LLMResponse:
        top = [{"6": lp(0.5), "8": lp(0.5)}] if request.top_logprobs else None
        return LLMResponse(text="6", top_logprobs=top)

    llm = ScriptedLLM(judge)
    asked = await llm.complete(LLMRequest(messages=(Message("user", "rate"),), top_logprobs=20))
    plain = await llm.complete(LLMRequest(messages=(Message("user", "rate"),)))
    assert expected_digit(asked.top_logprobs) == pytest.approx(7.0)
    assert plain.top_logprobs is None and expected_digit(plain.top_logprobs) is None
    assert [c.top_logprobs for c in llm.calls] == [20, None]
