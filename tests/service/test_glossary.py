"""Every number and word a trace reports is explained: the glossary has each term the contract names and one for
every role, verdict, span-check label and estimator the method can return (a new literal without an explanation
fails here); ``GET /v1/glossary`` serves it without a key; ``provenance explain`` prints it; and the CLI's
trace text explains each term it shows."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import get_args

import pytest
from support.api_server import InProcessApi

from estimator.actions.origin import Origin
from estimator.corpus.units import Corpus
from estimator.loo.logprob_cost import EstimatorChoice
from estimator.results.models import Role, SupportLabel, TraceResultModel, Verdict
from provenance_api.cli import render_text
from provenance_api.cli.main import main
from provenance_api.core.glossary import GLOSSARY, Term, find

CONTRACT_KEYS = (
    "gamma",
    "s_all",
    "s_none",
    "delta",
    "role.grounds",
    "role.distractor",
    "role.irrelevant",
    "role.redundant",
    "verdict.attributed",
    "verdict.redundant",
    "verdict.internal_knowledge",
    "verdict.no_information",
    "confidence",
    "support.supported",
    "support.contradicted",
    "support.silent",
    "calls.planned",
    "calls.made",
    "calls.cached",
    "calls.billed",
    "calls.failed",
    "calls.saved",
    "tau",
    "tau_gamma",
    "warning.truncated",
    "warning.lookalike",
    "warning.paraphrase",
    "estimator.judged",
    "estimator.expected",
    "estimator.logprob",
    "estimator.proxy",
)


def test_every_key_the_contract_lists_is_explained() -> None:
    missing = [k for k in CONTRACT_KEYS if k not in GLOSSARY]
    assert missing == []


@pytest.mark.parametrize(
    ("prefix", "literal"),
    [
        ("role", Role),
        ("verdict", Verdict),
        ("support", SupportLabel),
        ("estimator", EstimatorChoice),
        ("origin", Origin),
    ],
)
def test_every_literal_the_method_can_return_has_a_term(prefix: str, literal: object) -> None:
    values = (
        [v.value for v in literal] if isinstance(literal, type) and issubclass(literal, Enum) else get_args(literal)
    )
    assert values  # the literal is read, not an empty stand-in
    assert [v for v in values if f"{prefix}.{v}" not in GLOSSARY] == []


def test_each_term_is_one_short_line_and_a_paragraph() -> None:
    for key, term in GLOSSARY.items():
        assert term.key == key
        assert "\n" not in term.short and 20 <= len(term.short) <= 120, key
        assert len(term.detail) > len(term.short) // 2 and "\n" not in term.detail, key
    with pytest.raises(ValueError, match="one line"):
        Term(key="x", label="x", short="a" * 121, detail="d")


def test_confidence_says_it_is_a_self_report_not_a_probability() -> None:
    confidence = GLOSSARY["confidence"]
    assert "self-report" in confidence.short and "not" in confidence.short
    assert "not calibrated" in confidence.detail


def test_the_thresholds_quote_the_method_defaults() -> None:
    from estimator.params import DEFAULT_PARAMS

    assert f"default {DEFAULT_PARAMS.tau:g}" in GLOSSARY["tau"].short
    assert f"default {DEFAULT_PARAMS.tau_gamma:g}" in GLOSSARY["tau_gamma"].short


def test_find_by_key_last_part_or_symbol() -> None:
    assert [t.key for t in find("grounds")] == ["role.grounds"]
    assert [t.key for t in find("Γ")] == ["gamma"]
    assert [t.key for t in find("cached")] == ["calls.cached"]
    assert {t.key for t in find("redundant")} == {"role.redundant", "verdict.redundant"}
    assert find("no such word at all") == []


def test_the_api_serves_the_glossary_without_a_key(tmp_path: Path) -> None:
    with InProcessApi(tmp_path, warm_up=False) as srv, srv.client() as anonymous:
        answer = anonymous.get("/v1/glossary")
        schema = anonymous.get("/openapi.json").json()
    assert answer.status_code == 200
    assert "max-age" in answer.headers["cache-control"]
    terms = answer.json()["terms"]
    assert [t["key"] for t in terms] == list(GLOSSARY)
    assert terms[0] == GLOSSARY[terms[0]["key"]].model_dump()
    assert "/v1/glossary" in schema["paths"]


def test_explain_prints_one_term_with_its_detail(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "gamma"]) == 0
    out = capsys.readouterr().out
    assert GLOSSARY["gamma"].short in out and GLOSSARY["gamma"].detail[:40] in out
    assert "\x1b[" not in out  # captured, not a terminal: no colour


def test_explain_lists_every_term_and_json_matches_the_api(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain"]) == 0
    out = capsys.readouterr().out
    assert all(key in out for key in GLOSSARY)
    assert main(["explain", "--json"]) == 0
    assert [t["key"] for t in json.loads(capsys.readouterr().out)["terms"]] == list(GLOSSARY)


def test_explain_of_an_unknown_term_is_a_usage_error_naming_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "flux capacitor"]) == 2
    err = capsys.readouterr().err
    assert "no term 'flux capacitor'" in err and "fix: run provenance explain" in err


def _result(**changes: object) -> TraceResultModel:
    base = {
        "gamma": 4.0,
        "s_all": 9.0,
        "s_none": 5.0,
        "verdict": "attributed",
        "verdict_text": "attributed",
        "layers": [{"layer": "tools", "delta": 4.0, "role": "grounds", "s_without": 5.0, "no_information": False}],
        "sources": [
            {
                "source_id": "s0",
                "layer": "tools",
                "label": "lookup",
                "kind": "user_tool",
                "delta": 0.0,
                "role": "redundant",
                "alone": 9.0,
                "support": {
                    "verdict": "supported",
                    "quote": "shipped",
                    "line_start": 1,
                    "line_end": 1,
                    "confidence": 0.9,
                    "downgraded": False,
                    "reason": "",
                    "calls": 1,
                },
                "diagnosis": None,
            }
        ],
        "omitted": [],
        "unscorable": [],
        "round2_skipped_reason": None,
        "warnings": [],
        "calls": {"planned": 12, "made": 3, "saved": 2, "cached": 4, "failed": 1, "billed": 2},
        "usage": {},
        "cost_usd": 0.01,
        "prompt_versions": {},
        "params": {},
        "model": "m",
        "corpus_digest": "d",
    }
    return TraceResultModel.model_validate({**base, **changes})


def test_the_trace_text_explains_each_term_it_shows() -> None:
    text = render_text.trace_text(Corpus(units=()), _result())
    for key in (
        "gamma",
        "s_all",
        "s_none",
        "delta",
        "role.grounds",
        "role.redundant",
        "alone",
        "support.supported",
        "confidence",
        "calls.planned",
        "calls.made",
        "calls.cached",
        "calls.billed",
        "calls.failed",
        "calls.saved",
    ):
        assert GLOSSARY[key].short in text, key
    assert GLOSSARY["role.distractor"].short not in text  # only what is shown is explained
    assert f"Verdict: attributed — {GLOSSARY['verdict.attributed'].short}" in text
    assert "12 planned · 3 made · 4 cached · 2 billed · 1 failed · cost $0.0100" in text
    assert "2 measurements reused within this trace" in text and "saved" not in text
    assert "unspent" not in text
