"""The labelled conflation set (fixtures/conflation_set.json): every swapped credit is flagged
``conflated`` and every original ``consistent``, with the grounding a scripted judge establishes.

Precision and recall of ``conflated`` are printed (run with ``-s`` to see them). They are measured on a
set written by the same hands as the detector, with one clear swap per item: they show the audit
does what it claims on explicit swaps, not how it generalises to paraphrased or hidden ones.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from estimator.audit.declared import audit_declared, grounding_ids_from_trace
from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.fence import split_fenced
from estimator.loo.judged import trace_claim
from estimator.params import Params
from estimator.seams.llm import LLMRequest, ScriptedLLM
from estimator.spans.verify import normalise

ROOT = Path(__file__).resolve().parents[2]
SET = json.loads((ROOT / "fixtures" / "conflation_set.json").read_text(encoding="utf-8"))
ITEMS: list[dict[str, Any]] = SET["items"]
TAU_BENCH = Path(__file__).resolve().parents[2] / "tests/data/tau-bench/airline-gpt-4o-dev.json"
WHOLE = Params(instructions_as_rules=False)
"""The set's ids and labels were written on corpora whose system prompt is one source (the seed's Algorithm 1);
tests/method/test_instruction_rules.py audits its items with the prompt split into rules."""


def tau_turn(conversations: list[dict[str, Any]], task_id: int, message: int) -> StoredTurn:
    """A τ-bench conversation cut at the assistant reply ``traj[message]``, as a stored turn: the tool
    calls since the last user message are the turn's tools (the flattened fallback path), everything
    before that message is history, the system message is the (snapshotted) agent instructions."""
    traj = next(c for c in conversations if c["task_id"] == task_id)["traj"]
    reply = traj[message]
    assert reply["role"] == "assistant" and reply.get("content"), (task_id, message)
    last_user = max(i for i in range(message) if traj[i]["role"] == "user")
    calls = []
    for i in range(last_user + 1, message):
        for call in traj[i].get("tool_calls") or []:
            answer = next(
                (
                    m["content"]
                    for m in traj[i + 1 : message]
                    if m["role"] == "tool" and m.get("tool_call_id") == call["id"]
                ),
                None,
            )
            calls.append(
                {"name": call["function"]["name"], "arguments": call["function"]["arguments"], "response": answer}
            )
    keep = ("role", "content", "name", "tool_call_id", "tool_calls")
    history = [{k: v for k, v in m.items() if k in keep} for m in traj[1 : last_user + 1]]
    return StoredTurn.model_validate(
        {
            "turn_id": f"tau-airline-{task_id}-{message}",
            "response": reply["content"],
            "system_prompt": traj[0]["content"],
            "system_prompt_versioned": True,
            "request_payload": {"messages": history},
            "response_payload": {"tool_calls": calls},
        }
    )


@cache
def _tau_conversations() -> list[dict[str, Any]]:
    if not TAU_BENCH.is_file():
        pytest.fail(f"the τ-bench airline conversations are missing: expected {TAU_BENCH}")
    data: list[dict[str, Any]] = json.loads(TAU_BENCH.read_text(encoding="utf-8"))
    return data


@cache
def _corpus(turn_key: str) -> Corpus:
    turn = json.loads(turn_key)
    if "fixture" in turn:
        text = (ROOT / "fixtures" / turn["fixture"]).read_text(encoding="utf-8")
        stored = StoredTurn.model_validate_json(text)
    else:
        stored = tau_turn(_tau_conversations(), turn["task_id"], turn["message"])
    return build_corpus(stored, WHOLE)


def corpus_of(item: dict[str, Any]) -> Corpus:
    return _corpus(json.dumps(item["turn"], sort_keys=True))


def precision_recall(predicted: list[bool], actual: list[bool]) -> tuple[float, float, int, int, int]:
    tp = sum(p and a for p, a in zip(predicted, actual, strict=True))
    fp = sum(p and not a for p, a in zip(predicted, actual, strict=True))
    fn = sum(a and not p for p, a in zip(predicted, actual, strict=True))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return precision, recall, tp, fp, fn


def test_the_set_is_large_enough_and_spans_fixtures_and_tau_bench() -> None:
    assert len(ITEMS) >= 30
    assert len({i["id"] for i in ITEMS}) == len(ITEMS)
    fixtures = {i["turn"]["fixture"] for i in ITEMS if "fixture" in i["turn"]}
    assert {"eo_worldview_turn.json", "fallback_path_turn.json", "failures_turn.json"} <= fixtures
    assert sum("tau_bench" in i["turn"] for i in ITEMS) >= 10


@pytest.mark.parametrize("item", ITEMS, ids=[i["id"] for i in ITEMS])
def test_labels_are_honest(item: dict[str, Any]) -> None:
    """Both sources exist with the labelled identity; the evidence is in the grounding source and
    not in the swapped one, so the swap really credits a source that does not carry the claim."""
    corpus = corpus_of(item)
    grounding, swapped = corpus.by_id(item["grounding_id"]), corpus.by_id(item["swapped_id"])
    assert grounding.id != swapped.id
    assert (grounding.label, swapped.label) == (item["grounding_label"], item["swapped_label"])
    evidence = normalise(item["evidence"])
    assert evidence in normalise(grounding.text)
    assert evidence not in normalise(swapped.text)
    assert item["original"] != item["swapped"]


def _audit_all(grounding_of: dict[str, tuple[str, ...]]) -> tuple[list[bool], list[bool], list[str]]:
    predicted: list[bool] = []
    actual: list[bool] = []
    wrong: list[str] = []
    for item in ITEMS:
        corpus = corpus_of(item)
        grounding = grounding_of[item["id"]]
        original = audit_declared(item["original"], corpus, grounding)
        swapped = audit_declared(item["swapped"], corpus, grounding)
        if original.outcome != "consistent" or item["grounding_id"] not in original.credited:
            wrong.append(f"{item['id']} original: {original.outcome} {original.credited}")
        if (
            swapped.outcome != "conflated"
            or item["swapped_id"] not in swapped.credited
            or item["grounding_id"] in swapped.credited
        ):
            wrong.append(f"{item['id']} swapped: {swapped.outcome} {swapped.credited}")
        predicted += [original.outcome == "conflated", swapped.outcome == "conflated"]
        actual += [False, True]
    return predicted, actual, wrong


def test_every_swap_is_conflated_and_every_original_consistent() -> None:
    predicted, actual, wrong = _audit_all({i["id"]: (i["grounding_id"],) for i in ITEMS})
    assert wrong == []
    precision, recall, tp, fp, fn = precision_recall(predicted, actual)
    print(
        f"\nconflation set: {len(ITEMS)} items, {len(predicted)} sentences — conflated precision "
        f"{precision:.3f} recall {recall:.3f} (tp={tp} fp={fp} fn={fn})"
    )
    assert (precision, recall) == (1.0, 1.0)


def _scripted_judge(item: dict[str, Any]) -> ScriptedLLM:
    """A judge that knows the label: the claim holds exactly when the grounding source is shown, and a
    span check of a source answers ``supported`` with the evidence when that source contains it."""
    header = f"\n[{item['grounding_id']}] "
    evidence = item["evidence"]

    def script(request: LLMRequest) -> str:
        user = request.messages[-1].content
        if request.purpose == "judge":
            return "9" if header in user else "1"
        regions = split_fenced(user)[0]
        shown = regions[-1] if regions else ""  # the source's region: the claim's comes first
        if normalise(evidence) in normalise(shown):
            return json.dumps(
                {
                    "verdict": "supported",
                    "evidence_quote": evidence,
                    "confidence": 0.9,
                    "reason": "the source states it",
                }
            )
        return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.8, "reason": "nothing"})

    return ScriptedLLM(script)


async def test_a_scripted_judge_establishes_the_labelled_grounding_and_the_audit_agrees() -> None:
    grounding_of: dict[str, tuple[str, ...]] = {}
    for item in ITEMS:
        corpus = corpus_of(item)
        trace = await trace_claim(_scripted_judge(item), item["original"], "", corpus)
        grounding = grounding_ids_from_trace(trace)
        assert item["grounding_id"] in grounding, (item["id"], grounding)
        assert item["swapped_id"] not in grounding, (item["id"], grounding)
        assert grounding_ids_from_trace(trace.to_dict()) == grounding
        grounding_of[item["id"]] = grounding
    predicted, actual, wrong = _audit_all(grounding_of)
    assert wrong == []
    precision, recall, *_ = precision_recall(predicted, actual)
    print(f"\nconflation set, grounding from scripted-judge traces: precision {precision:.3f} recall {recall:.3f}")
    assert (precision, recall) == (1.0, 1.0)


def test_precision_recall_counts_what_it_should() -> None:
    assert precision_recall([True, False, True, False], [True, True, False, False])[:2] == (0.5, 0.5)
    assert precision_recall([False, False], [False, True])[:2] == (0.0, 0.0)
