"""Prompt tokens the local scorer evaluates for the proxy's ranking, with and without prefix reuse, on many
claims — counted exactly with the model's own tokenizer (its vocabulary only: nothing is evaluated).

A stand-in scorer tokenizes each prompt as the in-process scorer does (``LlamaCppScorer``: BOS text, chat
template, the claim) and counts the tokens after the longest prefix shared with the prompt before it — what
the real scorer evaluates, since it keeps that prefix in its KV cache. Its log-probability depends only on
which sources are shown (a fixed pseudo-random weight per source and claim), so every way sends the same
masks and only the order and the prefix sharing differ:

* ``none``    — no reuse: every prompt's every token;
* ``reuse``   — the log-probability estimator as it was: sources in the turn's order, masks as they arrive;
* ``ordinal`` — the proxy's scheduler (``PrefixOrderedScorer``), sources in the turn's order;
* ``size``    — the proxy as shipped: the scheduler, sources grouped by layer, largest first.

    python bench/proxy/tokens.py [--tau 40] [--tau-every 20]

Seconds follow from tokens at the machine's rate (``bench/proxy/speed.py`` measures it).
"""

from __future__ import annotations

import argparse
import re
import statistics
import zlib
from collections.abc import Sequence
from typing import Any

import anyio
from common import Claim, fixture_claims, model_path, tau_claims

from estimator.loo.logprob import INSTRUCTIONS_HEADING, trace_logprob
from estimator.proxy.confirm import ProxyParams
from estimator.proxy.driver import rank
from estimator.seams.llm import Message
from estimator.seams.scorer import QWEN_TEMPLATE, ScoredTarget
from provenance_api.providers import free_tier

WAYS = ("none", "reuse", "ordinal", "size")


class CountingScorer:
    """Tokenizes like the in-process scorer and counts what a prefix-reusing scorer would evaluate."""

    model = "token-counter"

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.cache: list[int] = []
        self.evaluated = 0
        self.total = 0

    async def score(self, messages: Sequence[Message], target: str) -> ScoredTarget:
        text = (QWEN_TEMPLATE.bos_text or "") + QWEN_TEMPLATE.render_prefix(messages) + target
        tokens = list(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))
        common = 0
        for a, b in zip(self.cache, tokens, strict=False):
            if a != b:
                break
            common += 1
        self.evaluated += len(tokens) - min(common, len(tokens) - 1)
        self.total += len(tokens)
        self.cache = tokens
        shown = set(re.findall(r"^\[(s\d+)\] ", messages[-1].content, flags=re.M))
        shown |= {"instructions"} if messages[-1].content.startswith(INSTRUCTIONS_HEADING) else set()
        return ScoredTarget.of([-60.0 + sum(3.0 * (zlib.crc32((target + s).encode()) % 7) for s in shown)])


async def count(llama: Any, claim: Claim, way: str) -> tuple[int, int, int]:
    scorer = CountingScorer(llama)
    tok = free_tier.tokenizer()
    if way in ("none", "reuse"):
        result = await trace_logprob(scorer, None, claim.claim, claim.query, claim.corpus, tokenizer=tok)
        passes = result.calls.made
    else:
        ranking = await rank(
            scorer,
            claim.claim,
            claim.query,
            claim.corpus,
            model="none",
            tokenizer=tok,
            pp=ProxyParams(order="ordinal" if way == "ordinal" else "size"),
        )
        passes = ranking.passes
    return (scorer.total if way == "none" else scorer.evaluated), scorer.total, passes


async def main_async(args: argparse.Namespace) -> int:
    from llama_cpp import Llama

    llama = Llama(model_path=model_path(), vocab_only=True, verbose=False)
    groups = {"fixtures": fixture_claims(1), "τ-bench": list(tau_claims(every=args.tau_every, limit=args.tau))}
    for name, claims in groups.items():
        sums = {way: [0, 0, 0] for way in WAYS}
        per_claim: dict[str, list[float]] = {way: [] for way in WAYS}
        for claim in claims:
            for way in WAYS:
                evaluated, total, passes = await count(llama, claim, way)
                for i, v in enumerate((evaluated, total, passes)):
                    sums[way][i] += v
                per_claim[way].append(evaluated)
        print(
            f"{name}: {len(claims)} claims, {sum(len(c.corpus.units) for c in claims) / len(claims):.1f} sources "
            "per claim"
        )
        for way in WAYS:
            evaluated, total, passes = sums[way]
            print(
                f"  {way:<8} {evaluated:>9,} tokens evaluated · {passes} passes · {evaluated / max(passes, 1):,.0f} "
                f"per pass · median {statistics.median(per_claim[way]):,.0f} per claim · ×"
                f"{sums['none'][0] / max(evaluated, 1):.2f} fewer than none"
            )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tau", type=int, default=40, help="τ-bench claims (one per turn)")
    parser.add_argument("--tau-every", type=int, default=20, help="every N-th τ-bench turn with a claim")
    return anyio.run(main_async, parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
