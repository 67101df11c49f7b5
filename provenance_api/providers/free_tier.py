"""The zero-cost operations on a stored turn, shared by the CLI and the HTTP routes:
corpus, segments and gating, the selected-sentence rule, and the cost gate."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from estimator.corpus import build_corpus
from estimator.cost import CostQuote, Pricing, quote_cost
from estimator.gating import GateReport, gate_turn
from estimator.params import DEFAULT_PARAMS, Params
from estimator.segment import Segment, client_segments, segment_response
from estimator.selection import Selection, select_claim
from estimator.tokens import Tokenizer
from estimator.turn import StoredTurn
from estimator.units import Corpus
from provenance_api.core.errors import InvalidInput

FALLBACK_MODEL = "openai/gpt-4o-mini"


@dataclass(frozen=True)
class GateView:
    corpus: Corpus
    segments: tuple[Segment, ...]
    report: GateReport


@cache
def tokenizer() -> Tokenizer:
    from provenance_api.providers.tokenizer import TiktokenTokenizer

    return TiktokenTokenizer()


def corpus_for(turn: StoredTurn, params: Params = DEFAULT_PARAMS) -> Corpus:
    return build_corpus(turn, params, tokenizer())


def gate_view(
    turn: StoredTurn, params: Params = DEFAULT_PARAMS, segments: Sequence[tuple[str | None, str]] | None = None
) -> GateView:
    corpus = corpus_for(turn, params)
    segs = client_segments(turn.response, segments) if segments else segment_response(turn.response)
    return GateView(corpus=corpus, segments=segs, report=gate_turn(corpus, segs, params))


def resolve_model(turn: StoredTurn, explicit: str | None) -> str:
    """The judge model: explicit, else the turn's own model (§10), else the configured default."""
    return explicit or turn.model or os.environ.get("PROVENANCE_DEFAULT_MODEL") or FALLBACK_MODEL


def require_selection(turn: StoredTurn, view: GateView, sentence: str) -> Selection:
    selection = select_claim(turn.response, view.segments, sentence)
    if selection is None:
        raise InvalidInput(
            "the selected sentence does not occur in the turn's response (after normalisation) and is not "
            "one of its segments",
            field="sentence",
            fix="select text from the response as shown, or pass a segment id such as r3",
        )
    return selection


def cost_quote(
    turn: StoredTurn,
    corpus: Corpus,
    claim: str,
    *,
    model: str,
    params: Params = DEFAULT_PARAMS,
    probe: bool = False,
    trace: bool = True,
    pricing: Pricing | None = None,
) -> CostQuote:
    """``pricing``: the operator's prices (``operations.model_policy``); default litellm's bundled map."""
    from provenance_api.providers.llm_litellm import LiteLLMPricing

    return quote_cost(
        corpus,
        claim,
        model=model,
        params=params,
        tokenizer=tokenizer(),
        pricing=pricing or LiteLLMPricing(),
        query=turn.effective_query(),
        probe=probe,
        trace=trace,
    )
