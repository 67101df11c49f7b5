"""Redaction (``PROVENANCE_REDACT_PATTERNS``): configured values replaced by ``[redacted:NAME]`` on the same line
before a turn is stored, so the stored text, its digest and its custody record are of the redacted text; the
turn records which sources had how many values replaced, never the values; a bad pattern stops the start,
naming the setting."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from support.api_server import SMALL_CLAIM, InProcessApi, KeyedJudge, scripted_factory, small_turn
from support.fake_openai import FakeOpenAI, FakeReply

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from provenance_api.cli.main import main
from provenance_api.cli.settings import load_settings
from provenance_api.core.errors import InvalidInput
from provenance_api.core.redaction import BUILTINS, Redactor, parse_patterns
from provenance_api.operations.redaction import redact_turn
from provenance_api.storage.crud_turns import canonical

KEY = "sk-proj-" + "Zq8" * 10  # a planted API key
CARD = "4111 1111 1111 1111"  # passes the Luhn check
NOT_A_CARD = "4111 1111 1111 1112"  # does not


def builtins(*names: str) -> Redactor:
    return Redactor.from_patterns(parse_patterns(",".join(names)))


def test_builtins_replace_keys_luhn_valid_cards_and_bearer_tokens_on_the_same_line() -> None:
    text = f"key {KEY}\ncard {CARD}, order {NOT_A_CARD}\nAuthorization: Bearer abcdefgh12345678"
    redacted, counts = builtins("api_key", "card_number", "bearer_token").redact(text)
    assert redacted == (
        "key [redacted:api_key]\ncard [redacted:card_number], order "
        f"{NOT_A_CARD}\nAuthorization: Bearer [redacted:bearer_token]"
    )
    assert counts == {"api_key": 1, "card_number": 1, "bearer_token": 1}


def test_a_match_across_lines_keeps_every_later_line_where_it_was() -> None:
    redactor = Redactor.from_patterns(parse_patterns('{"block": "BEGIN[\\\\s\\\\S]*?END"}'))
    redacted, _ = redactor.redact("a\nBEGIN\nx\nEND tail\nlast")
    assert redacted.splitlines() == ["a", "[redacted:block]", "", " tail", "last"]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ('{"ticket": "TCK-("}', "the pattern of 'ticket' is not a valid regular expression"),
        ("api_key,passwords", "no built-in pattern 'passwords'"),
        ('{"Bad Name": "x"}', "is not a pattern name"),
        ('{"empty": "x*"}', "matches the empty text"),
    ],
)
def test_a_bad_pattern_is_refused_at_startup_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, value: str, says: str
) -> None:
    monkeypatch.setenv("PROVENANCE_REDACT_PATTERNS", value)
    with pytest.raises(InvalidInput) as refused:
        load_settings()
    assert refused.value.field == "PROVENANCE_REDACT_PATTERNS" and says in refused.value.detail


def test_nothing_is_redacted_unless_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROVENANCE_REDACT_PATTERNS", raising=False)
    assert not load_settings().redactor
    turn = StoredTurn.model_validate(small_turn(response=f"Use {KEY}."))
    assert redact_turn(turn, load_settings().redactor) is turn
    assert set(BUILTINS) == {"api_key", "card_number", "bearer_token"}


def stored_bytes(data_dir: Path) -> bytes:
    """The SQLite database as stored: its file and its write-ahead log."""
    return b"".join(p.read_bytes() for p in sorted(data_dir.glob("provenance.db*")))


def planted() -> dict[str, Any]:
    turn = small_turn("planted")
    turn["response_payload"]["tool_calls"][0]["response"] += f"\nDebug: api key {KEY}; card {CARD}."
    return turn


def test_a_planted_key_is_replaced_before_storing_and_the_digests_are_of_the_redacted_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with (
        InProcessApi(
            tmp_path, warm_up=False, llm_factory=scripted_factory(), redact_patterns="api_key,card_number"
        ) as srv,
        srv.client(srv.admin_key) as api,
    ):
        stored = api.post("/v1/turns", json=planted())
        assert stored.status_code == 201, stored.text
        back = api.get("/v1/turns/planted").json()
        quoted = api.post("/v1/quotes", json={"turn_id": "planted", "sentence": SMALL_CLAIM}).json()
        started = api.post("/v1/traces", json={"quote_id": quoted["quote_id"]})
        result = api.get(started.headers["location"], params={"wait": "true"}).json()["result"]
        with srv.client(srv.admin_key) as admin:
            audit = admin.get("/v1/admin/audit/verify").json()
    turn = StoredTurn.model_validate(back["turn"])
    tool_text = turn.response_payload.tool_calls[0].response
    assert tool_text.endswith("\nDebug: api key [redacted:api_key]; card [redacted:card_number].")
    assert turn.metadata["provenance_redacted"] == {
        "values": 2,
        "patterns": {"api_key": 1, "card_number": 1},
        "sources": {"s0": 2},
    }
    assert stored.json()["digest"] == canonical(turn)[1]
    database = stored_bytes(tmp_path)
    assert KEY.encode() not in database and CARD.encode() not in database
    source = build_corpus(turn).units[0]
    assert source.evidence.digest == hashlib.sha256(f"{source.header}\n{tool_text}".encode()).hexdigest()
    assert audit["intact"] is True and audit["checked"]["turns"] == 1
    said = "s0 (lookup_order(order_id=A-1)): values were redacted before the turn was stored"
    said += " (1 × api_key, 1 × card_number)"
    assert said in quoted["warnings"] and said in result["warnings"], (quoted["warnings"], result["warnings"])
    gate = tmp_path / "stored.json"
    gate.write_text(turn.model_dump_json())
    assert main(["gate", str(gate)]) == 0
    assert f"  redacted: {said}" in capsys.readouterr().out.splitlines()


def test_an_import_redacts_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PROVENANCE_REDACT_PATTERNS", "api_key")
    log = tmp_path / "chat.json"
    log.write_text(
        json.dumps(
            {
                "id": "c1",
                "messages": [
                    {"role": "system", "content": f"You are a support agent. Your key is {KEY}."},
                    {"role": "user", "content": "What is my key?"},
                    {"role": "assistant", "content": "I cannot share keys."},
                ],
            }
        )
    )
    assert main(["import", str(log), "--json"]) == 0
    database = stored_bytes(tmp_path / "data")
    assert KEY.encode() not in database and b"[redacted:api_key]" in database


def test_a_cli_trace_logs_and_traces_the_redacted_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(data))
    monkeypatch.setenv("PROVENANCE_REDACT_PATTERNS", "api_key,card_number")
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps(planted()), encoding="utf-8")
    judge = KeyedJudge()
    seen: list[str] = []

    def reply(request: dict[str, Any]) -> FakeReply:
        seen.append(json.dumps(request))
        return FakeReply(text=judge.openai(request))

    with FakeOpenAI(reply) as srv:
        argv = ["trace", str(turn), "r0", "--model", "openai/fake", "--api-base", srv.base_url, "--yes", "--json"]
        assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    said = "s0 (lookup_order(order_id=A-1)): values were redacted before the turn was stored"
    assert any(w.startswith(said) for w in result["warnings"]), result["warnings"]
    assert seen and not any(KEY in body or CARD in body for body in seen)  # the judge never saw them either
    database = stored_bytes(data)
    assert KEY.encode() not in database and CARD.encode() not in database and b"[redacted:api_key]" in database
    assert main(["audit", "verify"]) == 0  # the logged turn is chained as the service chains it
