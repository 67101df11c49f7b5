"""Billed input tokens per trace against the cost gate's estimate, with a provider that caches prompts.

The fake provider bills like the hosted APIs with automatic prompt caching: a prompt's longest prefix
shared with an earlier prompt (of any trace), rounded down to 128-token blocks and only from 1,024
tokens on, is a cache hit billed at the cached rate (``--cached-rate``, 0.5 = OpenAI; Anthropic's cache
reads are 0.1). The judge lists the claim and query first and the sources after them in ordinal order,
so masks share long prefixes; repeated masks are answered from the per-trace judgement memo and cost
nothing. Tokens are counted with the service's tokenizer.

    python bench/billed_tokens.py [--cached-rate 0.5]

Prints, per fixture claim: the estimate (the quote's input tokens), tokens sent, cached, and the billed
equivalent (uncached + cached × rate). Target: billed ≤ the estimate for every trace (the verdict line).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.cost import quote_cost
from estimator.fence import split_fenced
from estimator.free_tier.gating import gate_turn
from estimator.free_tier.segment import segment_response
from estimator.loo.judged import trace_claim
from estimator.results.models import TraceResultModel
from estimator.seams.llm import LLMRequest, LLMResponse, Usage
from estimator.tokens import Tokenizer
from provenance_api.providers.free_tier import tokenizer as service_tokenizer

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ("eo_worldview_turn.json", "failures_turn.json", "fallback_path_turn.json", "ndvi_parametric_turn.json")
BLOCK = 128
MIN_CACHED = 1024


@dataclass
class CachingProvider:
    """An LLM whose usage reports prompt-cache hits on shared prefixes (see the module docstring)."""

    tok: Tokenizer
    key: str
    seen: list[list[int]] = field(default_factory=list)
    model: str = "cached-fake"

    def _tokens(self, request: LLMRequest) -> list[int]:
        # one token id per approximate token of the rendered prompt: prefixes compare as the text does
        text = "\n".join(f"<{m.role}>{m.content}" for m in request.messages)
        pieces = text.split(" ")
        return [hash(p) for p in pieces for _ in range(max(1, self.tok.count(p)))]

    def _cached(self, ids: list[int]) -> int:
        best = 0
        for earlier in self.seen:
            n = 0
            for a, b in zip(ids, earlier, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        return 0 if best < MIN_CACHED else best // BLOCK * BLOCK

    def answer(self, request: LLMRequest) -> str:
        data = "\n".join(split_fenced(request.messages[-1].content)[0][1:])  # the claim's region comes first
        if request.purpose == "judge":
            return "9" if self.key in data else "2"
        if self.key in data:
            return json.dumps({"verdict": "supported", "evidence_quote": self.key, "confidence": 0.9, "reason": "-"})
        return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.8, "reason": "-"})

    async def complete(self, request: LLMRequest) -> LLMResponse:
        ids = self._tokens(request)
        cached = self._cached(ids)
        self.seen.append(ids)
        text = self.answer(request)
        return LLMResponse(text=text, usage=Usage(len(ids), max(1, len(text) // 4), cached), model=self.model)


async def run_trace(
    provider: CachingProvider, claim: str, turn: StoredTurn, corpus: Corpus, tok: Tokenizer
) -> TraceResultModel:
    return await trace_claim(provider, claim, turn.effective_query(), corpus, tokenizer=tok)


def key_for(turn: StoredTurn) -> str:
    corpus = build_corpus(turn)
    for unit in reversed(corpus.tool_units() or corpus.units):
        for line in unit.text[:1500].split("\n"):
            phrase = line.strip()[:32]
            if len(phrase) >= 12 and sum(phrase in u.text for u in corpus.units) == 1:
                return phrase
    return "no source holds this 77ad"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cached-rate", type=float, default=0.5, help="price of a cached token / an uncached one")
    parser.add_argument("--claims", type=int, default=3, help="traceable claims per fixture")
    args = parser.parse_args()
    tok = service_tokenizer()
    ok = True
    totals: list[float] = [0.0, 0.0, 0.0, 0.0]
    for name in FIXTURES:
        turn = StoredTurn.model_validate_json((ROOT / "fixtures" / name).read_text(encoding="utf-8"))
        corpus = build_corpus(turn, tokenizer=tok)
        gates = [g for g in gate_turn(corpus, segment_response(turn.response)).segments if g.traceable]
        provider = CachingProvider(tok, key_for(turn))  # one cache per fixture: its traces share prefixes
        for gate in gates[: args.claims]:
            claim = gate.segment.text
            estimate = quote_cost(
                corpus, claim, model="cached-fake", tokenizer=tok, query=turn.effective_query()
            ).input_tokens
            result = anyio.run(run_trace, provider, claim, turn, corpus, tok)
            sent, cached = result.usage.input_tokens, result.usage.cached_input_tokens
            billed = sent - cached + cached * args.cached_rate
            ok &= billed <= estimate
            totals = [totals[0] + estimate, totals[1] + sent, totals[2] + cached, totals[3] + billed]
            print(
                f"{name} · {claim[:48]!r}: estimate {estimate:,} · sent {sent:,} · cached {cached:,} · "
                f"billed-equivalent {billed:,.0f} ({billed / estimate:.0%} of the estimate) · calls made "
                f"{result.calls.made}/{result.calls.planned}, saved {result.calls.saved}"
            )
    est, all_sent, all_cached, all_billed = totals
    print(
        f"all: estimate {est:,.0f} · sent {all_sent:,.0f} · cached {all_cached:,.0f} "
        f"({all_cached / max(1, all_sent):.0%} of sent) · "
        f"billed-equivalent {all_billed:,.0f} = {all_billed / max(1, est):.0%} of the estimate "
        f"(cached rate {args.cached_rate})"
    )
    print(("PASS" if ok else "FAIL") + ": billed input tokens ≤ the cost gate's estimate for every trace")


if __name__ == "__main__":
    main()
