"""Declared attribution: detecting a sentence's explicit credits, resolving them, auditing them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimator.audit.declared import (
    SourceEvidence,
    audit_declared,
    audit_trace,
    contradicting_ids_from_trace,
    declared_refs,
    grounding_ids_from_trace,
    read_trace_sources,
)
from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus, Layer
from estimator.results.models import (
    CallAccountModel,
    DeclaredRefModel,
    SourceScoreModel,
    SupportVerdictModel,
    TraceResultModel,
)
from estimator.results.trace import Role, SupportLabel
from estimator.seams.llm import Usage

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def corpus(name: str) -> Corpus:
    return build_corpus(StoredTurn.model_validate_json((FIXTURES / name).read_text(encoding="utf-8")))


# s0 lookup_order, s1 search_help_center, s2 create_return_label, s3 instructions, s4 user, s5 agent
SHOP = corpus("fallback_path_turn.json")
# s0 read_file plots.csv, s1/s2 the failed query_warehouse and summarise_column (tool errors), s3/s4
# species_profile, s5 nbn.occurrence_summary, s6 the failed nbn.record_density, s7/s8 the instructions' two
# rules (§1–2 "Data", §3 "Conduct"), s9 user, s10 read_file summary.md (history), s11 agent
WOODS = corpus("failures_turn.json")


def credited(sentence: str, where: Corpus = SHOP) -> list[tuple[str, tuple[str, ...]]]:
    return [(r.kind, r.source_ids) for r in declared_refs(sentence, where)]


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("According to your order record, A-10482 was delivered on 2025-03-03.", [("phrase", ("s0",))]),
        ("The search results show refunds take 5 to 7 business days.", [("phrase", ("s1",))]),
        ("Per our refund policy, damaged items qualify for a full refund.", [("phrase", ("s1",))]),
        ("Per my instructions, I only show the last four digits.", [("phrase", ("s3",))]),
        ("As stated in the help center, refunds go to the original payment method.", [("phrase", ("s1",))]),
        ("The create_return_label call returned RL-55310.", [("phrase", ("s2",))]),
        ("create_return_label made RL-55310.", [("tool_name", ("s2",))]),
        ("As you mentioned earlier, the jug is cracked.", [("history", ("s4",))]),
        ("As I said before, I need the order number.", [("history", ("s5",))]),
        ("Refunds take 5 to 7 business days [s1].", [("citation_marker", ("s1",))]),
        ("Refunds take 5 to 7 business days [2].", [("citation_marker", ("s1",))]),  # the 2nd tool source
    ],
)
def test_explicit_credits_resolve_to_the_source_they_name(sentence: str, expected: list[Any]) -> None:
    assert credited(sentence) == expected


@pytest.mark.parametrize(
    "sentence",
    [
        "Refunds are issued to the original payment method within 5 to 7 business days.",
        "Please drop the parcel off at any partner parcel point.",
        "The parcel goes from the depot to the warehouse.",  # a weak cue naming no kind of source
        "The blender shows a crack along the jug.",  # "the X shows" where X is no source
        "It is $89 per item.",
    ],
)
def test_sentences_without_a_credit_declare_nothing(sentence: str) -> None:
    assert declared_refs(sentence, SHOP) == ()
    assert audit_declared(sentence, SHOP, ["s1"]).outcome == "none_declared"


def test_paths_file_names_and_tool_names_count_only_when_they_name_a_source() -> None:
    assert credited("The survey file surveys/2024/plots.csv covers 6 plots.", WOODS) == [("path", ("s0",))]
    assert credited("plots.csv covers 6 plots.", WOODS) == [("file_name", ("s0",))]
    assert credited("The 2023 numbers are in surveys/2023/summary.md.", WOODS) == [("path", ("s10",))]
    assert credited("The warehouse holds the table plots in warehouse/plots_2024.parquet.", WOODS) == []
    # A disclaimer is not a credit: the attachment was never read, and nothing is "drawn from it".
    assert credited("I could not read the attached survey_2024.xlsx, so nothing here is drawn from it.", WOODS) == []
    assert credited("I did not use species_profile for this.", WOODS) == []
    assert credited("Nothing here is drawn from the help center.", SHOP) == []
    # …while a negative claim keeps its credit.
    assert credited("There is no restocking fee per my instructions.", SHOP) == [("phrase", ("s3",))]


def test_the_best_matching_source_wins_and_ties_keep_every_candidate() -> None:
    assert credited("According to the species profile for Picea sitchensis, it is a conifer.", WOODS) == [
        ("phrase", ("s4",))
    ]
    both = [("phrase", ("s3", "s4"))]
    assert credited("According to the species profiles, both are native.", WOODS) == both
    assert credited("The species_profile tool says so.", WOODS) == [("phrase", ("s3", "s4"))]


def test_a_strong_cue_to_a_source_outside_the_context_is_still_a_credit() -> None:
    refs = declared_refs("According to Wikipedia, sessile oak is native to Britain.", WOODS)
    assert refs == (DeclaredRefModel(text="According to Wikipedia", span=(0, 22), source_ids=(), kind="phrase"),)
    sentence = "According to Wikipedia, sessile oak is native."
    assert audit_declared(sentence, WOODS, ["s3"]).outcome == "conflated"
    assert audit_declared(sentence, WOODS, []).outcome == "unsupported_citation"


def test_markers_in_lenticular_brackets_resolve_by_what_they_name() -> None:
    assert credited("Six plots were surveyed 【4:0†plots.csv】.", WOODS) == [("citation_marker", ("s0",))]
    assert credited("Six plots were surveyed 【4:0†annual_report.pdf】.", WOODS) == [("citation_marker", ())]


def test_a_url_credits_the_source_fetched_from_it() -> None:
    turn = StoredTurn.model_validate(
        {
            "turn_id": "web",
            "response": "x",
            "query": "q",
            "response_payload": {
                "tool_calls": [
                    {
                        "name": "web_fetch",
                        "arguments": {"url": "https://example.org/oak-report"},
                        "response": "Oaks: 312.",
                    },
                    {"name": "lookup_site", "arguments": {"site": "Wyre"}, "response": "Wyre: 2 plots."},
                ]
            },
        }
    )
    web = build_corpus(turn)
    assert credited("There are 312 records (https://example.org/oak-report).", web) == [("url", ("s0",))]
    assert credited("See https://example.org/elsewhere for more.", web) == []
    refs = declared_refs("According to https://example.org/elsewhere, there are 312.", web)
    assert [(r.kind, r.source_ids) for r in refs] == [("phrase", ())]


def test_spans_point_into_the_sentence_and_families_name_the_source_kind() -> None:
    sentence = "Refunds are quick, according to your order record."
    (ref,) = declared_refs(sentence, SHOP)
    assert sentence[ref.span[0] : ref.span[1]] == ref.text == "according to your order record"
    assert ref.families == ("order", "record")
    assert ref.to_dict() == {
        "text": ref.text,
        "span": list(ref.span),
        "source_ids": ["s0"],
        "kind": "phrase",
        "families": ["order", "record"],
    }


def test_the_four_outcomes() -> None:
    sentence = "According to the help center, damaged items qualify for a full refund."
    consistent = audit_declared(sentence, SHOP, ["s1"])
    assert consistent.outcome == "consistent" and consistent.credited == ("s1",)
    assert "s1 (search_help_center" in consistent.explanation
    conflated = audit_declared(sentence, SHOP, ["s0"])
    assert conflated.outcome == "conflated" and conflated.grounding == ("s0",)
    assert "credits s1" in conflated.explanation and "grounded by s0" in conflated.explanation
    unsupported = audit_declared(sentence, SHOP, [])
    assert unsupported.outcome == "unsupported_citation" and "silent" in unsupported.explanation
    contradicted = audit_declared(sentence, SHOP, [], contradicting_ids=["s1"])
    assert contradicted.outcome == "unsupported_citation" and "contradicts" in contradicted.explanation
    none = audit_declared("Damaged items qualify for a full refund.", SHOP, ["s1"])
    assert none.outcome == "none_declared" and none.declared == ()
    assert consistent.to_dict()["outcome"] == "consistent"


def test_one_right_credit_among_several_is_consistent() -> None:
    sentence = "Per your order record and the help center, the refund applies."
    assert audit_declared(sentence, SHOP, ["s1"]).outcome == "consistent"
    assert audit_declared(sentence, SHOP, ["s2"]).outcome == "conflated"


def _support(
    verdict: SupportLabel, quote: str | None, *, downgraded: bool = False, no_info: bool = False
) -> SupportVerdictModel:
    return SupportVerdictModel(
        verdict=verdict,
        quote=quote,
        line_start=1 if quote else None,
        line_end=1 if quote else None,
        confidence=0.9,
        downgraded=downgraded,
        reason="",
        calls=1,
        no_information=no_info,
    )


def _trace(sources: list[SourceScoreModel]) -> TraceResultModel:
    return TraceResultModel(
        gamma=6.0,
        s_all=8.0,
        s_none=2.0,
        verdict="attributed",
        verdict_text="attributed",
        layers=(),
        sources=tuple(sources),
        omitted=(),
        unscorable=(),
        round2_skipped_reason=None,
        warnings=(),
        calls=CallAccountModel(planned=10, made=10, saved=0, cached=0, failed=0),
        usage=Usage(),
        cost_usd=None,
        prompt_versions={},
        params={},
        model="scripted",
        corpus_digest="x",
    )


def _source(sid: str, role: Role | None, support: SupportVerdictModel | None) -> SourceScoreModel:
    return SourceScoreModel(
        source_id=sid,
        layer=Layer.TOOLS,
        label=sid,
        kind="user_tool",
        delta=1.0,
        role=role,
        support=support,
        diagnosis=None,
    )


def test_grounding_ids_from_a_trace_object_or_its_dict() -> None:
    trace = _trace(
        [
            _source("s0", "irrelevant", _support("supported", "A-10482")),  # verified quote: grounds
            _source("s1", "grounds", _support("silent", None)),  # ablation role: grounds
            _source("s2", "irrelevant", _support("supported", None, downgraded=True)),  # unverified: no
            _source("s3", "grounds", _support("contradicted", "never")),  # contradicts: never grounds
            _source("s4", None, None),  # not checked
            _source("s5", "distractor", _support("supported", "x", no_info=True)),  # no information: no
        ]
    )
    assert grounding_ids_from_trace(trace) == ("s0", "s1")
    assert grounding_ids_from_trace(trace.to_dict()) == ("s0", "s1")
    assert contradicting_ids_from_trace(trace) == ("s3",)
    assert [s.verified for s in read_trace_sources(trace)] == [True, False, False, True, False, False]
    assert grounding_ids_from_trace({"sources": []}) == ()
    assert audit_trace("Per your order record, it shipped.", SHOP, trace).outcome == "consistent"
    refuted = audit_trace("As stated in the return label confirmation, it shipped.", SHOP, trace.to_dict())
    assert refuted.outcome == "conflated" and refuted.grounding == ("s0", "s1")


CUE_PIECES = [
    "according to ",
    "per the ",
    "your order record says ",
    "as you said ",
    "[1] ",
    "[s9] ",
    "surveys/2024/plots.csv ",
    "https://example.org/x ",
    "create_return_label ",
    "from the help center ",
    "not ",
    ", ",
    ". ",
    "the ",
    "policy ",
    "refund ",
]


@given(st.lists(st.one_of(st.sampled_from(CUE_PIECES), st.text(max_size=12)), max_size=12))
@settings(max_examples=150, deadline=None)
def test_refs_always_point_into_the_sentence_and_resolve_to_real_sources(parts: list[str]) -> None:
    sentence = "".join(parts)
    refs = declared_refs(sentence, SHOP)
    ids = {u.id for u in SHOP.units}
    for ref in refs:
        assert 0 <= ref.span[0] < ref.span[1] <= len(sentence)
        assert sentence[ref.span[0] : ref.span[1]] == ref.text
        assert set(ref.source_ids) <= ids
    audit = audit_declared(sentence, SHOP, ["s1"])
    assert (audit.outcome == "none_declared") == (refs == ())


def test_a_redundant_source_grounds_the_claim_for_the_audit() -> None:
    assert SourceEvidence("s1", None, False, "redundant").grounds
    assert not SourceEvidence("s1", None, False, "irrelevant").grounds
