"""Algorithm 5 — CheckSupport: one source, one claim, a verdict with a mechanically verified quote.

The instructions unit gets the DIRECTIVE question (does an instruction direct this response?),
every other source the EVIDENCE question (does it state or contradict the claim?). The model sees
the unit's header above its content and the claim, each fenced; a quote is verified against the
unit's FULL content only (never the header this project writes, so a label cannot come back as
evidence), and its line numbers are the content's own. A supported/contradicted verdict whose
quote does not verify gets exactly one retry, and is downgraded to silent if the retry does not
verify either.
A failed call or an unreadable answer is "no information", never a confident verdict.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from estimator.corpus.units import Layer, Unit
from estimator.fence import Fence
from estimator.judge import CallBudgetExceeded, CallLedger, cut_to_budget
from estimator.params import DEFAULT_PARAMS, Params
from estimator.results.models import SupportVerdictModel
from estimator.results.trace import SupportLabel
from estimator.seams.llm import LLM, LLMError, LLMRequest, Message
from estimator.spans.verify import QuoteCheck, verify_quote
from estimator.target import SENTENCE, Wording
from estimator.tokens import ApproxTokenizer, Tokenizer
from prompts import render

SUPPORT_MAX_TOKENS = 400
DOWNGRADED_CONFIDENCE = 0.3
EVIDENCE_HEADING = "SOURCE"
DIRECTIVE_HEADING = "AGENT INSTRUCTIONS"
VERDICTS: tuple[SupportLabel, ...] = ("supported", "contradicted", "silent")

SUPPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": list(VERDICTS)},
        "evidence_quote": {"type": "string"},
        "confidence": {"type": "number"},
        "reason": {"type": "string"},
    },
    "required": ["verdict", "evidence_quote", "confidence", "reason"],
    "additionalProperties": False,
}

_CODE_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?|\n?\s*```\s*$")


@dataclass(frozen=True)
class SupportAnswer:
    """One parsed answer of the span-check model, before verification."""

    verdict: SupportLabel
    quote: str | None
    confidence: float
    reason: str


def _first_object(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start >= 0:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _confidence(value: Any) -> float:
    if isinstance(value, bool):
        return 0.0
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if math.isnan(number) else min(1.0, max(0.0, number))


def parse_support_answer(text: str | None) -> SupportAnswer | None:
    """Read a structured answer, tolerantly: ``` fences stripped, the first {...} object taken, "quote"
    accepted for "evidence_quote". None when no verdict of the three can be read."""
    body = _CODE_FENCE.sub("", (text or "").strip())
    obj = _first_object(body)
    if obj is None:
        return None
    verdict = obj.get("verdict")
    if not isinstance(verdict, str) or verdict.strip().lower() not in VERDICTS:
        return None
    label: SupportLabel = next(v for v in VERDICTS if v == verdict.strip().lower())
    quote = obj.get("evidence_quote", obj.get("quote"))
    reason = obj.get("reason")
    return SupportAnswer(
        verdict=label,
        quote=quote if isinstance(quote, str) and quote.strip() else None,
        confidence=_confidence(obj.get("confidence")),
        reason=reason.strip() if isinstance(reason, str) else "",
    )


def support_body(
    unit: Unit, *, params: Params = DEFAULT_PARAMS, tokenizer: Tokenizer | None = None
) -> tuple[str, bool]:
    """What the span check shows of the unit (header and content) cut to SUPPORT_TOKEN_CAP (marked
    when cut), and whether it was cut."""
    return cut_to_budget(unit.shown, params.support_token_cap, tokenizer or ApproxTokenizer())


def support_prompt(
    claim: str,
    unit: Unit,
    *,
    params: Params = DEFAULT_PARAMS,
    tokenizer: Tokenizer | None = None,
    body: str | None = None,
    wording: Wording = SENTENCE,
) -> tuple[str, str, bool]:
    """(system, user, truncated): the instructions variant for the unit and
    "CLAIM:\\n" + Fence(claim) + "\\n\\n" + heading + ":\\n" + Fence(body), one marker for every span
    check of the claim. ``body``: a precomputed support_body; ``wording``: a sentence's questions or an
    action's (the call's text headed ``CALL``)."""
    directive = unit.layer == Layer.INSTRUCTIONS
    name = wording.support_directive if directive else wording.support_evidence
    fenced = Fence.for_inputs(claim)
    system = render(name, data_only_rule=fenced.rule().strip()).text.strip()
    if body is None:
        body, cut = support_body(unit, params=params, tokenizer=tokenizer)
    else:
        cut = body != unit.shown
    heading = DIRECTIVE_HEADING if directive else EVIDENCE_HEADING
    return (
        system,
        wording.target_heading + ":\n" + fenced.wrap(claim) + "\n\n" + heading + ":\n" + fenced.wrap(body),
        cut,
    )


def build_support_request(
    claim: str,
    unit: Unit,
    *,
    params: Params = DEFAULT_PARAMS,
    tokenizer: Tokenizer | None = None,
    retry: bool = False,
    body: str | None = None,
    wording: Wording = SENTENCE,
) -> LLMRequest:
    system, user, _ = support_prompt(claim, unit, params=params, tokenizer=tokenizer, body=body, wording=wording)
    if retry:
        user = user + "\n\n" + render("support_retry_nudge").text.strip()
    return LLMRequest(
        messages=(Message("system", system), Message("user", user)),
        purpose="support",
        temperature=0.0,
        max_tokens=SUPPORT_MAX_TOKENS,
        json_schema=SUPPORT_SCHEMA,
        schema_name="support_verdict",
    )


async def _ask(
    ledger: CallLedger, llm: LLM, request: LLMRequest, mask: str = "span check"
) -> tuple[SupportAnswer | None, str, bool]:
    """(answer or None, why None, whether a call was made); ``mask`` names the call in its record."""
    try:
        response = await ledger.call(llm, request, stage="spans", mask=mask)
    except CallBudgetExceeded as exc:
        return None, str(exc), False
    except LLMError as exc:
        return None, "the call failed" + (" (billed)" if exc.billed else "") + f": {exc}", True
    answer = parse_support_answer(response.text)
    if answer is None:
        return None, "the answer could not be read as a verdict", True
    return answer, "", True


def _no_information(why: str, calls: int) -> SupportVerdictModel:
    return SupportVerdictModel(
        verdict="silent",
        quote=None,
        line_start=None,
        line_end=None,
        confidence=0.0,
        downgraded=False,
        reason=f"no information: {why}",
        calls=calls,
        no_information=True,
    )


async def check_support(
    llm: LLM,
    claim: str,
    unit: Unit,
    *,
    params: Params = DEFAULT_PARAMS,
    tokenizer: Tokenizer | None = None,
    ledger: CallLedger | None = None,
    body: str | None = None,
    wording: Wording = SENTENCE,
) -> SupportVerdictModel:
    """Algorithm 5 for one source. ``ledger`` carries the trace's cap and accounting (private if None);
    ``body`` is the unit's support_body when the caller has already cut it."""
    ledger = ledger or CallLedger(planned=None, concurrency=params.concurrency)
    tok = tokenizer or ApproxTokenizer()
    if body is None:
        body, _ = support_body(unit, params=params, tokenizer=tok)
    first = build_support_request(claim, unit, params=params, tokenizer=tok, body=body, wording=wording)
    answer, why, made = await _ask(ledger, llm, first, f"span check of {unit.id}")
    calls = int(made)
    if answer is None:
        return _no_information(why, calls)
    check = verify_quote(answer.quote, unit.text, params.min_quote_len)
    notes: list[str] = []
    if answer.verdict in ("supported", "contradicted") and not check.verified:
        retry, why, made = await _ask(
            ledger,
            llm,
            build_support_request(claim, unit, params=params, tokenizer=tok, retry=True, body=body, wording=wording),
            f"span check of {unit.id}, retry",
        )
        calls += int(made)
        if retry is None:
            notes.append(f"the retry gave no information ({why})")
        else:
            retry_check = verify_quote(retry.quote, unit.text, params.min_quote_len)
            if retry_check.verified:
                answer, check = retry, retry_check  # keep the retry only because it verified
            else:
                notes.append("the retry's quote did not verify either")
    return _finish(answer, check, calls, notes)


def _finish(answer: SupportAnswer, check: QuoteCheck, calls: int, notes: list[str]) -> SupportVerdictModel:
    verdict: SupportLabel = answer.verdict
    confidence = min(1.0, max(0.0, answer.confidence))
    downgraded = False
    reason = answer.reason
    if verdict in ("supported", "contradicted") and not check.verified:
        said = f" (model said: {reason})" if reason else ""
        reason = (
            f"downgraded from {verdict}: the quoted span does not occur in the source, so the verdict "
            "cannot be shown" + "".join(f"; {n}" for n in notes) + said
        )
        verdict, downgraded, confidence = "silent", True, min(confidence, DOWNGRADED_CONFIDENCE)
    return SupportVerdictModel(
        verdict=verdict,
        quote=answer.quote if check.verified else None,
        line_start=check.line_start if check.verified else None,
        line_end=check.line_end if check.verified else None,
        confidence=confidence,
        downgraded=downgraded,
        reason=reason,
        calls=calls,
    )
