"""The cost gate's view of a proxy trace: both sides priced before anything is spent.

* Hosted: the confirmation's calls and tokens (four judge calls — under a *redundant* ranking, s(1), s(0)
  and every layer's removal — and the span checks of the top source(s), each retried once at worst), and
  the fallback's worst case — the full judged plan plus what the confirmation measured that the fallback
  cannot reuse (``proxy.planned_proxy_calls``) — with their price.
  The budget reserves the worst case.
* Local: the scoring passes (the ablation plan's count, free) and the prompt tokens they evaluate with the
  prefixes shared (simulated on the planned masks with the same ordering the scorer uses,
  ``proxy_prefix.evaluated``) and without, and the seconds that takes at the stated rate
  (``ProxyParams.local_tokens_per_second``).

Which source the proxy will put on top is not known before it runs, so the span checks are priced at the
largest sources (the worst case). With ``repeats`` = k each of the judge's measurements is k calls (the
confirmation's, the fallback's and the local ranking's alike; span checks once).
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.corpus.units import Corpus, Layer
from estimator.cost import JUDGE_OUTPUT_TOKENS, SUPPORT_OUTPUT_TOKENS, CostQuote, Pricing
from estimator.judge import Mask
from estimator.loo.logprob import build_messages
from estimator.loo.logprob_cost import ScoringCapability
from estimator.loo.rounds import layer_mask
from estimator.params import DEFAULT_PARAMS, Params
from estimator.proxy.confirm import DEFAULT_PROXY_PARAMS, ProxyParams
from estimator.proxy.driver import confirm_judge_calls, planned_proxy_calls
from estimator.proxy.prefix import block_order, evaluated
from estimator.results.models import DumpsAsModel
from estimator.results.proxy import ProxyQuoteModel
from estimator.tokens import ApproxTokenizer, Tokenizer

__all__ = ["ProxyQuote", "local_prompt_tokens", "proxy_capability", "quote_proxy"]

BLOCK_OVERHEAD_TOKENS = 30  # a source's fence, id and label
TAIL_OVERHEAD_TOKENS = 40  # the question's heading and fence, the chat template's turn markers


def proxy_capability(*, local_model: bool, scorer_api_base: str | None) -> ScoringCapability:
    """Whether a proxy can rank: a local model in this process, or a configured scoring endpoint."""
    if local_model:
        return ScoringCapability(True, "in-process", "a local model in this process ranks the sources")
    if scorer_api_base:
        return ScoringCapability(
            True, "completions-echo", "the configured scoring endpoint (/v1/completions with echo) ranks the sources"
        )
    return ScoringCapability(False, "none", "no local scoring model or scoring endpoint is configured")


@dataclass(frozen=True)
class ProxyQuote(DumpsAsModel):
    capability: ScoringCapability
    confirm_calls: int
    confirm_input_tokens: int
    confirm_output_tokens: int
    fallback_calls: int
    worst_case_calls: int
    worst_case_input_tokens: int
    worst_case_output_tokens: int
    local_passes: int
    local_prompt_tokens: int
    local_prompt_tokens_without_reuse: int
    pp: ProxyParams
    prices: tuple[float, float] | None

    def cost(self, input_tokens: int, output_tokens: int) -> float | None:
        if self.prices is None:
            return None
        return round(input_tokens * self.prices[0] + output_tokens * self.prices[1], 6)

    @property
    def local_seconds(self) -> float:
        return round(self.local_prompt_tokens / self.pp.local_tokens_per_second, 1)

    def to_model(self) -> ProxyQuoteModel:
        c = self.capability
        return ProxyQuoteModel(
            can_score=c.can_score,
            how=c.how,
            reason=c.reason,
            confirm_calls=self.confirm_calls,
            confirm_input_tokens=self.confirm_input_tokens,
            confirm_output_tokens=self.confirm_output_tokens,
            confirm_cost_usd=self.cost(self.confirm_input_tokens, self.confirm_output_tokens),
            fallback_calls=self.fallback_calls,
            worst_case_calls=self.worst_case_calls,
            worst_case_input_tokens=self.worst_case_input_tokens,
            worst_case_output_tokens=self.worst_case_output_tokens,
            worst_case_cost_usd=self.cost(self.worst_case_input_tokens, self.worst_case_output_tokens),
            local_passes=self.local_passes,
            local_prompt_tokens=self.local_prompt_tokens,
            local_prompt_tokens_without_reuse=self.local_prompt_tokens_without_reuse,
            local_seconds=self.local_seconds,
            local_tokens_per_second=self.pp.local_tokens_per_second,
            share_margin=self.pp.share_margin,
        )


def _planned_masks(corpus: Corpus, params: Params) -> list[list[Mask]]:
    """The proxy's masks at the worst case, round by round: round 1, every source removed, every source of a
    layer kept alone (each mask once)."""
    everything = frozenset(u.id for u in corpus.units)
    layers = corpus.layers_present()
    rounds: list[list[Mask]] = [[frozenset(), everything, *(layer_mask(corpus, x) for x in layers)]]
    rounds.append([frozenset({u.id}) for u in corpus.units[: params.max_sources]])
    rounds.append(
        [
            layer_mask(corpus, u.layer) - {u.id}
            for u in corpus.units[: params.max_sources]
            if len(corpus.in_layer(u.layer)) > 1
        ]
    )
    seen: set[Mask] = set()
    out: list[list[Mask]] = []
    for masks in rounds:
        fresh = [m for m in dict.fromkeys(masks) if m not in seen]
        seen.update(fresh)
        out.append(fresh)
    return out


def local_prompt_tokens(
    corpus: Corpus,
    claim: str,
    query: str,
    *,
    params: Params = DEFAULT_PARAMS,
    pp: ProxyParams = DEFAULT_PROXY_PARAMS,
    tokenizer: Tokenizer | None = None,
) -> tuple[int, int]:
    """(prompt tokens evaluated with the prefixes shared, without) for the proxy's planned masks."""
    tok = tokenizer or ApproxTokenizer()
    texts = {u.id: tok.truncate(u.shown, params.source_token_cap) for u in corpus.units}
    order = block_order(corpus, texts, tok, pp.order)
    sizes = {u.id: tok.count(texts[u.id]) + BLOCK_OVERHEAD_TOKENS for u in corpus.units}
    system = build_messages(corpus, query, frozenset(u.id for u in corpus.units), {})[0].content
    sizes.update({"system": tok.count(system), "tail": tok.count(query) + tok.count(claim) + TAIL_OVERHEAD_TOKENS})
    instructions = {u.id for u in corpus.units if u.layer == Layer.INSTRUCTIONS}

    def prompt(mask: Mask) -> tuple[str, ...]:
        # the scoring chat (``logprob.build_messages``): the project's system message, the instructions' blocks,
        # the other sources' blocks, the question and the claim
        kept = [uid for uid in order if uid not in mask]
        head = [uid for uid in kept if uid in instructions]
        return ("system", *head, *(uid for uid in kept if uid not in instructions), "tail")

    with_reuse = without = 0
    last: tuple[str, ...] = ()
    for masks in _planned_masks(corpus, params):
        prompts = [prompt(m) for m in masks]
        without += sum(sizes[b] for p in prompts for b in p)
        spent, last = evaluated(prompts, sizes, last)
        with_reuse += spent
    return with_reuse, without


