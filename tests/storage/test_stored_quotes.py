"""Quotes stored by earlier versions, read after migration 0015 moved their ``estimator`` to its own column.

Rows are written as a database at 0014 held them — the quote JSON in each key set a release wrote (the first
release's cost gate alone, without ``calls.redundancy``; with ``estimator`` and ``scoring``; with the model's
reason and ``expected_digit``; ``estimator`` null; a key since retired) — then the service migrates to head
and reads them: each quote as ``POST /v1/quotes`` shows one, a trace started from it, and the trace list
filtered by estimator. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from support.api_server import SMALL_CLAIM, InProcessApi, scripted_factory, small_turn
from support.services import DbBackend

from estimator.corpus.turn import StoredTurn
from provenance_api.operations.tracing import quote_out
from provenance_api.storage import crud_traces
from provenance_api.storage.session import Database, alembic_config

TENANT = "local"
MODEL = "openai/fake-judge"

# The quotes table as migration 0014 left it (no estimator column), and the stored turns its rows refer to.
QUOTES_0014 = sa.table(
    "quotes",
    *(sa.column(name) for name in ("id", "tenant", "user", "turn_id", "sentence", "claim", "segment_id", "model")),
    sa.column("probe", sa.Boolean),
    sa.column("params", sa.JSON),
    sa.column("quote", sa.JSON),
    sa.column("planned_calls", sa.Integer),
    sa.column("cost_usd", sa.Float),
    sa.column("refused", sa.Text),
    sa.column("created_at", sa.DateTime),
    sa.column("expires_at", sa.DateTime),
    sa.column("used_by", sa.String),
)
TURNS_0014 = sa.table(
    "stored_turns",
    *(sa.column(name) for name in ("tenant", "turn_id", "digest", "body", "model", "agent", "stored_by")),
    sa.column("turn_created_at", sa.DateTime),
    sa.column("stored_at", sa.DateTime),
)

# the first release's cost gate: no ``calls.redundancy``, nothing the service adds, no ``estimator``
FIRST: dict[str, Any] = {
    "model": MODEL,
    "sources": 2,
    "planned_calls": 12,
    "calls": {"round1": 4, "round2": 4, "spans": 4, "probe": 0},
    "input_tokens": 2400,
    "output_tokens": 664,
    "untruncated_corpus_tokens": 40,
    "cost_usd": 0.000758,
    "warnings": ["The selection is sent with every call."],
    "truncated_sources": [],
    "refused": None,
}
SCORING = {
    "can_score": False,
    "how": "none",
    "reason": "a hosted chat API",
    "scoring_calls": 10,
    "span_calls": 4,
    "scoring_prompt_tokens": 900,
    "scoring_output_tokens": 10,
}
EXPECTED_DIGIT = {"offered": True, "how": "chat-logprobs", "reason": "top log-probabilities of the answer digit"}
OLD_QUOTES: dict[str, dict[str, Any]] = {
    "q_first": FIRST,
    # with the estimator choice and the scoring a logprob trace adds (judged, and expected)
    "q_judged": {**FIRST, "calls": {**FIRST["calls"], "redundancy": 2}, "scoring": SCORING, "estimator": "judged"},
    "q_expected": {
        **FIRST,
        "calls": {**FIRST["calls"], "redundancy": 2},
        "planned_calls": 14,
        "scoring": SCORING,
        "estimator": "expected",
        "model_reason": "the turn's own model, on the allow-list",
        "model_source": "turn",
        "expected_digit": EXPECTED_DIGIT,
    },
    "q_null": {**FIRST, "estimator": None, "scoring": None},  # a null key reads as absent
    "q_logprob": {**FIRST, "estimator": "logprob", "scoring": SCORING, "retired_key": 1},  # an unknown key is ignored
}
# the planned_calls column: the ceiling the budget reserves (the JSON's is the judged plan's)
PLANNED = {"q_first": 14, "q_judged": 14, "q_expected": 14, "q_null": 14, "q_logprob": 14}


def _store_as_0014_did(url: str) -> None:
    command.upgrade(alembic_config(url), "0014")
    turn = StoredTurn.model_validate(small_turn("old-quotes"))
    body = json.dumps(turn.model_dump(mode="json"), separators=(",", ":"))
    now = datetime.now(UTC).replace(tzinfo=None, microsecond=0) - timedelta(hours=1)  # naive UTC, as stored

    async def write() -> None:
        db = Database(url)
        async with db.transaction() as session:
            await session.execute(
                sa.insert(TURNS_0014).values(
                    tenant=TENANT,
                    turn_id="old-quotes",
                    digest=hashlib.sha256(body.encode()).hexdigest(),
                    body=body,
                    model=MODEL,
                    agent="support bot",
                    stored_by="admin",
                    turn_created_at=datetime(2025, 1, 1),
                    stored_at=datetime(2025, 6, 1),
                )
            )
            for quote_id, document in OLD_QUOTES.items():
                await session.execute(
                    sa.insert(QUOTES_0014).values(
                        id=quote_id,
                        tenant=TENANT,
                        user="admin",
                        turn_id="old-quotes",
                        sentence="r0",
                        claim=SMALL_CLAIM,
                        segment_id="r0",
                        model=MODEL,
                        probe=False,
                        params={},
                        quote=document,
                        planned_calls=PLANNED[quote_id],
                        cost_usd=document["cost_usd"],
                        refused=None,
                        created_at=now,
                        expires_at=now + timedelta(days=3650),
                        used_by=None,
                    )
                )
        await db.dispose()

    asyncio.run(write())


def _migrate_and_read(url: str) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[str, dict[str, Any]]]]:
    """Migrate to head; each old quote as the API shows one, and its row's estimator column and JSON."""

    async def read() -> tuple[dict[str, dict[str, Any]], dict[str, tuple[str, dict[str, Any]]]]:
        db = Database(url)
        await db.migrate()
        shown = {q: quote_out(await crud_traces.get_quote(db, TENANT, q)).model_dump(mode="json") for q in OLD_QUOTES}
        async with db.session() as session:
            rows = (await session.execute(sa.text("SELECT id, estimator, quote FROM quotes"))).all()
        await db.dispose()
        stored = {str(r[0]): (str(r[1]), r[2] if isinstance(r[2], dict) else json.loads(r[2])) for r in rows}
        return shown, stored

    return asyncio.run(read())


