"""Every label is defined once: the estimator's words in ``estimator.loo.labels``, every other in the glossary,
which takes the estimator's from there; the viewer's JavaScript holds none of them (it reads them from
``GET /v1/glossary``), and the command line prints the glossary's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from estimator.corpus.units import Corpus
from estimator.loo import diagnosis
from estimator.loo.labels import (
    DIAGNOSIS_LABELS,
    INSTRUCTION_SUPPORT_LABELS,
    ROLE_LABELS,
    SUPPORT_LABELS,
    VERDICT_LABELS,
    VERDICT_TEXT,
)
from estimator.loo.logprob_cost import EstimatorChoice
from estimator.results.models import Role, SupportLabel, TraceResultModel, Verdict
from provenance_api.cli import render_text
from provenance_api.core.glossary import GLOSSARY, Term, diagnosis_label, find, glossary_out, label

JS_DIR = Path(__file__).resolve().parents[2] / "provenance_api" / "http" / "static" / "js"

LABELLED_PREFIXES = ("verdict.", "role.", "support.", "diagnosis.", "estimator.", "proxy.confirmed", "proxy.fallback")
"""The terms whose label the viewer shows in place of a value."""

FORMER_VIEWER_WORDS = (
    "grounds the claim",
    "distracts:",
    "no effect",
    "answered from the model",
    "not confirmed",
    "judge’s 1–9 score",
    "already knew",
)
"""Words the viewer once kept its own copy of: none may come back."""


def _labelled_terms() -> list[Term]:
    return [t for t in GLOSSARY.values() if t.key.startswith(LABELLED_PREFIXES)]


# --------------------------------------------------------------------------- every key has a label


@pytest.mark.parametrize(
    ("prefix", "literal"),
    [("role", Role), ("verdict", Verdict), ("support", SupportLabel), ("estimator", EstimatorChoice)],
)
def test_every_value_the_estimator_can_return_has_a_glossary_label(prefix: str, literal: object) -> None:
    values = get_args(literal)
    assert values
    for value in values:
        term = GLOSSARY[f"{prefix}.{value}"]
        assert term.label.strip() and "\n" not in term.label and len(term.label) <= 60, term.key


def test_the_estimators_words_are_the_glossarys_labels() -> None:
    assert set(VERDICT_LABELS) == set(get_args(Verdict)) == set(VERDICT_TEXT)
    assert set(ROLE_LABELS) == set(get_args(Role))
    assert set(SUPPORT_LABELS) == set(get_args(SupportLabel)) == set(INSTRUCTION_SUPPORT_LABELS)
    for verdict, words in VERDICT_LABELS.items():
        assert GLOSSARY[f"verdict.{verdict}"].label == words
        assert VERDICT_TEXT[verdict].startswith(words)  # a result's verdict_text leads with its label
    for role, words in ROLE_LABELS.items():
        assert GLOSSARY[f"role.{role}"].label == words
    for support, words in SUPPORT_LABELS.items():
        term = GLOSSARY[f"support.{support}"]
        assert (term.label, term.instruction_label) == (words, INSTRUCTION_SUPPORT_LABELS[support])
        assert label(term.key) == words and label(term.key, instructions=True) == term.instruction_label
    assert label("role.grounds", instructions=True) == ROLE_LABELS["grounds"]  # no instruction words: the label


def test_every_diagnosis_the_estimator_can_return_has_a_term_naming_its_value() -> None:
    returned = {v for k, v in vars(diagnosis).items() if k.isupper() and isinstance(v, str)}
    assert returned == set(DIAGNOSIS_LABELS)
    by_value = {t.value: t for t in GLOSSARY.values() if t.value is not None}
    assert set(by_value) == returned
    for value, words in DIAGNOSIS_LABELS.items():
        assert by_value[value].key.startswith("diagnosis.") and by_value[value].label == words
        assert diagnosis_label(value) == words
        assert [t.key for t in find(value)] == [by_value[value].key]  # explain finds it by the result's words
    assert "knew it" not in diagnosis_label(diagnosis.KNEW_IT)  # plain words, not the table's shorthand
    assert diagnosis_label("something new") == "something new"


def test_the_glossary_json_carries_the_labels() -> None:
    terms = {t["key"]: t for t in glossary_out().model_dump(mode="json")["terms"]}
    assert terms["verdict.internal_knowledge"]["label"] == VERDICT_LABELS["internal_knowledge"]
    assert terms["support.silent"]["instruction_label"] == INSTRUCTION_SUPPORT_LABELS["silent"]
    assert terms["diagnosis.knew_it"]["value"] == diagnosis.KNEW_IT
    assert terms["gamma"]["instruction_label"] is None and terms["gamma"]["value"] is None


# --------------------------------------------------------------------------- the viewer holds no copy


def _js_strings(source: str) -> list[str]:
    """The string and template literals of a JavaScript module; comments and regular expressions skipped."""
    out: list[str] = []
    k, n = 0, len(source)
    while k < n:
        c = source[k]
        if source.startswith("//", k):
            end = source.find("\n", k)
            k = n if end < 0 else end
        elif source.startswith("/*", k):
            k = source.index("*/", k) + 2
        elif c == "/" and re.search(r"(^|[(,=:\[!&|?{};+]|\breturn)\s*$", source[max(0, k - 12) : k]):
            k = _regex_end(source, k + 1)
        elif c in "'\"`":
            end = k + 1
            while source[end] != c:
                end += 2 if source[end] == "\\" else 1
            out.append(source[k + 1 : end])
            k = end + 1
        else:
            k += 1
    return out


def _regex_end(source: str, k: int) -> int:
    """Just past the regular expression literal whose body starts at ``k``."""
    in_class = False
    while source[k] != "/" or in_class:
        if source[k] == "\\":
            k += 1
        elif source[k] == "[":
            in_class = True
        elif source[k] == "]":
            in_class = False
        k += 1
    return k + 1


def _js_modules() -> dict[str, list[str]]:
    files = sorted(JS_DIR.glob("*.js"))
    assert len(files) > 20 and any(f.name == "glossary.js" for f in files)
    return {f.name: _js_strings(f.read_text(encoding="utf-8")) for f in files}


def _fold(text: str) -> str:
    return " ".join(text.replace("’", "'").casefold().split())


def test_the_scanner_reads_the_modules_literals() -> None:
    modules = _js_modules()
    assert "/v1/glossary" in modules["glossary.js"]
    assert "Any verdict" in modules["traces.js"]
    assert "internal_knowledge" in modules["words.js"]
    assert _js_strings("a = 'it\\'s' /* 'no' */ + \"x\" // 'nor'\n + `t` + f(/[\"']/g, 2 / 3, '/')") == [
        "it\\'s",
        "x",
        "t",
        "/",
    ]


def test_no_label_the_glossary_holds_is_written_in_the_viewers_javascript() -> None:
    words: dict[str, str] = {}  # folded words → the term that holds them
    keys: set[str] = set()  # a value's own name is logic (which key applies), not a label
    for term in _labelled_terms():
        keys.add(term.key.rsplit(".", 1)[-1])
        for shown in (term.label, term.instruction_label, term.value):
            if shown:
                words[_fold(shown)] = term.key
    for old in FORMER_VIEWER_WORDS:
        words[_fold(old)] = "a former copy"
    found: list[str] = []
    for name, literals in _js_modules().items():
        for literal in literals:
            if literal in keys:
                continue
            folded = _fold(literal)
            for shown, key in words.items():
                several = " " in shown or ":" in shown
                if (shown in folded) if several else (shown == folded):
                    found.append(f"{name}: {literal!r} holds the label of {key}")
    assert found == []


# --------------------------------------------------------------------------- the command line


def test_the_trace_text_prints_the_glossarys_labels() -> None:
    source = {
        "layer": "tools",
        "label": "lookup",
        "kind": "user_tool",
        "delta": 4.0,
        "role": "grounds",
        "support": {
            "verdict": "silent",
            "quote": None,
            "line_start": None,
            "line_end": None,
            "confidence": 0.5,
            "downgraded": False,
            "reason": "",
            "calls": 1,
        },
        "diagnosis": diagnosis.KNEW_IT,
    }
    result = TraceResultModel.model_validate(
        {
            "gamma": 0.0,
            "s_all": 5.0,
            "s_none": 5.0,
            "verdict": "internal_knowledge",
            "verdict_text": VERDICT_TEXT["internal_knowledge"],
            "layers": [{"layer": "tools", "delta": 4.0, "role": "grounds", "s_without": 1.0, "no_information": False}],
            "sources": [{**source, "source_id": "s0"}],
            "omitted": [],
            "unscorable": [],
            "round2_skipped_reason": None,
            "warnings": [],
            "calls": {"planned": 4, "made": 4, "saved": 0, "cached": 0, "failed": 0, "billed": 4},
            "usage": {},
            "cost_usd": 0.0,
            "prompt_versions": {},
            "params": {},
            "model": "m",
            "corpus_digest": "d",
            "diagnosis": diagnosis.KNEW_IT,
        }
    )
    text = render_text.trace_text(Corpus(units=()), result)
    assert f"Verdict: {VERDICT_LABELS['internal_knowledge']} — " in text
    assert f"Diagnosis: {DIAGNOSIS_LABELS[diagnosis.KNEW_IT]}" in text and "knew it" not in text
    assert f"→ {DIAGNOSIS_LABELS[diagnosis.KNEW_IT]}" in text
    assert f"Δ +4.00 {ROLE_LABELS['grounds']}" in text
    # a source whose removal lowers the score (it grounds the claim) never reads "says nothing about this claim"
    no_quote = GLOSSARY["support.no_quote"]
    assert f"      {no_quote.label} · confidence 0.50" in text and SUPPORT_LABELS["silent"] not in text
    assert re.search(rf"^  {re.escape(no_quote.label)}\s+{re.escape(no_quote.short)}", text, re.M)
