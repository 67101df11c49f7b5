"""The hosted judges of the proxy benchmark: plain functions behind the LLM protocol (the model's judgement).

* ``knowing`` — knows the claim: 9 while a source carrying the planted cause is shown, else 2 (where the
  claim takes every cause together — two causes, each half of it — the digit falls with each cause
  removed: 2 + 7 × the share shown, rounded); its span check quotes the cause where the source holds
  it, else is silent.
* ``opposite`` — adversarial: 2 while the cause is shown, else 9; span checks silent.
* ``random`` — adversarial: a digit 1–9 drawn from the request's own text (the same mask always gets the
  same digit, as a deterministic judge would); span checks silent.
* ``claim_ids`` — for turns without a planted cause (τ-bench, fixtures): holds while a shown source holds
  one of the claim's identifiers (tokens with a digit or an underscore, else its longest word), as in
  ``bench/calls_per_claim.py``; its span check quotes the identifier.

Each reports its usage in tokens of the service's tokenizer (``counted``), so hosted input tokens compare
with the cost gate's quote.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence

from estimator.fence import split_fenced
from estimator.seams.llm import LLMRequest, LLMResponse, ScriptedLLM, Usage
from provenance_api.providers import free_tier

SILENT = json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.8, "reason": "-"})
JUDGES = ("knowing", "opposite", "random")


def counted(script: Callable[[LLMRequest], str]) -> ScriptedLLM:
    """A judge whose usage is the request's tokens counted with the service's tokenizer, as the cost gate
    counts them (``ScriptedLLM`` alone reports a quarter of the characters)."""
    tok = free_tier.tokenizer()

    def answer(request: LLMRequest) -> LLMResponse:
        text = script(request)
        usage = Usage(
            input_tokens=sum(tok.count(m.content) for m in request.messages), output_tokens=max(1, tok.count(text))
        )
        return LLMResponse(text=text, usage=usage, model="scripted-judge")

    return ScriptedLLM(answer)


def _data(request: LLMRequest) -> str:
    """What the request shows after the claim's region: the query and sources (judge), the source (span)."""
    return "\n".join(split_fenced(request.messages[-1].content)[0][1:])


def _quote(text: str, key: str) -> str:
    """A verbatim line of ``text`` holding ``key`` (the span check must quote the source itself)."""
    for line in text.split("\n"):
        if key in line and len(line.strip()) >= 12:
            return line.strip()[:200]
    return key


def _judge(
    holds: Callable[[str], float],
    keys: Sequence[str],
    *,
    invert: bool = False,
    spans: bool = True,
) -> ScriptedLLM:
    """``holds``: the share of the claim the data shown carries, 0–1."""

    def script(request: LLMRequest) -> str:
        data = _data(request)
        if request.purpose == "judge":
            share = holds(data)
            return str(round(2 + 7 * (1 - share if invert else share)))
        key = next((k for k in keys if k and k in data), None)
        if spans and key is not None:
            return json.dumps(
                {"verdict": "supported", "evidence_quote": _quote(data, key), "confidence": 0.9, "reason": "-"}
            )
        return SILENT

    return counted(script)


def _carried(causes: Sequence[str], together: bool) -> Callable[[str], float]:
    def share(data: str) -> float:
        shown = [c in data for c in causes]
        if not shown:
            return 0.0
        return sum(shown) / len(shown) if together else float(any(shown))

    return share


def knowing(causes: Sequence[str], *, together: bool = False) -> ScriptedLLM:
    return _judge(_carried(causes, together), causes)


def opposite(causes: Sequence[str], *, together: bool = False) -> ScriptedLLM:
    return _judge(_carried(causes, together), causes, invert=True, spans=False)


def random_judge(seed: str) -> ScriptedLLM:
    def script(request: LLMRequest) -> str:
        if request.purpose != "judge":
            return SILENT
        digest = hashlib.sha256((seed + request.prompt_text).encode("utf-8")).digest()
        return str(1 + digest[0] % 9)

    return counted(script)


def claim_ids(claim: str) -> list[str]:
    tokens = [t.strip(".,;:()[]'\"") for t in claim.split()]
    ids = [t for t in tokens if len(t) >= 4 and (any(c.isdigit() for c in t) or "_" in t)]
    return ids or sorted(tokens, key=len)[-1:]


def by_claim_ids(claim: str) -> ScriptedLLM:
    ids = claim_ids(claim)
    return _judge(lambda data: float(any(i in data for i in ids)), ids)


def judge_named(name: str, causes: Sequence[str], seed: str, *, together: bool = False) -> ScriptedLLM:
    if name == "knowing":
        return knowing(causes, together=together)
    if name == "opposite":
        return opposite(causes, together=together)
    return random_judge(seed)
