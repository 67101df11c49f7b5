"""The system prompt split into its rules (``estimator/corpus/rules.py``): each section an instructions source with
its own line span in the prompt, so a trace can name the rule that directs a sentence — the README's featured
sentence (``fixtures/eo_worldview_turn.json`` r10) included, whose rule sits past the 700-token scoring window of
the prompt kept whole. ``Params(instructions_as_rules=False)`` is the seed's Algorithm 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.fake_openai import FakeOpenAI

from estimator.audit.declared import audit_declared, declared_refs
from estimator.corpus.build import INSTRUCTIONS_LABEL, build_corpus
from estimator.corpus.rules import MIN_RULE_TOKENS, max_rules, split_rules
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus, Layer, Unit
from estimator.cost import plan_calls
from estimator.loo.judged import trace_claim
from estimator.params import DEFAULT_PARAMS, Params
from estimator.seams.llm import LLMRequest, ScriptedLLM
from estimator.tokens import ApproxTokenizer
from provenance_api.cli.main import main
from provenance_api.providers.free_tier import corpus_for

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
EO = FIXTURES / "eo_worldview_turn.json"
WHOLE = Params(instructions_as_rules=False)
RULE = "- Always include a non-authoritative disclaimer in the user-facing narrative."
HEDGE = "Non-authoritative note: classification maps can change"
TOK = ApproxTokenizer()


def eo_turn() -> StoredTurn:
    return StoredTurn.model_validate_json(EO.read_text(encoding="utf-8"))


def turn_with(prompt: str) -> StoredTurn:
    return StoredTurn.model_validate({"turn_id": "t", "response": "Done.", "system_prompt": prompt})


def rules_of(corpus: Corpus) -> tuple[Unit, ...]:
    return corpus.in_layer(Layer.INSTRUCTIONS)


# ---- the splitter ---------------------------------------------------------------------------------------------


def test_the_featured_prompt_is_eight_rules_each_pinned_to_its_prompt_lines() -> None:
    turn = eo_turn()
    prompt = turn.system_prompt or ""
    lines = prompt.split("\n")
    rules = rules_of(corpus_for(turn))  # the corpus the service and the command build: their tokenizer
    assert len(rules) == max_rules(DEFAULT_PARAMS) == 8
    covered: list[int] = []
    for unit in rules:
        assert unit.prompt_lines is not None and unit.kind == "instructions" and unit.tool == "system_prompt"
        start, end = unit.prompt_lines
        assert unit.text == "\n".join(lines[start - 1 : end])  # line n of the rule is prompt line start + n - 1
        assert unit.label.startswith("instructions §") and unit.label.endswith(f"· prompt lines {start}–{end}")
        assert unit.evidence.source == "system_prompt" and unit.unversioned
        assert any(f"prompt lines {start}–{end}" in note for note in unit.evidence.transformations)
        covered += [n for n in range(start, end + 1) if lines[n - 1].strip()]
    assert covered == [n for n, line in enumerate(lines, 1) if line.strip()]  # every line once, in order
    (carrier,) = [u for u in rules if RULE in u.text]
    at = lines.index(RULE) + 1
    assert '"Non-authoritative communication"' in carrier.label and carrier.prompt_lines is not None
    assert carrier.prompt_lines[0] <= at <= carrier.prompt_lines[1] and at > 60  # past the seed's 700-token window
    assert carrier.lines[at - carrier.prompt_lines[0]] == RULE


def test_headings_of_every_kind_list_items_and_paragraphs_make_sections() -> None:
    filler = "Follow it closely and tell the customer exactly what it means for their order today."
    prompt = "\n".join(
        [
            "You are the Brightkitchen support agent. " + filler,
            "",
            "# Orders",
            "- Look up the order before you discuss it. " + filler,
            "* Never reveal a full card number. " + filler,
            "",
            "3. Refund policy",
            "1. Refunds go to the original payment method. " + filler,
            "a) A damaged item is refunded in full. " + filler,
            "",
            "DELIVERY",
            "Parcels ship within two days of payment. " + filler,
            "",
            "Returns:",
            "Returns are free within thirty days. " + filler,
        ]
    )
    rules = split_rules(prompt, TOK.count, 700, 8)
    assert [r.titles for r in rules] == [
        ("You are the Brightkitchen support agent…",),
        ("Orders",),
        ("Refund policy",),
        ("DELIVERY",),
        ("Returns",),
    ]
    assert [(r.line_start, r.line_end) for r in rules] == [(1, 1), (3, 5), (7, 9), (11, 12), (14, 15)]
    assert rules[2].label == 'instructions §3 "Refund policy" · prompt lines 7–9'


def test_tiny_sections_join_a_neighbour_and_the_count_is_capped_smallest_pairs_first() -> None:
    sections = [
        f"## Section {i}\n- Rule {i}: " + "keep the customer informed at every step " * (2 + i % 3) for i in range(40)
    ]
    prompt = "\n\n".join(["## Tiny\nBe kind.", *sections])
    rules = split_rules(prompt, TOK.count, 700, 8)
    assert len(rules) == 8
    assert rules[0].titles[:2] == ("Tiny", "Section 0")  # under MIN_RULE_TOKENS: merged into the next
    assert TOK.count("## Tiny\nBe kind.") < MIN_RULE_TOKENS
    assert [r.first for r in rules] == sorted(r.first for r in rules) and rules[-1].last == 41
    merged = next(r for r in rules if len(r.titles) > 3)
    assert merged.label.count('"') == 6 and f"and {len(merged.titles) - 3} more" in merged.label


def test_a_section_over_the_window_is_split_between_items_and_one_long_item_is_cut_with_the_warning() -> None:
    items = [f"- Rule {i}: " + "the agent must check the fare rules of the booking carefully " * 12 for i in range(12)]
    long_item = "- One rule: " + "every word of this rule matters to the judge who reads it " * 120
    prompt = "\n".join(["## Fares", *items, "", "## Long", long_item])
    corpus = build_corpus(turn_with(prompt), tokenizer=TOK)
    rules = rules_of(corpus)
    parts = [u for u in rules if '"Fares"' in u.label]
    assert len(parts) > 1 and [f"(part {n})" in u.label for n, u in enumerate(parts, 1)] == [True] * len(parts)
    assert all(u.evidence.tokens <= DEFAULT_PARAMS.source_token_cap for u in parts)
    assert parts[0].header == "" and all(u.header == "## Fares" for u in parts[1:])  # the heading, not evidence
    assert all(u.evidence.tokens == TOK.count(u.shown) for u in rules)  # each counted as shown, and remembered:
    assert build_corpus(turn_with(prompt), tokenizer=TOK) == corpus  # the same corpus from the memo
    (long,) = [u for u in rules if '"Long"' in u.label]
    assert long.evidence.tokens > DEFAULT_PARAMS.source_token_cap
    assert [w for w in corpus.warnings if "scoring window" in w] and all(
        w.startswith(long.id + " ") for w in corpus.warnings if "scoring window" in w
    )


@pytest.mark.parametrize(
    "prompt",
    ["Be brief.", "You book appointments for the clinic.\nNever give medical advice.", "# Only one\n- a single rule"],
)
def test_a_prompt_that_reads_as_one_rule_is_kept_whole_as_the_seed_keeps_it(prompt: str) -> None:
    ours, seed = build_corpus(turn_with(prompt)), build_corpus(turn_with(prompt), WHOLE)
    assert ours == seed and [u.label for u in rules_of(ours)] == [INSTRUCTIONS_LABEL]
    assert rules_of(ours)[0].prompt_lines is None


def test_the_seed_setting_keeps_the_prompt_whole_and_stored_params_keep_their_ids() -> None:
    turn = eo_turn()
    seed = build_corpus(turn, WHOLE)
    assert [u.label for u in rules_of(seed)] == [INSTRUCTIONS_LABEL] and len(seed) == 8
    assert len(build_corpus(turn)) == 5 + 8 + 2
    earlier = Params().model_dump()
    earlier.pop("instructions_as_rules")  # a job or result written before the setting existed
    assert Params.stored(earlier).instructions_as_rules is False
    assert Params.stored(Params().model_dump()).instructions_as_rules is True
    assert [u.id for u in build_corpus(turn, Params.stored(earlier)).units] == [u.id for u in seed.units]
    with pytest.raises(ValueError):
        Params.model_validate({"instructions_as_rules": "no"})  # a flag, not a word read as one


def test_what_the_new_default_changes_on_the_papers_fixtures() -> None:
    """Under the seed setting the paper's figures hold (tests/method/test_cost.py, test_recorded_outcomes.py); the
    default traces each rule: more sources, the same ceiling — round 2 is capped at MAX_SOURCES and the plan at
    MAX_CALLS, so the worst case grows by what the redundancy term can still fit."""
    eo = build_corpus(eo_turn())
    seed_plan, plan = plan_calls(build_corpus(eo_turn(), WHOLE)), plan_calls(eo)
    assert (seed_plan.round1, seed_plan.round2, seed_plan.spans, seed_plan.redundancy) == (5, 10, 16, 8)
    assert (plan.round1, plan.round2, plan.spans) == (5, 12 + 2, 2 * 12) and plan.total == DEFAULT_PARAMS.max_calls
    ndvi = StoredTurn.model_validate_json((FIXTURES / "ndvi_parametric_turn.json").read_text(encoding="utf-8"))
    assert [len(build_corpus(ndvi, p).in_layer(Layer.INSTRUCTIONS)) for p in (WHOLE, DEFAULT_PARAMS)] == [1, 5]


_LINES = st.sampled_from(
    [
        "",
        "# Refunds",
        "## Bags",
        "3. Payment",
        "REFUNDS",
        "Cancellations:",
        "- a rule of the policy",
        "  - a sub-rule",
        "1. first do this.",
        "a) then that",
        "A paragraph line that says a great deal about the booking rules.",
        "  ",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_LINES, max_size=60), st.integers(min_value=1, max_value=12))
def test_the_rules_cover_every_line_of_any_prompt_once_in_order(lines: list[str], most: int) -> None:
    prompt = "\n".join(lines)
    rules = split_rules(prompt, TOK.count, 60, most)
    assert len(rules) <= most and len(rules) != 1
    covered = [n for r in rules for n in range(r.line_start, r.line_end + 1) if lines[n - 1].strip()]
    assert not rules or covered == [n for n, line in enumerate(lines, 1) if line.strip()]
    for r in rules:
        assert r.text == "\n".join(lines[r.line_start - 1 : r.line_end]) and r.text.strip()
        assert r.first <= r.last and r.titles


# ---- a trace names the rule -----------------------------------------------------------------------------------


def knowing_judge(request: dict[str, Any]) -> str:
    """High only when the rule's text is in the shown context; a span check quotes it where it is."""
    system, user = request["messages"][0]["content"], request["messages"][-1]["content"]
    if "strict judge of support" in system:
        return "9" if RULE in user else "2"
    if RULE in user:
        return json.dumps({"verdict": "supported", "evidence_quote": RULE[2:], "confidence": 0.9, "reason": "-"})
    return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.8, "reason": "-"})


