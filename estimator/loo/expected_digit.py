"""§6.2, continuous variant — the expected digit from the judge's top log-probabilities.

The judge answers with one digit 1–9. Where the provider reports the top-k alternatives of each
output token, the digit position carries a distribution over 1–9, and its mean is a continuous
score with fewer ties than the argmax digit, still read from outside the model (black-box).

The digit position is the first output position whose chosen token (the most likely alternative,
as the judge is called at temperature 0) is not whitespace: leading whitespace tokens are skipped.
At that position every alternative whose text, stripped of whitespace, is exactly one digit 1–9
counts (``"7"`` and ``" 7"`` both count for 7, their probabilities added); everything else (other
words, ``"0"``, ``"10"``, punctuation) is ignored, and the digit probabilities are renormalised to
sum to 1. With no digit alternative at that position there is no expected digit: ``None``, never
the argmax in disguise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = ["digit_distribution", "digit_position", "expected_digit"]

DIGITS = tuple(range(1, 10))


def _is_whitespace(token: str) -> bool:
    return token.strip() == ""


def _digit_of(token: str) -> int | None:
    text = token.strip()
    if len(text) == 1 and text in "123456789":
        return int(text)
    return None


def _chosen(alternatives: Mapping[str, float]) -> str | None:
    """The most likely alternative (the token a temperature-0 judge writes); None when empty."""
    best: tuple[float, str] | None = None
    for token, logprob in alternatives.items():
        if math.isnan(logprob):
            continue
        if best is None or logprob > best[0]:
            best = (logprob, token)
    return None if best is None else best[1]


def digit_position(top: Sequence[Mapping[str, float]]) -> int | None:
    """Index of the first position whose chosen token is not whitespace; None when there is none."""
    for index, alternatives in enumerate(top):
        chosen = _chosen(alternatives)
        if chosen is None:
            return None  # the provider reported nothing here: the digit position is unknowable
        if not _is_whitespace(chosen):
            return index
    return None


def digit_distribution(top: Sequence[Mapping[str, float]] | None) -> dict[int, float] | None:
    """Renormalised probabilities of the digits 1–9 present at the digit position (absent digits are
    left out); None when no digit alternative with positive probability is there."""
    if not top:
        return None
    index = digit_position(top)
    if index is None:
        return None
    logprobs: dict[int, list[float]] = {}
    for token, logprob in top[index].items():
        digit = _digit_of(token)
        if digit is None or math.isnan(logprob) or logprob == -math.inf:
            continue
        logprobs.setdefault(digit, []).append(float(logprob))
    if not logprobs:
        return None
    peak = max(max(values) for values in logprobs.values())
    if math.isinf(peak):  # +inf: not a log-probability
        return None
    weights = {d: sum(math.exp(v - peak) for v in values) for d, values in logprobs.items()}
    total = sum(weights.values())
    return {d: w / total for d, w in sorted(weights.items())}


def expected_digit(top: Sequence[Mapping[str, float]] | None) -> float | None:
    """The expected digit over 1–9 at the judge's digit position (see the module docstring)."""
    distribution = digit_distribution(top)
    if distribution is None:
        return None
    value = sum(d * p for d, p in distribution.items())
    return min(9.0, max(1.0, value))  # rounding can step a hair outside [1, 9]