def quote_proxy(
    corpus: Corpus,
    claim: str,
    capability: ScoringCapability,
    judged: CostQuote,
    *,
    query: str = "",
    params: Params = DEFAULT_PARAMS,
    pp: ProxyParams = DEFAULT_PROXY_PARAMS,
    tokenizer: Tokenizer | None = None,
    pricing: Pricing | None = None,
) -> ProxyQuote:
    """Both sides of one proxy trace; ``judged`` is the cost gate's quote of the full judged trace (the
    fallback)."""
    tok = tokenizer or ApproxTokenizer()
    per_judge = judged.judge_call_tokens  # the largest judge prompt, as rendered
    per_span = judged.span_check_tokens[: pp.span_sources]  # each with its retry
    k = params.repeats  # every judge measurement is k calls; span checks are made once
    judges = confirm_judge_calls(corpus) * k
    confirm_in = judges * per_judge + sum(per_span)
    confirm_out = judges * JUDGE_OUTPUT_TOKENS + 2 * len(per_span) * SUPPORT_OUTPUT_TOKENS
    worst = planned_proxy_calls(corpus, params, pp)
    unreused = worst - judged.planned_calls  # calls of the confirmation the fallback may not reuse
    judge_unreused = min(unreused, k)  # s(1 − top source), every sample of it
    spans_unreused = max(unreused - k, 0)
    worst_in = judged.input_tokens + judge_unreused * per_judge + (sum(per_span) if spans_unreused else 0)
    worst_out = judged.output_tokens + judge_unreused * JUDGE_OUTPUT_TOKENS + spans_unreused * SUPPORT_OUTPUT_TOKENS
    evaluated_tokens, without = local_prompt_tokens(corpus, claim, query, params=params, pp=pp, tokenizer=tok)
    prices = pricing.price(judged.model) if pricing is not None else None
    return ProxyQuote(
        capability,
        judges + 2 * pp.span_sources,  # confirm_calls(pp, corpus), every judge call k times
        confirm_in,
        confirm_out,
        judged.planned_calls,
        worst,
        worst_in,
        worst_out,
        judged.calls.ablation,
        evaluated_tokens,
        without,
        pp,
        prices,
    )
