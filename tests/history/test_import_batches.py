"""Bulk import stores new turns in batches (``TurnWriter``, ``crud_turns.put_turns``: one transaction per batch
instead of one per turn, issue 29's throughput), and every turn's outcome is what storing it alone gives: the same
counts, the same errors and the same stored rows as one ``put_turn`` at a time, on input that repeats a
conversation, changes one, holds a turn over the size limit and lines that cannot be read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.services import DbBackend

from estimator.corpus.turn import StoredTurn
from provenance_api.operations import imports as bulk
from provenance_api.storage import crud_turns
from provenance_api.storage.errors import RecordConflict, RecordInvalid
from provenance_api.storage.models import StoredTurnRow
from provenance_api.storage.session import Database

TENANT = "acme"


def chat(ident: str, answer: str, tool_output: str = "shipped") -> dict[str, Any]:
    return {
        "id": ident,
        "messages": [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": f"Where is order {ident}?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"call_{ident}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{ident}", "content": tool_output},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "Thanks. And the invoice?"},
            {"role": "assistant", "content": f"The invoice for {ident} was sent."},
        ],
    }


def lines() -> list[bytes]:
    """Conversations c0..c59, then: c3 again (unchanged), c5 with its first answer changed (a turn of its own),
    a line that is no JSON, c7 again twice in a row, and one with a tool return over the limit."""
    out = [chat(f"c{i}", f"Order c{i} shipped.") for i in range(60)]
    out += [chat("c3", "Order c3 shipped."), chat("c5", "Order c5 was lost.")]
    raw = [json.dumps(c).encode() for c in out]
    raw += [b"{not json", json.dumps(chat("c7", "Order c7 shipped.")).encode()]
    raw += [json.dumps(chat("c7", "Order c7 shipped.")).encode(), json.dumps(chat("big", "Big.", "x" * 9000)).encode()]
    return raw


async def fresh(path: Path) -> Database:
    db = Database(f"sqlite+aiosqlite:///{path}")
    await db.migrate()
    return db


async def stored(db: Database) -> list[tuple[str, str, str | None]]:
    async with db.session() as session:
        rows = (await session.execute(select(StoredTurnRow).where(StoredTurnRow.tenant == TENANT))).scalars().all()
    return sorted((r.turn_id, r.digest, r.import_batch and "batch") for r in rows)


def test_batched_import_counts_and_stores_exactly_what_one_turn_at_a_time_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "FLUSH_TURNS", 7)  # several batches, some ending inside a run of one conversation

    async def work() -> None:
        batched_db, single_db = await fresh(tmp_path / "batched.db"), await fresh(tmp_path / "single.db")
        try:
            limit = 8000  # the "big" conversation's turns are over it
            items = list(bulk.jsonl_items(lines(), "h.jsonl", "h.jsonl"))
            batched = await bulk.import_items(batched_db, TENANT, "u", iter(items), max_turn_bytes=limit)
            single = bulk.ImportCounts(max_turn_bytes=limit)
            for item in items:
                single.conversations += 1
                await bulk.import_one(single_db, TENANT, "u", item, None, single)  # no writer: one at a time
            keys = ("imported", "unchanged", "conflicting", "rejected")
            assert [getattr(batched, k) for k in keys] == [getattr(single, k) for k in keys] == [121, 7, 0, 3]
            assert sorted(map(str, batched.errors)) == sorted(map(str, single.errors))
            too_large = [e for e in batched.errors if "PROVENANCE_MAX_BODY_BYTES" in e["reason"]]
            assert len(too_large) == 2 and all(e["where"].startswith("h.jsonl:66: ") for e in too_large)
            assert await stored(batched_db) == await stored(single_db)
        finally:
            await batched_db.dispose()
            await single_db.dispose()

    asyncio.run(work())


def turn(turn_id: str, response: str, padding: str = "") -> StoredTurn:
    return StoredTurn(turn_id=turn_id, query="Where is it?" + padding, response=response)


def test_put_turns_gives_each_turn_the_outcome_put_turn_would_on_both_databases(
    tmp_path: Path, db_backend: DbBackend
) -> None:
    url = db_backend.fresh_url() or f"sqlite+aiosqlite:///{tmp_path / 'p.db'}"

    async def work() -> None:
        db = Database(url)
        await db.migrate()
        try:
            await crud_turns.put_turn(db, TENANT, "u", turn("c:kept", "Kept."))
            await crud_turns.put_turn(db, TENANT, "u", turn("c:taken", "Taken."))
            outcomes = await crud_turns.put_turns(
                db,
                TENANT,
                "u",
                [
                    turn("c:new", "New."),
                    turn("c:kept", "Kept."),  # stored with this content: unchanged
                    turn("c:taken", "Other."),  # stored with other content: a conflict naming the field
                    turn("c:new", "New."),  # the same as one earlier in the batch: unchanged
                    turn("c:new", "Newer."),  # other content than one earlier in the batch: a conflict
                    turn("c:huge", "Huge.", "x" * 5000),  # over max_bytes
                ],
                batch="ib_1",
                max_bytes=2000,
            )
            assert [(o.turn_id, o.created) for o in outcomes] == [
                ("c:new", True),
                ("c:kept", False),
                ("c:taken", False),
                ("c:new", False),
                ("c:new", False),
                ("c:huge", False),
            ]
            problems = [o.problem for o in outcomes]
            assert problems[:2] == [None, None] and problems[3] is None
            assert isinstance(problems[2], RecordConflict) and "fields that differ: response" in problems[2].detail
            assert isinstance(problems[4], RecordConflict) and "fields that differ: response" in problems[4].detail
            assert isinstance(problems[5], RecordInvalid) and problems[5].record == "turn_body"
            assert [t[0] for t in await stored(db)] == ["c:kept", "c:new", "c:taken"]
            found = await crud_turns.search_turns(db, TENANT, "new.", limit=10, after=None)  # indexed with it
            assert [s.turn_id for s in found] == ["c:new"]
        finally:
            await db.dispose()

    asyncio.run(work())