def test_provenance_trace_of_r10_names_the_rule_that_carries_it_with_its_line_span(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with FakeOpenAI(knowing_judge) as srv:
        args = ["trace", str(EO), "r10", "--model", "openai/fake", "--api-base", srv.base_url]
        code = main([*args, "--api-key", "test-key", "--yes", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data["verdict"] == "attributed"
    grounds = [s for s in data["sources"] if s["role"] == "grounds"]
    assert [s["layer"] for s in grounds] == ["instructions"]
    (source,) = grounds
    unit = corpus_for(eo_turn()).by_id(source["source_id"])
    assert source["label"] == unit.label and '"Non-authoritative communication"' in unit.label
    start, end = unit.prompt_lines or (0, 0)
    assert f"prompt lines {start}–{end}" in source["label"]
    support = source["support"]
    assert support["verdict"] == "supported" and not support["downgraded"]
    prompt_lines = (eo_turn().system_prompt or "").split("\n")
    assert prompt_lines[start - 1 + support["line_start"] - 1] == RULE  # the quote pins to the prompt's line


async def test_the_seed_corpus_cannot_show_that_rule_to_the_same_judge() -> None:
    """The finding: kept whole, the prompt is cut at the 700-token scoring window before its rule, so no removal
    ever shows the rule to the judge and the trace cannot name it."""
    turn = eo_turn()
    corpus = build_corpus(turn, WHOLE)
    claim = next(s for s in turn.response.split("\n") if s.startswith(HEDGE))

    def script(request: LLMRequest) -> str:
        return knowing_judge({"messages": [{"content": m.content} for m in request.messages]})

    result = await trace_claim(ScriptedLLM(script), claim, turn.effective_query(), corpus)
    assert result.verdict != "attributed" and not [s for s in result.sources if s.role == "grounds"]


# ---- the directive audit names the rule ----------------------------------------------------------------------


def test_a_credit_of_the_instructions_names_the_rule_that_directs_the_sentence() -> None:
    corpus = corpus_for(eo_turn())
    (carrier,) = [u for u in rules_of(corpus) if RULE in u.text]
    sentence = "Per my instructions, this note is a non-authoritative disclaimer for the user-facing narrative."
    (ref,) = declared_refs(sentence, corpus)
    assert ref.source_ids == (carrier.id,)
    audit = audit_declared(sentence, corpus, [carrier.id])
    assert audit.outcome == "consistent" and carrier.label in audit.explanation
    other = next(u for u in rules_of(corpus) if u.id != carrier.id)
    assert audit_declared(sentence, corpus, [other.id]).outcome == "conflated"
    whole = build_corpus(eo_turn(), WHOLE)  # the seed: the prompt is the one thing a credit can name
    assert [r.source_ids for r in declared_refs(sentence, whole)] == [(rules_of(whole)[0].id,)]


def test_the_conflation_set_audits_alike_with_the_prompt_split_into_rules() -> None:
    """The labelled conflation set (fixtures/conflation_set.json, ids of the prompt kept whole) on corpora split
    into rules: a source is found again by its label, an instructions source as the rule that holds the
    evidence; every original is still consistent and every swap conflated."""
    from test_conflation_set import ITEMS, _corpus

    wrong = []
    for item in ITEMS:
        whole, split = _corpus(json.dumps(item["turn"], sort_keys=True)), _split_corpus(item["turn"])
        grounding = _moved(whole, split, item["grounding_id"], item["evidence"])
        swapped_to = _moved(whole, split, item["swapped_id"])
        original = audit_declared(item["original"], split, [grounding])
        swapped = audit_declared(item["swapped"], split, [grounding])
        if original.outcome != "consistent" or grounding not in original.credited:
            wrong.append((item["id"], "original", original.outcome, original.credited, grounding))
        credits_it = swapped_to in swapped.credited or (  # a credit of the instructions names one of their rules
            _is_rule(split, swapped_to) and any(_is_rule(split, c) for c in swapped.credited)
        )
        if swapped.outcome != "conflated" or not credits_it or grounding in swapped.credited:
            wrong.append((item["id"], "swapped", swapped.outcome, swapped.credited, swapped_to))
    assert wrong == []


def _moved(whole: Corpus, split: Corpus, source_id: str, evidence: str | None = None) -> str:
    """The id in ``split`` of source ``source_id`` of ``whole``: by its label, or the rule holding ``evidence``."""
    unit = whole.by_id(source_id)
    if unit.layer != Layer.INSTRUCTIONS:
        return next(u.id for u in split.units if u.label == unit.label and u.layer == unit.layer)
    held = [u.id for u in rules_of(split) if evidence and evidence in u.text]
    return held[0] if held else rules_of(split)[0].id


def _is_rule(corpus: Corpus, source_id: str) -> bool:
    return corpus.by_id(source_id).layer == Layer.INSTRUCTIONS


def _split_corpus(where: dict[str, Any]) -> Corpus:
    from test_conflation_set import _tau_conversations, tau_turn

    if "fixture" in where:
        turn = StoredTurn.model_validate_json((FIXTURES / where["fixture"]).read_text(encoding="utf-8"))
    else:
        turn = tau_turn(_tau_conversations(), where["task_id"], where["message"])
    return build_corpus(turn)
