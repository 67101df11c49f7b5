"""Freshness rules for actions: a ``send_money`` call needs evidence from ``get_balance`` no older than 30 s (from the
same principal, with no lossy transformation). A breach names the rule, the source and its age; a fresh balance
passes; a turn with no times says the rule is not checkable; a bad rules file names the file and the field. The
ages come from the times the stored turn recorded, and nothing is judged without rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli_run import run_cli
from support.custody_turns import T0, at, payment_turn

from estimator.actions.targets import action_context, extract_actions
from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.custody.ages import answer_time, source_ages
from estimator.custody.freshness import (
    FreshnessPolicy,
    FreshnessRule,
    FreshnessRulesError,
    check_freshness,
    parse_policy,
)
from estimator.params import DEFAULT_PARAMS

RULE = FreshnessRule(
    action_tool="send_money", evidence_tool="get_balance", max_age_seconds=30, same_principal=True, lossless=True
)
POLICY = FreshnessPolicy(rules=(RULE,))
RULES_TOML = """
[[rules]]
action_tool = "send_money"
evidence_tool = "get_balance"
max_age_seconds = 30
same_principal = true
lossless = true
"""


def findings(turn: StoredTurn, policy: FreshnessPolicy = POLICY) -> list[Any]:
    corpus = build_corpus(turn)
    payment = next(a for a in extract_actions(turn) if a.tool == "send_money")
    context = action_context(turn, corpus, payment)
    return list(check_freshness(payment.tool, payment.produced_at, payment.principal, context.units, policy))


def test_a_balance_older_than_the_rule_allows_is_a_breach_naming_the_rule_the_source_and_its_age() -> None:
    (finding,) = findings(payment_turn(T0, at(45)))
    assert finding.status == "breach"
    assert finding.rule == (
        "a send_money call needs evidence from get_balance no older than 30 s, from the same principal, "
        "with no lossy transformation"
    )
    assert finding.source_id == "s0" and finding.age_seconds == 45.0
    assert finding.failed == ("age 45 s is over 30 s",)


def test_a_fresh_balance_from_the_same_principal_passes() -> None:
    (finding,) = findings(payment_turn(T0, at(10)))
    assert (finding.status, finding.source_id, finding.age_seconds, finding.failed) == ("pass", "s0", 10.0, ())


def test_a_turn_with_no_timestamps_says_the_rule_is_not_checkable() -> None:
    (finding,) = findings(payment_turn(None, None))
    assert finding.status == "not checkable" and finding.age_seconds is None
    assert finding.failed == ("no timestamps: the source's and the action's time not recorded",)
    corpus = build_corpus(payment_turn(None, None))
    assert {a.shown for a in source_ages(corpus.units, answer_time(payment_turn(None, None)))} == {
        "not recorded (no time for the source or the moment)"
    }


def test_another_principal_and_a_cut_balance_are_breaches_each_saying_what_failed() -> None:
    (other,) = findings(payment_turn(T0, at(5), fetched_for="mallory"))
    assert other.status == "breach" and other.failed == ("fetched for mallory, the action was made for alice",)
    long_balance = "Balance: 1,200.00 EUR\n" + "ledger line\n" * (DEFAULT_PARAMS.source_token_cap + 10)
    (cut,) = findings(payment_turn(T0, at(5), balance=long_balance))
    assert cut.status == "breach" and cut.failed[0].startswith("lossy: truncated to")


def test_no_evidence_read_before_the_call_is_a_breach_and_other_tools_have_no_rule() -> None:
    rule = RULE.model_copy(update={"evidence_tool": "get_limits"})
    (finding,) = findings(payment_turn(), FreshnessPolicy(rules=(rule,)))
    assert finding.status == "breach" and finding.source_id is None
    assert finding.failed == ("no evidence from get_limits",)
    assert findings(payment_turn(), FreshnessPolicy()) == []


def test_rules_read_from_toml_and_json_and_a_bad_file_names_the_file_and_field() -> None:
    assert parse_policy(RULES_TOML, "rules.toml") == POLICY
    assert parse_policy(json.dumps({"rules": [RULE.model_dump()]}), "rules.json") == POLICY
    bad = RULES_TOML.replace("max_age_seconds = 30", "max_age_seconds = -5")
    with pytest.raises(FreshnessRulesError) as caught:
        parse_policy(bad, "ops/rules.toml")
    assert str(caught.value).startswith("freshness rules ops/rules.toml: rules[0].max_age_seconds: ")
    with pytest.raises(FreshnessRulesError, match=r"rules.toml: rules\[0\].same_principal: "):
        parse_policy(RULES_TOML.replace("same_principal = true", 'same_principal = "yes"'), "rules.toml")
    with pytest.raises(FreshnessRulesError, match=r"r.json: \(file\): not valid JSON"):
        parse_policy("{rules: ", "r.json")


def test_gate_json_carries_envelopes_ages_and_the_breach(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turn_file = tmp_path / "pay.json"
    turn_file.write_text(payment_turn(T0, at(45)).model_dump_json())
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES_TOML)
    code, out, _ = run_cli(capsys, "gate", str(turn_file), "--json", "--freshness-rules", str(rules))
    assert code == 0
    balance = out["sources"][0]
    assert set(balance["envelope"]) >= {
        "tool", "server", "resource", "observed_at", "principal", "digest", "transformations", "custody"
    }  # fmt: skip
    assert balance["envelope"] | {"digest": "…", "transformations": []} == {
        "tool": "get_balance",
        "server": "bank",
        "resource": None,
        "observed_at": "2026-03-02T09:00:00Z",
        "principal": "alice",
        "tenant": None,
        "scope": None,
        "digest": "…",
        "transformations": [],
        "derived_from": [],
        "custody": "history",
    }
    payment = next(a for a in out["actions"] if a["tool"] == "send_money")
    assert payment["produced_at"] == "2026-03-02T09:00:45Z"
    assert payment["source_ages"][0] == {"source_id": "s0", "age_seconds": 45.0, "age": "45 s"}
    (finding,) = payment["freshness"]
    assert (finding["status"], finding["source_id"], finding["age_seconds"]) == ("breach", "s0", 45.0)
    code, text, _ = run_cli(capsys, "gate", str(turn_file), "--no-color", "--freshness-rules", str(rules))
    assert "freshness breach: s0 from get_balance: age 45 s is over 30 s" in text
    (line,) = [ln for ln in text.splitlines() if "get_balance()" in ln]
    assert line.endswith(" tokens, 50 s old]")  # its age when the answer was produced
    assert out["answered_at"] == "2026-03-02T09:00:50Z" and balance["age"] == "50 s"


def test_without_rules_the_gate_shows_ages_and_judges_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROVENANCE_FRESHNESS_RULES", raising=False)
    turn_file = tmp_path / "pay.json"
    turn_file.write_text(payment_turn(T0, at(45)).model_dump_json())
    code, out, _ = run_cli(capsys, "gate", str(turn_file), "--json")
    assert code == 0 and all(a["freshness"] == [] for a in out["actions"]) and out["freshness_rules"] == 0
    untimed = tmp_path / "untimed.json"
    untimed.write_text(payment_turn(None, None).model_dump_json())
    code, text, _ = run_cli(capsys, "gate", str(untimed), "--no-color")
    assert "ages: not recorded (the answer's time not in the history)" in text


def test_a_bad_rules_file_is_a_usage_error_naming_the_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    turn_file = tmp_path / "pay.json"
    turn_file.write_text(payment_turn().model_dump_json())
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES_TOML.replace('evidence_tool = "get_balance"\n', ""))
    code, out, _ = run_cli(capsys, "gate", str(turn_file), "--json", "--freshness-rules", str(rules))
    assert code == 2
    assert f"freshness rules {rules}: rules[0].evidence_tool: Field required" in out["error"]["detail"]
    assert out["error"]["field"] == "freshness_rules.rules[0].evidence_tool"
