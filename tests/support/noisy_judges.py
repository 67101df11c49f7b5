"""Judges that answer like a hosted model sometimes does: plain functions behind the estimator's protocols.

Four kinds, each for every estimator (a digit for ``judged``, top log-probabilities for ``expected``, a
log-probability for ``logprob``/``both``/``proxy``):

* ``random`` — every answer drawn at random;
* ``noisy`` — knows the claim (the more of the claim's words the shown context holds, the higher) and is
  off by up to three digits (or nats) a third of the time;
* ``adversarial`` — the knowing answer turned upside down: high without the evidence, low with it;
* ``constant`` — the same answer whatever it is shown.

Span checks are answered by the same kind: ``random`` and ``noisy`` pick supported / contradicted / silent
at random and quote a line of the source (verified as the service verifies any quote), ``adversarial``
quotes a line that does not state the claim, ``constant`` is always silent.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from estimator.fence import split_fenced
from estimator.seams.llm import LLMRequest, LLMResponse, Message

__all__ = ["KINDS", "Judges", "judges"]

KINDS = ("random", "noisy", "adversarial", "constant")
_WORD = re.compile(r"[A-Za-z0-9_.-]{4,}")


def _words(text: str) -> set[str]:
    return {w.lower().strip(".") for w in _WORD.findall(text)}


def _shown(text: str) -> str:
    """The data regions of a judge's prompt: the sources it was shown."""
    return "\n".join(split_fenced(text)[0])


@dataclass
class Judges:
    """The chat model (judge digits and span checks) and the scorer's function of one kind of judge."""

    chat: Callable[[LLMRequest], str | LLMResponse]
    score: Callable[[Sequence[Message], str], float]


def judges(kind: str, seed: int, claim: str) -> Judges:
    rng = random.Random(seed)
    claim_words = _words(claim) or {claim.lower()}
    constant = rng.randint(1, 9)

    def knowing(shown: str) -> float:
        """1–9: the share of the claim's words the shown sources hold."""
        held = len(claim_words & _words(shown)) / len(claim_words)
        return 1 + 8 * held

    def digit(shown: str) -> int:
        if kind == "random":
            return rng.randint(1, 9)
        if kind == "constant":
            return constant
        value = knowing(shown)
        if kind == "adversarial":
            value = 10 - value
        if kind == "noisy" and rng.random() < 1 / 3:
            value += rng.choice((-3, -2, -1, 1, 2, 3))
        return min(9, max(1, round(value)))

    def span_check(request: LLMRequest) -> str:
        body = split_fenced(request.messages[-1].content)[0][-1].strip("\n")
        lines = [x.strip() for x in body.split("\n")[1:] if x.strip()] or [""]
        if kind == "constant":
            verdict = "silent"
        elif kind == "adversarial":
            verdict = "supported"
            lines = [x for x in lines if not (_words(x) & claim_words)] or lines
        else:
            verdict = rng.choice(("supported", "contradicted", "silent"))
        quote = "" if verdict == "silent" else rng.choice(lines)
        return json.dumps({"verdict": verdict, "evidence_quote": quote, "confidence": 0.8, "reason": kind})

    def chat(request: LLMRequest) -> str | LLMResponse:
        if request.purpose != "judge":
            return span_check(request)
        answer = str(digit(_shown(request.messages[-1].content)))
        if request.top_logprobs:
            other = str(min(9, max(1, int(answer) + rng.choice((-1, 1)))))
            share = rng.uniform(0.5, 0.95) if kind != "constant" else 0.8
            alternatives = {answer: math.log(share)}
            if other != answer:
                alternatives[other] = math.log(1 - share)
            return LLMResponse(answer, top_logprobs=[alternatives])
        return answer

    def score(messages: Sequence[Message], target: str) -> float:
        """log p(claim) in nats: −60 (no support) to −4 (stated), by the same rule as the digit."""
        return -60.0 + (digit(_shown("\n".join(m.content for m in messages))) - 1) * 7.0

    return Judges(chat, score)
