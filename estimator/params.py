"""Every constant of the method (seed §7.8) in one frozen, validated object.

A request may override any field; the override is validated the same way, so a
bad value is rejected with the field's name rather than silently used.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

MAX_REPEATS = 9
"""The most samples a measurement may take (``repeats``): past it, the median barely moves while the calls
keep growing."""


class Params(BaseModel):
    """The method's constants. Defaults are the values of §7.8; ``failed_calls_as_sources`` and
    ``instructions_as_rules`` are beyond the paper (False is the seed's Algorithm 1 for each)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tau: float = Field(0.5, gt=0, le=8, description="Meaningful-drop threshold (scorer quantisation floor).")
    tau_gamma: float = Field(0.75, gt=0, le=8, description="Internal-knowledge ceiling on total context effect Γ.")
    presence_threshold: float = Field(0.5, gt=0, le=1, description="θ: anchor coverage for 'claim still present'.")
    min_anchors: int = Field(2, ge=1, le=20, description="Below this, presence is a coin flip.")
    min_anchor_len: int = Field(3, ge=1, le=20, description="Shorter tokens carry no provenance.")
    quote_min_chars: int = Field(40, ge=1, le=1000, description="ℓq: verbatim quote absolute length (chars).")
    quote_min_fraction: float = Field(0.6, gt=0, le=1, description="ρ: fraction of the sentence covered.")
    min_quote_len: int = Field(12, ge=1, le=1000, description="Shorter spans match by luck.")
    source_token_cap: int = Field(700, ge=16, le=100_000, description="Per-source budget in ablation tiers.")
    support_token_cap: int = Field(2200, ge=16, le=200_000, description="Per-source budget for the span check.")
    max_sources: int = Field(12, ge=1, le=64, description="Sources ablated individually in one round.")
    history_max_messages: int = Field(12, ge=0, le=200, description="Prior messages considered, newest first.")
    history_tokens_per_message: int = Field(300, ge=8, le=100_000, description="Per-message history budget.")
    max_calls: int = Field(
        48,
        ge=1,
        le=10_000,
        description="Hard per-request ceiling on model calls, per sample: with repeats k a trace may make "
        "k × max_calls (see call_ceiling).",
    )
    max_evidence_tokens: int = Field(
        60_000, ge=1, le=10_000_000, description="Hard ceiling on the UNTRUNCATED corpus, in tokens."
    )
    causal_samples: int = Field(3, ge=1, le=20, description="k: regenerations per side in the probe.")
    repeats: int = Field(
        1,
        ge=1,
        le=MAX_REPEATS,
        description="Samples per measurement: each mask of rounds 1 and 2 and of redundancy resolution is measured "
        "this many times, its score is their median and their spread is reported (span checks are made once). "
        "Every sample is a model call. 1: a single sample, so how much a score varies between calls is unknown.",
    )
    causal_max_output: int = Field(2600, ge=16, le=100_000, description="Token cap per regeneration.")
    concurrency: int = Field(6, ge=1, le=64, description="In-flight model calls per request.")
    rate_max_calls: int = Field(400, ge=1, le=1_000_000, description="Per-user model calls per window.")
    rate_window_seconds: int = Field(300, ge=1, le=86_400, description="Rate-limit window.")
    discriminative_df_fraction: float = Field(
        0.8, gt=0, le=1, description="An anchor carried by more than ⌈f·|C|⌉ sources is not discriminative."
    )
    regex_timeout_seconds: float = Field(0.05, gt=0, le=5, description="Per-match timeout for anchor patterns.")
    failed_calls_as_sources: StrictBool = Field(  # true or false: "no" or 0 is refused, not read as a flag
        True,
        description="A failed or denied tool call's error text is a source (kind tool_error) for what follows it, "
        "and an earlier turn's failed return is a history item. False is the seed's Algorithm 1: failed calls "
        "are excluded from the corpus and disclosed (estimator/corpus/build.py says where that is required).",
    )
    instructions_as_rules: StrictBool = Field(
        True,
        description="The system prompt is split into its rules (headings, list items, paragraphs; at most two "
        "thirds of max_sources), each an instructions source with its own line span in the prompt. False is the "
        "seed's Algorithm 1: the prompt whole, one source (estimator/corpus/rules.py says where that is required).",
    )

    @model_validator(mode="after")
    def _caps_are_ordered(self) -> Params:
        if self.support_token_cap < self.source_token_cap:
            raise ValueError("support_token_cap must be at least source_token_cap (the span check reads more)")
        return self

    @property
    def call_ceiling(self) -> int:
        """The calls one trace may make: MAX_CALLS for each of its ``repeats`` samples. Repeats are bought on
        purpose — the cost gate prices every sample and the budget settles them — so k samples of a trace that
        fits MAX_CALLS once are never refused for being k samples."""
        return self.max_calls * self.repeats

    @classmethod
    def stored(cls, data: dict[str, Any]) -> Params:
        """The params a stored job or result was made with. One written before ``failed_calls_as_sources``
        existed was made with failed calls excluded: read so, its corpus (and its source ids) is rebuilt as it
        was. One written before ``repeats`` existed measured every mask once: it reads as ``repeats=1``. One
        written before ``instructions_as_rules`` existed kept the system prompt whole: read so, its source ids
        do not shift."""
        return cls.model_validate(
            {"failed_calls_as_sources": False, "repeats": 1, "instructions_as_rules": False, **data}
        )

    def override(self, changes: dict[str, Any] | None) -> Params:
        """Return a validated copy with ``changes`` applied (unknown names are rejected)."""
        if not changes:
            return self
        return Params.model_validate({**self.model_dump(), **changes})


DEFAULT_PARAMS = Params()
