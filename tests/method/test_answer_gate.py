"""Answer gate: fail closed, block on contradiction or conflation; allow only on verified grounds."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimator.audit.answer_gate import (
    AnswerDecision,
    GateSentence,
    SentenceOutcome,
    decide,
    outcome_from_trace,
    quoted_outcome,
)
from estimator.audit.declared import SourceEvidence, audit_declared
from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Layer
from estimator.results.models import CallAccountModel, SourceScoreModel, SupportVerdictModel, TraceResultModel
from estimator.results.trace import Role, SupportLabel, Verdict
from estimator.seams.llm import Usage

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SHOP = build_corpus(StoredTurn.model_validate_json((FIXTURES / "fallback_path_turn.json").read_text("utf-8")))

ORDER = GateSentence("g0", "I found order A-10482, delivered on 2025-03-03.", "traceable")
REFUND = GateSentence("g1", "Refunds take 5 to 7 business days after approval.", "traceable")
QUOTED = GateSentence("g2", "Items reported as damaged within 30 days of delivery qualify for a full refund.", "quoted")
ACTION = GateSentence("g3", "I have created return label RL-55310 for the blender.", "action")
OFFER = GateSentence("g4", "Would you like me to email the label?", "agent_voice")
ANSWER = (ORDER, REFUND, QUOTED, ACTION, OFFER)


def grounded(segment_id: str, source_id: str = "s0", verdict: str = "attributed") -> SentenceOutcome:
    return SentenceOutcome(
        segment_id,
        "traced",
        verdict=verdict,
        sources=(
            SourceEvidence(source_id, "supported", True, "grounds"),
            SourceEvidence("s3", "silent", False, "irrelevant"),
        ),
    )


def all_grounded() -> dict[str, SentenceOutcome]:
    return {"g0": grounded("g0", "s0"), "g1": grounded("g1", "s1")}


def test_every_claim_grounded_allows_the_answer() -> None:
    result = decide(ANSWER, all_grounded())
    assert (result.decision, result.rule, result.allowed) == ("allow", "all_grounded", True)
    assert [r.rule for r in result.reasons] == [
        "grounded",
        "grounded",
        "quoted",
        "no_evidence_needed",
        "no_evidence_needed",
    ]
    assert "s1" in result.reasons[1].reason


def test_one_contradicted_claim_blocks_the_whole_answer() -> None:
    outcomes = all_grounded()
    outcomes["g1"] = SentenceOutcome(
        "g1", "traced", verdict="attributed", sources=(SourceEvidence("s1", "contradicted", True, "grounds"),)
    )
    result = decide(ANSWER, outcomes)
    assert (result.decision, result.rule) == ("block", "contradicted")
    assert result.reasons[1].decision == "block" and "s1" in result.reasons[1].reason
    assert [r.decision for r in result.reasons] == ["allow", "block", "allow", "allow", "allow"]


def test_a_contradiction_outweighs_a_supporting_source() -> None:
    outcome = SentenceOutcome(
        "g0",
        "traced",
        verdict="redundant",
        sources=(SourceEvidence("s0", "supported", True, "grounds"), SourceEvidence("s5", "contradicted", True, None)),
    )
    assert decide((ORDER,), {"g0": outcome}).rule == "contradicted"


def test_an_error_mid_run_blocks_with_its_reason_never_allows() -> None:
    outcomes = all_grounded()
    outcomes["g1"] = SentenceOutcome("g1", "error", reason="LLMError: provider returned 503")
    result = decide(ANSWER, outcomes)
    assert (result.decision, result.rule) == ("block", "error")
    assert "provider returned 503" in result.reasons[1].reason


def test_a_budget_refusal_is_not_allow() -> None:
    outcomes = all_grounded()
    outcomes["g0"] = SentenceOutcome("g0", "budget_refused", reason="would exceed max_cost_usd 0.05")
    result = decide(ANSWER, outcomes)
    assert (result.decision, result.rule) == ("block", "budget_refused")
    assert "max_cost_usd" in result.reasons[0].reason


def test_a_missing_outcome_for_a_claim_that_needs_evidence_blocks() -> None:
    result = decide(ANSWER, {"g0": grounded("g0")})  # g1 was never traced
    assert (result.decision, result.rule) == ("block", "missing_outcome")
    assert result.reasons[1].segment_id == "g1"


def test_a_trace_without_information_blocks() -> None:
    outcomes = all_grounded()
    outcomes["g0"] = SentenceOutcome("g0", "traced", verdict="no_information")
    assert decide(ANSWER, outcomes).rule == "no_information"
    outcomes["g0"] = SentenceOutcome("g0", "traced", verdict=None)
    assert decide(ANSWER, outcomes).decision == "block"


def test_an_internal_knowledge_claim_goes_to_review() -> None:
    outcomes = all_grounded()
    outcomes["g1"] = SentenceOutcome(
        "g1", "traced", verdict="internal_knowledge", sources=(SourceEvidence("s1", "silent", False, None),)
    )
    result = decide(ANSWER, outcomes)
    assert (result.decision, result.rule) == ("review", "internal_knowledge")


def test_a_claim_without_a_verified_quote_is_unverifiable_even_when_ablation_says_grounds() -> None:
    outcome = SentenceOutcome(
        "g0", "traced", verdict="attributed", sources=(SourceEvidence("s0", "supported", False, "grounds"),)
    )  # quote downgraded: not verified
    result = decide((ORDER,), {"g0": outcome})
    assert (result.decision, result.rule) == ("review", "unverifiable")


def test_block_outranks_review_whatever_the_order() -> None:
    review = SentenceOutcome("g0", "traced", verdict="internal_knowledge")
    block = SentenceOutcome("g1", "error", reason="timeout")
    assert decide((ORDER, REFUND), {"g0": review, "g1": block}).rule == "error"
    assert decide((REFUND, ORDER), {"g0": review, "g1": block}).rule == "error"


def test_a_conflated_credit_blocks_and_an_unsupported_citation_blocks() -> None:
    claim = "According to your order record, refunds take 5 to 7 business days after approval."
    conflated = audit_declared(claim, SHOP, ["s1"])
    assert conflated.outcome == "conflated"
    outcome = SentenceOutcome("g1", "traced", "attributed", grounded("g1", "s1").sources, conflated)
    result = decide((GateSentence("g1", claim, "traceable"),), {"g1": outcome})
    assert (result.decision, result.rule) == ("block", "conflated")
    assert "grounded by s1" in result.reasons[0].reason
    unsupported = audit_declared(claim, SHOP, [])
    outcome = SentenceOutcome("g1", "traced", "attributed", (), unsupported)
    assert decide((GateSentence("g1", claim, "traceable"),), {"g1": outcome}).rule == "unsupported_citation"
    credit = "According to the help center, refunds take 5 to 7 business days."
    consistent = audit_declared(credit, SHOP, ["s1"])
    outcome = SentenceOutcome("g1", "traced", "attributed", grounded("g1", "s1").sources, consistent)
    assert decide((REFUND,), {"g1": outcome}).allowed


def test_a_quoted_sentence_passes_for_free_unless_its_credit_is_wrong() -> None:
    free = decide((QUOTED,), {})
    assert (free.decision, free.rule, free.reasons[0].rule) == ("allow", "all_grounded", "quoted")
    assert decide((QUOTED,), {"g2": quoted_outcome("g2", ["s1"])}).reasons[0].rule == "quoted"
    wrong = audit_declared("Your order record says damaged items qualify for a full refund.", SHOP, ["s1"])
    result = decide((QUOTED,), {"g2": quoted_outcome("g2", ["s1"], wrong)})
    assert (result.decision, result.rule) == ("block", "conflated")
    assert decide((ORDER,), {"g0": quoted_outcome("g0", [])}).decision == "block"


def test_sentences_that_need_no_evidence_pass_but_an_error_on_them_still_blocks() -> None:
    result = decide((ACTION, OFFER), {})
    assert (result.decision, result.rule) == ("allow", "no_evidence_needed")
    result = decide((ACTION, OFFER), {"g3": SentenceOutcome("g3", "error", reason="boom")})
    assert result.decision == "block"


def test_an_empty_answer_blocks_and_duplicate_ids_are_rejected() -> None:
    assert decide((), {}) == AnswerDecision("block", "no_sentences", ())
    with pytest.raises(ValueError):
        decide((ORDER, ORDER), {})


def _support(verdict: SupportLabel, quote: str | None, downgraded: bool = False) -> SupportVerdictModel:
    return SupportVerdictModel(
        verdict=verdict,
        quote=quote,
        line_start=1,
        line_end=1,
        confidence=0.9,
        downgraded=downgraded,
        reason="",
        calls=1,
    )


def _trace(verdict: Verdict, sources: list[tuple[str, Role | None, SupportVerdictModel | None]]) -> TraceResultModel:
    scores = tuple(
        SourceScoreModel(
            source_id=sid,
            layer=Layer.TOOLS,
            label=sid,
            kind="user_tool",
            delta=1.0,
            role=role,
            support=support,
            diagnosis=None,
        )
        for sid, role, support in sources
    )
    return TraceResultModel(
        gamma=6.0,
        s_all=8.0,
        s_none=2.0,
        verdict=verdict,
        verdict_text=verdict,
        layers=(),
        sources=scores,
        omitted=(),
        unscorable=(),
        round2_skipped_reason=None,
        warnings=(),
        calls=CallAccountModel(planned=9, made=9, saved=0, cached=0, failed=0),
        usage=Usage(),
        cost_usd=None,
        prompt_versions={},
        params={},
        model="scripted",
        corpus_digest="x",
    )


def test_outcomes_read_from_a_trace_result_or_its_dict() -> None:
    good = _trace("attributed", [("s0", "grounds", _support("supported", "A-10482")), ("s1", None, None)])
    downgraded = _trace("attributed", [("s0", "grounds", _support("supported", None, downgraded=True))])
    for trace, expected in ((good, "allow"), (downgraded, "review")):
        for form in (trace, trace.to_dict()):
            assert decide((ORDER,), {"g0": outcome_from_trace("g0", form)}).decision == expected


OUTCOMES = st.one_of(
    st.none(),
    st.builds(
        SentenceOutcome,
        st.just("x"),
        st.sampled_from(["quoted", "traced", "error", "budget_refused"]),
        st.sampled_from([None, "attributed", "redundant", "internal_knowledge", "no_information"]),
        st.lists(
            st.builds(
                SourceEvidence,
                st.sampled_from(["s0", "s1"]),
                st.sampled_from([None, "supported", "contradicted", "silent"]),
                st.booleans(),
                st.sampled_from([None, "grounds", "irrelevant"]),
            ),
            max_size=3,
        ).map(tuple),
    ),
)


@given(
    st.lists(
        st.tuples(st.sampled_from(["traceable", "quoted", "action", "agent_voice", "unanchored"]), OUTCOMES), max_size=6
    )
)
@settings(max_examples=300, deadline=None)
def test_fail_closed_property(rows: list[tuple[str, SentenceOutcome | None]]) -> None:
    sentences = tuple(GateSentence(f"g{i}", "x", status) for i, (status, _) in enumerate(rows))
    outcomes = {
        f"g{i}": SentenceOutcome(f"g{i}", o.kind, o.verdict, o.sources, o.declared, o.reason)
        for i, (_, o) in enumerate(rows)
        if o is not None
    }
    result = decide(sentences, outcomes)
    failed = any(o.kind in ("error", "budget_refused") for o in outcomes.values())
    missing = any(s.status == "traceable" and s.segment_id not in outcomes for s in sentences)
    evidence = [e for o in outcomes.values() for e in o.sources]
    contradicted = any(e.verdict == "contradicted" and e.verified for e in evidence)
    if failed or missing or contradicted or not sentences:
        assert result.decision == "block"
    if result.allowed:
        for s in sentences:
            o = outcomes.get(s.segment_id)
            if s.status == "traceable":
                assert o is not None and any(e.verdict == "supported" and e.verified for e in o.sources)
