"""The JSON contract of a proxy-first trace (``estimator`` proxy): what the proxy ranked, what the hosted
judge measured to confirm it, and what the quote prices on each side.

Leaf models only (no import of ``result_models``, which imports these): a score without information is
NaN in memory and null in JSON (``score.Score``), as everywhere in the results.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from estimator.results.score import RESULT_CONFIG, Score

__all__ = [
    "CONFIRMED_LINE",
    "CONTRADICTED_LINE",
    "CONTRADICTED_WARNING",
    "FALLBACK_LINE",
    "HostedCheckModel",
    "ProxyQuoteModel",
    "ProxyReportModel",
    "RankedModel",
]

CONFIRMED_LINE = "confirmed by the hosted judge"
FALLBACK_LINE = "proxy only — the hosted judge disagreed, full search ran"
CONTRADICTED_LINE = (
    "proxy only — the hosted judge disagreed, and its full search contradicts itself: the local measurement ranks"
)
CONTRADICTED_WARNING = (
    "Unconfirmed: the hosted judge disagreed with the local ranking, and the measurements of its full search "
    "contradict each other (listed under the proxy's disagreements), so they cannot overrule it; the scores "
    "shown are the local model's. Tracing again with --repeats, or with another judge, may settle it."
)


class _Model(BaseModel):
    model_config = RESULT_CONFIG


class RankedModel(_Model):
    """One layer or source of a ranking: its drop (nats for the proxy, digits for the judge) and role."""

    id: str = Field(description="a source id, or a layer name")
    drop: Score
    role: str | None = None


class HostedCheckModel(_Model):
    """What the hosted judge measured to confirm the proxy (digits 1–9), and its span checks."""

    s_all: Score
    s_none: Score
    gamma: Score
    top_layer: str | None = Field(description="the proxy's top layer, whose removal the judge measured")
    top_layer_drop: Score | None = None
    top_source: str | None = Field(description="the proxy's top source, whose removal the judge measured")
    top_source_drop: Score | None = None
    span_checked: list[str] = Field([], description="sources whose span check the hosted judge made")


class ProxyReportModel(_Model):
    """The proxy's ranking, the hosted judge's confirmation and, after a fallback, the judged ranking."""

    proxy_model: str
    proxy_verdict: str
    proxy_layers: list[RankedModel] = Field(description="the proxy's layer drops in nats, largest |drop| first")
    proxy_ranking: list[RankedModel] = Field(description="the proxy's source drops in nats, largest first")
    hosted: HostedCheckModel
    judged_ranking: list[RankedModel] | None = Field(
        None, description="after a fallback: the full judged trace's source drops in digits, largest first"
    )
    disagreements: list[str] = Field(
        [], description="why the hosted judge's measurements disagree with the proxy (empty when confirmed)"
    )
    share_margin: float = Field(description="the stated margin (ProxyParams.share_margin)")
    proxy_seconds: float = Field(description="wall time of the proxy's ranking on the local scorer")
    evaluated_tokens: int | None = Field(
        None, description="prompt tokens the local scorer evaluated (prefix reuse saves the rest), when it reports them"
    )


class ProxyQuoteModel(_Model):
    """The cost gate's two sides of a proxy trace: hosted calls, tokens and price; local passes and seconds;
    and the fallback's worst case."""

    can_score: bool = Field(description="whether a local scoring model or scoring endpoint is configured")
    how: str
    reason: str
    confirm_calls: int = Field(
        description="hosted calls when the proxy is confirmed (worst case: each span check retried once)"
    )
    confirm_input_tokens: int
    confirm_output_tokens: int
    confirm_cost_usd: float | None
    fallback_calls: int = Field(description="hosted calls of the full judged search the fallback runs")
    worst_case_calls: int = Field(
        description="planned: confirmation plus fallback, less what the fallback reuses, capped at MAX_CALLS"
    )
    worst_case_input_tokens: int
    worst_case_output_tokens: int
    worst_case_cost_usd: float | None
    local_passes: int = Field(description="local scoring passes (worst case); free")
    local_prompt_tokens: int = Field(
        description="prompt tokens the local scorer evaluates with prefix reuse (estimate)"
    )
    local_prompt_tokens_without_reuse: int
    local_seconds: float = Field(description="estimated seconds of the local ranking on this machine")
    local_tokens_per_second: float = Field(description="the local scorer's prompt rate the estimate assumes")
    share_margin: float
