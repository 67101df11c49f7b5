"""§6.8 / §7.9 — the cost gate: planned calls, tokens, price, truncation warnings, refusal.

Cost is computed from the actual corpus, never a constant. The plan is the worst case the
trace may spend (every source a candidate in round 2, every span check retried), so the
calls a trace makes can never exceed what the gate quoted. With ``repeats`` = k every measurement of
rounds 1 and 2 and of redundancy resolution is k calls (k samples; span checks are made once), and the plan,
its tokens and its price count all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from pydantic import BaseModel, Field, field_serializer

from estimator.corpus.units import Corpus
from estimator.judge import build_judge_request, cut_to_budget
from estimator.params import DEFAULT_PARAMS, Params
from estimator.results.models import QuoteCallsModel
from estimator.results.score import RESULT_CONFIG
from estimator.seams.llm import LLMRequest
from estimator.spans.support import build_support_request, support_body
from estimator.tokens import ApproxTokenizer, Tokenizer


class Pricing(Protocol):
    """Per-token prices of a model, or None when the price is unknown."""

    def price(self, model: str) -> tuple[float, float] | None:
        """(input USD per token, output USD per token)."""
        ...


@dataclass(frozen=True)
class CallPlan:
    """The §7.9 call count, term by term."""

    layers: int
    candidates: int
    span_targets: int
    probe_samples: int = 0
    redundancy: int = 0
    """Redundancy resolution, worst case: keep each candidate alone once (0 when not planned)."""
    redundancy_note: str | None = None
    """Why redundancy resolution is not planned, when it is not."""
    repeats: int = 1
    """Samples per measurement (``Params.repeats``): each mask of rounds 1 and 2 and redundancy is this many calls."""

    @property
    def round1(self) -> int:
        return (self.layers + 2) * self.repeats if self.layers else 0

    @property
    def round2(self) -> int:
        return (self.candidates + 2) * self.repeats if self.candidates else 0

    @property
    def redundancy_calls(self) -> int:
        """Calls of redundancy resolution: each source kept alone (``redundancy``), every sample of it."""
        return self.redundancy * self.repeats

    @property
    def spans(self) -> int:
        return 2 * self.span_targets

    @property
    def probe(self) -> int:
        return 2 * self.probe_samples

    @property
    def ablation(self) -> int:
        """Calls of the scalar (judge or scorer): rounds 1 and 2 and redundancy resolution."""
        return self.round1 + self.round2 + self.redundancy_calls

    @property
    def total(self) -> int:
        return self.ablation + self.spans + self.probe


def plan_calls(corpus: Corpus, params: Params = DEFAULT_PARAMS, *, probe: bool = False, trace: bool = True) -> CallPlan:
    """k·((|L|+2) + (d'+2) + d') + 2d'' (+ 2k' with the probe), at the worst case d' = d'' = min(d, MAX_SOURCES),
    with k = ``params.repeats`` samples per measurement (span checks are not repeated).

    The d' term is redundancy resolution: where a layer grounds the claim but no single source does,
    each candidate is kept alone once. Across layers (the *redundant* verdict) round 2 does not run,
    and keeping each layer, then each of its sources, alone (|L| + d' calls) fits in round 2's share.
    When the whole d' term would pass MAX_CALLS on a trace that fits without it, only what fits is
    planned (and the quote says so) rather than refusing the trace; a source kept alone costs k calls.
    ``trace=False`` plans the probe alone."""
    if not trace:
        return CallPlan(layers=0, candidates=0, span_targets=0, probe_samples=params.causal_samples)
    d = min(len(corpus.units), params.max_sources)
    base = CallPlan(
        layers=len(corpus.layers_present()),
        candidates=d,
        span_targets=d,
        probe_samples=params.causal_samples if probe else 0,
        repeats=params.repeats,
    )
    if d < 2:
        return base
    room = min(d, (params.call_ceiling - base.total) // base.repeats)  # sources that fit, each kept alone k times
    if room >= d or base.total > params.call_ceiling:
        return replace(base, redundancy=d)  # all of it (or refused anyway: the quote names the full need)
    return replace(
        base,
        redundancy=max(room, 0),
        redundancy_note=(
            f"Redundancy resolution is planned for {max(room, 0)} of {d} sources: all of it could need "
            f"{base.total + d * base.repeats} calls, over the ceiling of {params.call_ceiling} "
            f"(MAX_CALLS={params.max_calls} per sample). Where several sources of "
            "one layer each carry the claim, their drops read zero and only that many are kept alone to find which "
            "carry it."
        ),
    )


def round_usd(cost: float | None) -> float | None:
    """A price as a quote's JSON states it: to the millionth of a dollar."""
    return None if cost is None else round(cost, 6)


class CostQuote(BaseModel):
    """The cost gate's quote of one trace (or of the probe alone), before anything is spent.

    One definition for the estimator and its JSON contract (``to_dict()``, what ``provenance quote --json``
    prints and the service stores): ``cost_usd`` is kept unrounded and written to the millionth of a dollar,
    and the sizes of single calls that ``proxy_cost`` prices from (``judge_call_tokens``,
    ``span_check_tokens``) are not written: a quote read back from JSON has them at 0."""

    model_config = RESULT_CONFIG

    model: str
    sources: int
    planned_calls: int = Field(description="worst case; a trace never makes more")
    calls: QuoteCallsModel
    input_tokens: int
    output_tokens: int
    untruncated_corpus_tokens: int
    cost_usd: float | None = Field(description="null when the model's price is unknown")
    warnings: list[str]
    truncated_sources: list[str] = []
    refused: str | None = Field(description="why the cost gate refuses this trace; null when it may run")
    judge_call_tokens: int = Field(0, exclude=True)
    """Input tokens of the largest judge call (s(1), as rendered): every judge call is priced at it."""
    span_check_tokens: tuple[int, ...] = Field((), exclude=True)
    """Input tokens of each source's span check with its retry, largest first."""

    @field_serializer("cost_usd")
    def _rounded(self, cost: float | None) -> float | None:
        return round_usd(cost)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: ``model_dump(mode="json")``."""
        return self.model_dump(mode="json")


# Output tokens per call kind: a judge answers one digit, a span check a short JSON object.
JUDGE_OUTPUT_TOKENS = 2
SUPPORT_OUTPUT_TOKENS = 160
PROMPT_OVERHEAD_TOKENS = 220  # instructions and headings of a probe or scoring prompt (not rendered here)
MESSAGE_OVERHEAD_TOKENS = 4  # a chat message's role and separators, as providers count them


def request_tokens(request: LLMRequest, tok: Tokenizer) -> int:
    """Input tokens of one request: its messages as sent, with each message's overhead."""
    return sum(tok.count(m.content) + MESSAGE_OVERHEAD_TOKENS for m in request.messages)


def judge_call_tokens(corpus: Corpus, claim: str, query: str, params: Params, tok: Tokenizer) -> int:
    """Input tokens of the largest judge call of a trace: the rendered prompt of s(1), every source shown and
    cut to the scoring window (every other mask shows a subset of them)."""
    units = sorted(corpus.units, key=lambda u: u.ordinal)
    shown = [(u.id, u.label, cut_to_budget(u.shown, params.source_token_cap, tok)[0]) for u in units]
    return request_tokens(build_judge_request(claim, query, shown), tok)


def span_check_tokens(corpus: Corpus, claim: str, params: Params, tok: Tokenizer) -> list[int]:
    """Input tokens of each source's span check with its one retry (the rendered prompts), largest first."""
    out = []
    for unit in corpus.units:
        body = support_body(unit, params=params, tokenizer=tok)[0]
        out.append(
            sum(
                request_tokens(
                    build_support_request(claim, unit, params=params, tokenizer=tok, retry=retry, body=body), tok
                )
                for retry in (False, True)
            )
        )
    return sorted(out, reverse=True)


def quote_cost(
    corpus: Corpus,
    claim: str,
    *,
    model: str,
    params: Params = DEFAULT_PARAMS,
    tokenizer: Tokenizer | None = None,
    pricing: Pricing | None = None,
    query: str = "",
    probe: bool = False,
    trace: bool = True,
) -> CostQuote:
    """Price one trace of ``claim`` over ``corpus`` before spending anything. ``trace=False`` prices
    the probe alone (2k regenerations, each capped at CAUSAL_MAX_OUTPUT output tokens)."""
    tok = tokenizer or ApproxTokenizer()
    plan = plan_calls(corpus, params, probe=probe, trace=trace)
    claim_tokens = tok.count(claim)
    query_tokens = tok.count(query)
    untruncated = sum(u.evidence.tokens for u in corpus.units)

    sizes = {u.id: tok.count(u.shown) for u in corpus.units}
    ablation_corpus = sum(min(n, params.source_token_cap) for n in sizes.values())

    # Every judge call at the size of the largest (s(1)); span checks: the largest targets, each with the
    # retry the plan allows for it. Both counted on the prompts as rendered.
    judge_calls = plan.ablation
    per_judge = judge_call_tokens(corpus, claim, query, params, tok)
    per_span = tuple(span_check_tokens(corpus, claim, params, tok))
    input_tokens = judge_calls * per_judge + sum(per_span[: plan.span_targets])
    output_tokens = judge_calls * JUDGE_OUTPUT_TOKENS + plan.spans * SUPPORT_OUTPUT_TOKENS
    if plan.probe:
        input_tokens += plan.probe * (ablation_corpus + query_tokens + PROMPT_OVERHEAD_TOKENS)
        output_tokens += plan.probe * params.causal_max_output

    warnings: list[str] = [plan.redundancy_note] if plan.redundancy_note else []
    truncated = [u.id for u in corpus.units if sizes[u.id] > params.source_token_cap]
    warnings.extend(corpus.warnings)  # every cut and cap of the corpus, each naming its source
    if len(corpus.units) > params.max_sources:
        warnings.append(
            f"{len(corpus.units)} sources exceed MAX_SOURCES={params.max_sources}: round 1 removes whole layers, "
            f"round 2 tests the sources of the grounding layers one by one, at most {params.max_sources}; up to "
            f"{len(corpus.units) - params.max_sources} (the least recent of each layer) may go untested and are "
            "named in the result."
        )
    if corpus.unversioned:
        warnings.append(
            "The agent instructions are the current text, not a snapshot: an edit since this turn cannot be detected."
        )
    warnings.extend(corpus.unscorable_warnings())
    if claim_tokens > 200:
        warnings.append(
            f"The selection is {claim_tokens} tokens and is sent with every call: a long selection "
            "costs proportionally more."
        )

    refused: str | None = None
    if not corpus.units:
        refused = "The turn has no sources: nothing in its context can be traced."
    elif untruncated > params.max_evidence_tokens:
        refused = (
            f"The corpus is {untruncated:,} tokens untruncated, over the MAX_EVIDENCE_TOKENS ceiling of "
            f"{params.max_evidence_tokens:,}. Refused rather than trimmed: a silently reduced corpus gives "
            "a confidently wrong attribution."
        )
    elif plan.total > params.call_ceiling:
        sampled = (
            f" ({plan.repeats} samples of each measurement: repeats={plan.repeats}, so the ceiling is "
            f"{plan.repeats} × {params.max_calls})"
            if plan.repeats > 1
            else ""
        )
        refused = (
            f"The trace would need up to {plan.total} model calls{sampled}, over the MAX_CALLS ceiling of "
            f"{params.call_ceiling}."
        )

    cost: float | None = None
    prices = pricing.price(model) if pricing is not None else None
    if prices is not None:
        cost = input_tokens * prices[0] + output_tokens * prices[1]
    else:
        warnings.append(f"No price is known for model {model!r}: calls and tokens are quoted, cost is unknown.")

    return CostQuote(
        model=model,
        sources=len(corpus.units),
        planned_calls=plan.total,
        calls=QuoteCallsModel(
            round1=plan.round1,
            round2=plan.round2,
            redundancy=plan.redundancy_calls,
            spans=plan.spans,
            probe=plan.probe,
            repeats=plan.repeats,
        ),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        untruncated_corpus_tokens=untruncated,
        cost_usd=cost,
        warnings=warnings,
        truncated_sources=truncated,
        refused=refused,
        judge_call_tokens=per_judge,
        span_check_tokens=per_span,
    )
