from __future__ import annotations

import pytest
from pydantic import ValidationError

from estimator.params import DEFAULT_PARAMS, Params


def test_defaults_are_the_seed_constants() -> None:
    p = DEFAULT_PARAMS
    assert (p.tau, p.tau_gamma, p.presence_threshold) == (0.5, 0.75, 0.5)
    assert (p.min_anchors, p.min_anchor_len, p.quote_min_chars, p.quote_min_fraction) == (2, 3, 40, 0.6)
    assert (p.min_quote_len, p.source_token_cap, p.support_token_cap, p.max_sources) == (12, 700, 2200, 12)
    assert (p.history_max_messages, p.history_tokens_per_message, p.max_calls) == (12, 300, 48)
    assert (p.max_evidence_tokens, p.causal_samples, p.causal_max_output, p.concurrency) == (60_000, 3, 2600, 6)
    assert (p.rate_max_calls, p.rate_window_seconds) == (400, 300)


def test_override_returns_validated_copy_and_leaves_default_alone() -> None:
    p = DEFAULT_PARAMS.override({"tau": 1.0, "max_sources": 4})
    assert (p.tau, p.max_sources) == (1.0, 4)
    assert DEFAULT_PARAMS.tau == 0.5


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"tau": -1}, "tau"),
        ({"max_calls": 0}, "max_calls"),
        ({"nonsense": 1}, "nonsense"),
        ({"quote_min_fraction": 1.5}, "quote_min_fraction"),
    ],
)
def test_bad_override_is_rejected_naming_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        DEFAULT_PARAMS.override(changes)
    assert field in str(info.value)


def test_support_cap_below_source_cap_is_rejected() -> None:
    with pytest.raises(ValidationError, match="support_token_cap"):
        Params(source_token_cap=900, support_token_cap=800)


def test_params_are_frozen() -> None:
    with pytest.raises(ValidationError):
        DEFAULT_PARAMS.tau = 2.0  # type: ignore[misc]