def test_quotes_stored_before_the_estimator_column_still_load(tmp_path: Path, db_backend: DbBackend) -> None:
    url = db_backend.fresh_url() or f"sqlite+aiosqlite:///{tmp_path / 'provenance.db'}"
    _store_as_0014_did(url)
    shown, stored = _migrate_and_read(url)

    # the column is backfilled from the JSON (judged where the key is absent or null), and the key is gone
    estimators = {q: column for q, (column, _) in stored.items()}
    assert estimators == {
        "q_first": "judged",
        "q_judged": "judged",
        "q_expected": "expected",
        "q_null": "judged",
        "q_logprob": "logprob",
    }
    assert all("estimator" not in document for _, document in stored.values())
    assert stored["q_first"][1] == FIRST  # nothing else of a stored quote is rewritten

    # each reads as the API shows a quote
    first = shown["q_first"]
    assert first["estimator"] == "judged" and first["planned_calls"] == 14 and first["cost_usd"] == 0.000758
    assert first["calls"] == {"round1": 4, "round2": 4, "redundancy": 0, "spans": 4, "probe": 0}
    assert (first["model_reason"], first["scoring"], first["expected_digit"], first["proxy"]) == (None,) * 4
    assert first["warnings"] == FIRST["warnings"] and first["untruncated_corpus_tokens"] == 40
    assert shown["q_judged"]["scoring"] == SCORING and shown["q_judged"]["calls"]["redundancy"] == 2
    expected = shown["q_expected"]
    assert expected["estimator"] == "expected" and expected["expected_digit"] == EXPECTED_DIGIT
    assert expected["model_reason"] == "the turn's own model, on the allow-list"
    assert shown["q_null"]["estimator"] == "judged" and shown["q_null"]["scoring"] is None
    assert shown["q_logprob"]["estimator"] == "logprob" and shown["q_logprob"]["scoring"] == SCORING

    # a trace starts from an old quote under its estimator, and the list filters on the column
    traces: dict[str, dict[str, Any]] = {}
    with (
        InProcessApi(tmp_path, llm_factory=scripted_factory(), warm_up=False, database_url=url) as srv,
        srv.client(srv.admin_key) as api,
    ):
        for quote_id in ("q_first", "q_expected"):
            started = api.post("/v1/traces", json={"quote_id": quote_id})
            assert started.status_code == 202, started.text
            traces[quote_id] = api.get(started.headers["location"], params={"wait": "true"}).json()
        again = api.post("/v1/traces", json={"quote_id": "q_first"})
        assert again.status_code == 409, again.text  # an old quote is single-use too
        listed = {
            est: api.get("/v1/traces", params={"estimator": est}).json() for est in ("judged", "expected", "logprob")
        }
    assert traces["q_first"]["status"] == "succeeded", traces["q_first"]
    assert traces["q_first"]["quote_id"] == "q_first" and traces["q_first"]["result"]["estimator"] == "judged"
    assert [(t["trace_id"], t["estimator"]) for t in listed["judged"]["items"]] == [
        (traces["q_first"]["trace_id"], "judged")
    ]
    assert [(t["trace_id"], t["estimator"]) for t in listed["expected"]["items"]] == [
        (traces["q_expected"]["trace_id"], "expected")
    ]
    assert listed["logprob"]["items"] == [] and listed["logprob"]["total"] == 0


def test_downgrading_0015_writes_the_estimator_back_into_the_quote(tmp_path: Path, db_backend: DbBackend) -> None:
    url = db_backend.fresh_url() or f"sqlite+aiosqlite:///{tmp_path / 'provenance.db'}"
    _store_as_0014_did(url)
    command.upgrade(alembic_config(url), "0015")
    command.downgrade(alembic_config(url), "0014")

    async def read() -> dict[str, Any]:
        db = Database(url)
        async with db.session() as session:
            rows = (await session.execute(sa.select(QUOTES_0014.c.id, QUOTES_0014.c.quote))).all()
        await db.dispose()
        return {str(r[0]): r[1] for r in rows}

    documents = asyncio.run(read())
    assert {q: d["estimator"] for q, d in documents.items()} == {
        "q_first": "judged",
        "q_judged": "judged",
        "q_expected": "expected",
        "q_null": "judged",
        "q_logprob": "logprob",
    }
    assert {k: v for k, v in documents["q_expected"].items() if k != "estimator"} == {
        k: v for k, v in OLD_QUOTES["q_expected"].items() if k != "estimator"
    }
