"""One vocabulary: every status and parameter the code defines is explained, and the surfaces use the glossary's
words.

The values are read from the code (the ``Literal`` types, the gate's enum, the diagnosis constants, the kinds of
caveat ``caveats.py`` builds, the fields of ``Params``), so a new status or parameter without a glossary term fails
here, and ``provenance explain VALUE`` must print the term that explains it. Progress events count calls in the call
account's words (made of planned), a measurement reused within the trace is called so everywhere, and the
plain-text trace list starts with a header row.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
import re
from enum import Enum
from pathlib import Path
from typing import get_args

import pytest

from estimator.free_tier.gating import GateStatus
from estimator.ledger import CallLedger
from estimator.loo import caveats, diagnosis
from estimator.params import DEFAULT_PARAMS, Params
from estimator.results.models import DeclaredOutcome, DisagreementKind, ProbeVerdict, Role, SupportLabel, Verdict
from estimator.results.trace import ProgressEvent
from provenance_api.cli import render_text
from provenance_api.cli.main import main
from provenance_api.cli.settings import load_settings, with_db
from provenance_api.cli.traces import HEADER
from provenance_api.cli.turn_input import load_turn
from provenance_api.core.glossary import GLOSSARY, find
from provenance_api.core.schemas import JobStatus, ProgressOut, TraceCalls
from provenance_api.operations.trace_log import CliTrace, finish_cli_trace, start_cli_trace
from provenance_api.providers import free_tier
from provenance_api.storage.session import Database

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "eo_worldview_turn.json"
NUMBERS_JS = ROOT / "provenance_api" / "http" / "static" / "js" / "numbers.js"
PROGRESS_JS = ROOT / "provenance_api" / "http" / "static" / "js" / "progress.js"
CALL_WORDS = ("planned", "made", "cached", "billed", "failed")


def _values(literal: object) -> list[str]:
    if isinstance(literal, type) and issubclass(literal, Enum):
        return [str(member.value) for member in literal]
    return [str(v) for v in get_args(literal)]


def _caveat_kinds() -> list[str]:
    """The kinds ``caveats.caveats`` can return: the first argument of every ``Caveat(...)`` it builds."""
    tree = ast.parse(inspect.getsource(caveats))
    return [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Caveat"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ]


def _diagnoses() -> list[str]:
    """Every diagnosis the estimator returns: the module's named constants."""
    return [v for k, v in vars(diagnosis).items() if k.isupper() and isinstance(v, str)]


def _explained(capsys: pytest.CaptureFixture[str], word: str) -> str:
    capsys.readouterr()
    assert main(["explain", word]) == 0, word
    return capsys.readouterr().out


STATUSES = [
    ("job status", "job", _values(JobStatus)),
    ("verdict", "verdict", _values(Verdict)),
    ("role", "role", _values(Role)),
    ("span-check label", "support", _values(SupportLabel)),
    ("sentence status", "sentence", _values(GateStatus)),
    ("probe verdict", "probe", _values(ProbeVerdict)),
    ("declared credit", "declared", _values(DeclaredOutcome)),
    ("disagreement", "disagreement", _values(DisagreementKind)),
]


