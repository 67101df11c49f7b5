"""A trace result's sources carry their evidence envelopes, and the Markdown export lists them: a field the history
did not carry reads "not recorded". A result stored before envelopes reads and writes as it was."""

from __future__ import annotations

from datetime import UTC, datetime

import anyio
from support.custody_turns import payment_turn
from support.trace_records import succeeded_trace

from estimator.corpus.build import build_corpus
from estimator.results.models import SourceScoreModel, TraceResultModel
from estimator.seams.llm import LLMRequest, ScriptedLLM
from estimator.trace import run_trace
from provenance_api.operations.citation_markdown import citation_markdown
from provenance_api.providers.free_tier import tokenizer

CLAIM = "I have sent 100 EUR to Bob."


def traced() -> TraceResultModel:
    turn = payment_turn()
    corpus = build_corpus(turn, tokenizer=tokenizer())

    def chat(request: LLMRequest) -> str:  # the claim stands with the balance and falls without it
        if request.purpose != "judge":
            return '{"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"}'
        return "8" if "1,200.00 EUR" in request.messages[-1].content else "2"

    outcome = anyio.run(
        lambda: run_trace("judged", CLAIM, turn.effective_query(), corpus, llm=ScriptedLLM(chat), tokenizer=tokenizer())
    )
    assert isinstance(outcome.result, TraceResultModel)
    return outcome.result


def test_trace_sources_carry_their_envelopes_and_the_markdown_export_lists_them() -> None:
    result = traced()
    corpus = build_corpus(payment_turn(), tokenizer=tokenizer())
    by_id = {s.source_id: s for s in result.sources}
    assert by_id["s0"].envelope == corpus.by_id("s0").envelope
    assert by_id["s0"].envelope is not None and by_id["s0"].envelope.principal == "alice"
    assert result.to_dict()["sources"][0]["envelope"]["observed_at"] == "2026-03-02T09:00:00Z"

    at = datetime(2026, 3, 2, 9, 5, tzinfo=UTC)
    trace = succeeded_trace(result, turn_id="pay", claim=CLAIM, at=at)
    md = citation_markdown(trace)
    line = next(ln for ln in md.splitlines() if ln.strip().startswith("Evidence envelope: tool `get_balance`"))
    assert "server bank" in line and "principal alice" in line and "resource not recorded" in line
    assert "observed 2026-03-02T09:00:00+00:00" in line and "custody history" in line


def test_a_source_stored_without_an_envelope_reads_and_writes_as_it_was() -> None:
    stored = {
        "source_id": "s0",
        "layer": "tools",
        "label": "get_balance()",
        "kind": "user_tool",
        "delta": 1.0,
        "role": "grounds",
        "support": None,
        "diagnosis": None,
    }
    source = SourceScoreModel.model_validate(stored)
    assert source.envelope is None and "envelope" not in source.to_dict()


def test_an_action_trace_result_carries_its_freshness_findings() -> None:
    from estimator.actions.trace import trace_action
    from estimator.custody.freshness import FreshnessPolicy, FreshnessRule
    from provenance_api.providers.free_tier import with_freshness

    turn = payment_turn()
    corpus = build_corpus(turn, tokenizer=tokenizer())
    rule = FreshnessRule(action_tool="send_money", evidence_tool="get_balance", max_age_seconds=30)

    def chat(request: LLMRequest) -> str:
        if request.purpose != "judge":
            return '{"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"}'
        return "8" if "1,200.00 EUR" in request.messages[-1].content else "3"

    outcome = anyio.run(
        lambda: trace_action("judged", turn, corpus, "a1", llm=ScriptedLLM(chat), tokenizer=tokenizer())
    )
    checked = with_freshness(outcome, turn, corpus, "a1", FreshnessPolicy(rules=(rule,)))
    (finding,) = checked.result.to_dict()["freshness"]
    assert (finding["status"], finding["source_id"], finding["age_seconds"]) == ("breach", "s0", 45.0)
    assert finding["rule"] == "a send_money call needs evidence from get_balance no older than 30 s"
    unjudged = with_freshness(outcome, turn, corpus, "a1", FreshnessPolicy())
    assert "freshness" not in unjudged.result.to_dict()
