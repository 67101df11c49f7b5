"""Incremental read-through import: what a second import of an Agents SDK session store costs.

Writes a ``SQLiteSession`` store with the OpenAI Agents SDK itself (``--sessions`` sessions of ``--runs``
runs each: question, tool call, tool output, answer), then times three imports into a fresh service
database: the first (everything), a second with nothing new, and a third after one more run in one
session. Prints each against the first (the baseline, measured in the same run).

    python bench/source_import.py [--sessions 300] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from provenance_api.operations.connectors import SourceImport, import_source, parse_source
from provenance_api.storage.session import Database

if TYPE_CHECKING:
    from agents import TResponseInputItem


def run_items(session: int, run: int) -> list[TResponseInputItem]:
    call_id = f"call_{session}_{run}"
    return [
        {"role": "user", "content": f"Status of order {session}-{run}?"},
        {
            "type": "function_call",
            "name": "order_status",
            "call_id": call_id,
            "id": f"fc_{call_id}",
            "arguments": json.dumps({"order": f"{session}-{run}"}),
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": call_id, "output": f"order {session}-{run}: shipped on day {run}"},
        {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{call_id}",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": f"Order {session}-{run} shipped on day {run}.", "annotations": []}
            ],
        },
    ]


async def write_store(path: Path, sessions: int, runs: int) -> None:
    from agents import SQLiteSession

    for s in range(sessions):
        session = SQLiteSession(f"user-{s}", str(path))
        for r in range(runs):
            await session.add_items(run_items(s, r))
        session.close()


async def timed(db: Database, url: str) -> tuple[float, SourceImport]:
    start = time.perf_counter()
    result = await import_source(db, "bench", "bench", parse_source(url, "openai-agents-session"))
    return time.perf_counter() - start, result


async def main(sessions: int, runs: int) -> None:
    from agents import SQLiteSession

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "agent.db"
        await write_store(store, sessions, runs)
        url = f"sqlite:///{store}"
        db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'provenance.db'}")
        await db.migrate()
        try:
            first_s, first = await timed(db, url)
            second_s, second = await timed(db, url)
            session = SQLiteSession("user-0", str(store))
            await session.add_items(run_items(0, runs))
            session.close()
            third_s, third = await timed(db, url)
        finally:
            await db.dispose()
    print(f"store: {sessions} sessions x {runs} runs = {sessions * runs * 4:,} items")
    print(f"first import (baseline): {first_s:.2f} s, {first.counts.imported} turns imported")
    print(
        f"second, nothing new:     {second_s * 1000:.1f} ms = {second_s / first_s:.4f} x baseline "
        f"({second.changed} sessions read)"
    )
    print(
        f"third, 1 session new:    {third_s * 1000:.1f} ms = {third_s / first_s:.4f} x baseline "
        f"({third.changed} session read, {third.counts.imported} imported, {third.counts.unchanged} unchanged)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.runs))