@pytest.mark.parametrize(("what", "prefix", "values"), STATUSES, ids=[s[0] for s in STATUSES])
def test_explain_knows_every_status_the_code_defines(
    what: str, prefix: str, values: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert len(values) >= 3, what  # the literal was read, not an empty stand-in
    missing = [v for v in values if f"{prefix}.{v}" not in GLOSSARY]
    assert missing == [], f"{what}: no glossary term for {missing}"
    for value in values:
        assert f"({prefix}.{value})" in _explained(capsys, value), value


def test_explain_knows_every_diagnosis(capsys: pytest.CaptureFixture[str]) -> None:
    values = _diagnoses()
    assert len(values) >= 5
    for value in values:
        terms = [t for t in find(value) if t.key.startswith("diagnosis.")]
        assert terms and terms[0].value == value, value
        assert f"({terms[0].key})" in _explained(capsys, value)


def test_explain_knows_every_kind_of_warning(capsys: pytest.CaptureFixture[str]) -> None:
    kinds = _caveat_kinds()
    assert len(kinds) >= 3
    for kind in kinds:
        warnings = [t for t in find(kind) if t.key.startswith("warning.")]
        assert warnings, f"no warning.* term is labelled {kind!r}"
        assert f"({warnings[0].key})" in _explained(capsys, kind)


def test_explain_knows_every_parameter_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(Params.model_fields) >= 20
    for name, field in Params.model_fields.items():
        key = name if name in GLOSSARY else f"params.{name}"
        assert key in GLOSSARY, f"parameter {name} has no glossary term ({name} or params.{name})"
        assert f"({key})" in _explained(capsys, name), name
        if key.startswith("params."):
            default = getattr(DEFAULT_PARAMS, name)
            shown = str(default).lower() if isinstance(default, bool) else f"{default:,}"
            assert f"Default {shown}" in GLOSSARY[key].detail, (name, field.default)


def test_progress_events_count_calls_in_the_call_accounts_words() -> None:
    event_fields = [f.name for f in dataclasses.fields(ProgressEvent)]
    assert event_fields[:2] == ["made", "planned"]
    assert all(f"calls.{word}" in GLOSSARY for word in event_fields[:2])
    streamed = ProgressOut.model_fields
    assert not [name for name in streamed if name.startswith("calls_")]
    assert streamed["calls"].annotation is TraceCalls and tuple(TraceCalls.model_fields) == CALL_WORDS
    # the viewer reads the event's calls, and still reads an event of the older, flat shape
    js = PROGRESS_JS.read_text(encoding="utf-8")
    assert "if (p.calls) return p.calls;" in js and "made: p.calls_done" in js


def test_a_measurement_reused_within_the_trace_is_called_so_everywhere() -> None:
    """One plain word on every surface: "reused" — not "memo" (a programmer's word the viewer never shows) and not
    "repeats" (the parameter that buys k samples of each measurement)."""
    term = GLOSSARY["calls.saved"]
    assert term.label == "reused" and "reused within this trace" in term.short
    assert [t.key for t in find("reused")] == ["calls.saved"]
    calls = TraceCalls(planned=12, made=3, cached=4, billed=2, failed=1)
    assert "(2 measurements reused within this trace)" in render_text.calls_text(calls, None, saved=2)
    (viewer,) = re.findall(r"saved: (.+),", NUMBERS_JS.read_text(encoding="utf-8"))
    assert "Reused within this trace" in viewer
    for surface in (term.label, term.short, term.detail, viewer):
        assert "memo" not in surface.lower() and "repeat" not in surface.lower()


# --------------------------------------------------------------------------- the trace list's header row


def _log_failed_trace() -> str:
    """One trace in the command line's log, failed before any call (no model is needed to write it)."""
    settings = load_settings()
    turn = load_turn(FIXTURE)
    view = free_tier.gate_view(turn)
    selection = free_tier.require_selection(turn, view, "r10")
    quote = free_tier.cost_quote(turn, view.corpus, selection.text, model="openai/gpt-5.2")
    trace = CliTrace(
        turn=turn,
        sentence="r10",
        claim=selection.text,
        segment_id=selection.segment_id,
        model="openai/gpt-5.2",
        params=DEFAULT_PARAMS,
        quote=quote,
        estimator="judged",
        planned=quote.planned_calls,
        cost_usd=quote.cost_usd,
    )

    async def work(db: Database) -> str:
        logged = await start_cli_trace(db, settings.admin_tenant, settings.admin_user, trace, 600)
        ledger = CallLedger(planned=quote.planned_calls, concurrency=1)
        job = await finish_cli_trace(
            db,
            logged,
            ledger,
            result=None,
            reason="every model call failed",
            query=turn.effective_query(),
            corpus_digest=view.corpus.digest,
        )
        return job.id

    return asyncio.run(with_db(settings, work))


def test_the_plain_text_trace_list_starts_with_a_header_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path))
    assert main(["traces"]) == 0  # an empty log: the header alone, so a script's first line is always it
    assert capsys.readouterr().out.splitlines() == ["\t".join(HEADER)]
    trace_id = _log_failed_trace()
    assert main(["traces"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split("\t") == ["ID", "DATE (UTC)", "VERDICT", "MODEL", "CALLS", "COST", "CLAIM"]
    assert len(rows) == 1
    row = dict(zip(header.split("\t"), rows[0].split("\t"), strict=True))
    assert row["ID"] == trace_id and row["VERDICT"] == "failed" and row["MODEL"] == "openai/gpt-5.2"
    assert row["CALLS"] == "0 made · 0 cached · 0 failed"  # the call account's words
    assert row["CLAIM"].startswith("Non-authoritative note")
