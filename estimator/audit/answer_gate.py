"""The answer-level verification gate: may this whole answer be shown? Pure logic, fail closed.

Every sentence of a turn arrives with its free-tier status and, when it was checked, an outcome: a
verbatim quote found for free, a trace (its verdict, its span checks, its declared-attribution
audit), an error, or a budget refusal. The gate decides per sentence, then for the answer:

* ``block`` — a claim is contradicted by a source (with a verified quote), credits the wrong source
  (conflated), credits a source that does not carry it (unsupported citation); or the check itself
  did not happen: an error, a budget refusal, a trace with no information, a missing outcome;
* ``review`` — a claim that needs evidence has none that verifies, or was answered from the model's
  own knowledge;
* ``allow`` — only when every claim that needs evidence has a verified grounding source (a verified
  quote, free or traced) and nothing above fired.

Fail closed: an outcome that is absent, failed or refused is never ``allow``. A claim needs evidence
when the free tier found it checkable (``traceable`` or ``quoted``); questions, offers, reports of
the agent's own actions and unanchored sentences carry nothing to verify.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from estimator.audit.declared import SourceEvidence, read_trace_sources
from estimator.results.models import DeclaredAuditModel

Decision = Literal["allow", "review", "block"]
OutcomeKind = Literal["quoted", "traced", "error", "budget_refused"]
Rule = Literal[
    "missing_outcome",
    "error",
    "budget_refused",
    "no_information",
    "contradicted",
    "conflated",
    "unsupported_citation",
    "internal_knowledge",
    "unverifiable",
    "quoted",
    "grounded",
    "no_evidence_needed",
    "all_grounded",
    "no_sentences",
]
NEEDS_EVIDENCE = frozenset({"traceable", "quoted"})
_SEVERITY: Mapping[Decision, int] = {"allow": 0, "review": 1, "block": 2}


@dataclass(frozen=True)
class GateSentence:
    """One sentence of the answer with its free-tier status (traceable, quoted, action, agent_voice,
    unanchored)."""

    segment_id: str
    text: str
    status: str

    @property
    def needs_evidence(self) -> bool:
        return self.status in NEEDS_EVIDENCE


@dataclass(frozen=True)
class SentenceOutcome:
    """What checking one sentence produced. ``verdict`` is the trace's verdict (attributed, redundant,
    internal_knowledge, no_information); ``sources`` its span checks (for a free quote, the quoted
    source as a verified ``supported``); ``reason`` says why an error or refusal happened."""

    segment_id: str
    kind: OutcomeKind
    verdict: str | None = None
    sources: tuple[SourceEvidence, ...] = ()
    declared: DeclaredAuditModel | None = None
    reason: str = ""


@dataclass(frozen=True)
class SentenceDecision:
    segment_id: str
    text: str
    decision: Decision
    rule: Rule
    reason: str


@dataclass(frozen=True)
class AnswerDecision:
    """The answer-level decision, the rule that fired (the first sentence at the worst level, in
    answer order, or the summary rule when everything passed) and the decision of every sentence."""

    decision: Decision
    rule: Rule
    reasons: tuple[SentenceDecision, ...]

    @property
    def allowed(self) -> bool:
        return self.decision == "allow"


def outcome_from_trace(segment_id: str, trace: Any, declared: DeclaredAuditModel | None = None) -> SentenceOutcome:
    """The outcome of a completed trace (a ``TraceResultModel`` or its ``to_dict()`` form)."""
    verdict = trace.get("verdict") if isinstance(trace, Mapping) else getattr(trace, "verdict", None)
    return SentenceOutcome(segment_id, "traced", verdict=verdict, sources=read_trace_sources(trace), declared=declared)


def quoted_outcome(
    segment_id: str, source_ids: Sequence[str], declared: DeclaredAuditModel | None = None
) -> SentenceOutcome:
    """The outcome of a free-tier verbatim quote: the quoted sources verify the sentence."""
    sources = tuple(SourceEvidence(s, "supported", True, None) for s in source_ids)
    return SentenceOutcome(segment_id, "quoted", sources=sources, declared=declared)


def _ids(sources: Sequence[SourceEvidence]) -> str:
    return ", ".join(s.source_id for s in sources)


def _judge(sentence: GateSentence, outcome: SentenceOutcome | None) -> tuple[Decision, Rule, str]:
    if outcome is None:
        if sentence.status == "quoted":
            return "allow", "quoted", "a verbatim quote was found and verified for free"
        if not sentence.needs_evidence:
            return "allow", "no_evidence_needed", f"{sentence.status}: nothing in it to verify"
        return "block", "missing_outcome", "the sentence needs evidence and no outcome was recorded for it"
    if outcome.kind == "error":
        return "block", "error", f"checking it failed: {outcome.reason or 'no reason given'}"
    if outcome.kind == "budget_refused":
        why = outcome.reason or "over budget"
        return "block", "budget_refused", f"not checked, the budget refused it: {why}"
    against = [s for s in outcome.sources if s.verdict == "contradicted" and s.verified]
    if against:
        return "block", "contradicted", f"contradicted by {_ids(against)} (verified quote)"
    audit = outcome.declared
    if audit is not None and audit.outcome == "conflated":
        return "block", "conflated", audit.explanation
    if audit is not None and audit.outcome == "unsupported_citation":
        return "block", "unsupported_citation", audit.explanation
    grounding = [s for s in outcome.sources if s.verdict == "supported" and s.verified]
    if outcome.kind == "quoted":
        if grounding:
            return "allow", "quoted", f"verbatim quote from {_ids(grounding)}"
        return "block", "missing_outcome", "a quote outcome that names no quoted source"
    if outcome.verdict not in ("attributed", "redundant", "internal_knowledge"):
        return (
            "block",
            "no_information",
            (
                f"the trace gave no information (verdict {outcome.verdict!r}): "
                "the measurement failed, so nothing was verified"
            ),
        )
    if grounding:
        return "allow", "grounded", f"grounded by {_ids(grounding)} with a verified quote"
    if not sentence.needs_evidence:
        return "allow", "no_evidence_needed", f"{sentence.status}: nothing in it to verify"
    if outcome.verdict == "internal_knowledge":
        return (
            "review",
            "internal_knowledge",
            ("answered from the model's own knowledge: no source in the context carries it, and it needs evidence"),
        )
    return "review", "unverifiable", ("no source verifiably grounds it (no supported verdict with a verified quote)")


def decide(sentences: Sequence[GateSentence], outcomes: Mapping[str, SentenceOutcome]) -> AnswerDecision:
    """The answer-level decision over every sentence of the answer, in order.

    A sentence with no entry in ``outcomes`` passes only if it needs no evidence or was quoted for
    free; a traceable sentence without an outcome blocks (fail closed). An empty answer blocks."""
    if len({s.segment_id for s in sentences}) != len(sentences):
        raise ValueError("sentence ids must be unique")
    reasons = tuple(SentenceDecision(s.segment_id, s.text, *_judge(s, outcomes.get(s.segment_id))) for s in sentences)
    if not reasons:
        return AnswerDecision("block", "no_sentences", ())
    worst = max(reasons, key=lambda r: _SEVERITY[r.decision])  # max keeps the first of equals
    if worst.decision != "allow":
        return AnswerDecision(worst.decision, worst.rule, reasons)
    if any(s.needs_evidence for s in sentences):
        return AnswerDecision("allow", "all_grounded", reasons)
    return AnswerDecision("allow", "no_evidence_needed", reasons)
