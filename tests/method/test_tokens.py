"""The approximate tokenizer's count is the sum of its pieces' costs, however it is computed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from estimator.tokens import _PIECE, ApproxTokenizer


def piecewise(text: str) -> int:
    """The definition: every piece of ``_PIECE`` at its cost (words per 4 characters, digits per 3, a mark 1,
    whitespace nothing)."""
    return sum(ApproxTokenizer._cost(m.group()) for m in _PIECE.finditer(text))


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_the_count_is_the_sum_of_the_pieces_costs_for_any_text(text: str) -> None:
    assert ApproxTokenizer().count(text) == piecewise(text)


def test_the_count_of_mixed_text_by_hand() -> None:
    # "Order" 2 · "A" 1 · "-" 1 · "1" 1 · "shipped" 2 · "2025" 2 · "-" 1 · "03" 1 · "," 1 · "ÿé" 1 · "…" 1 · "½" 1
    text = "Order A-1 shipped 2025-03, ÿé … ½"
    assert ApproxTokenizer().count(text) == piecewise(text) == 15
