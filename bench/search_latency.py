"""Turn search latency at 10,000 stored turns: the search index against the scan it replaced, in one run.

Stores N turns (τ-bench-like customer-service replies, each unique) through the service's own storage path
(``crud_turns.put_turn``, which writes the index row in the same transaction), then times searches:

* index: ``crud_turns.search_turns`` — SQLite FTS5 trigram (or PostgreSQL pg_trgm with ``--database-url``);
* baseline: the previous behaviour — read every turn of the tenant, parse it, normalise its text, test the
  substring — run on the same database in the same process.

    .venv/bin/python bench/search_latency.py [--turns 10000] [--database-url postgresql+asyncpg://…]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from estimator.corpus.turn import StoredTurn
from provenance_api.storage import crud_turns
from provenance_api.storage.search_index import searchable_text
from provenance_api.storage.session import Database

NEEDLES = ["refund", "hat043", "economy", "zz-no-such-text", "seat 12a", "42"]
CITIES = ["JFK", "LAX", "SFO", "ORD", "SEA", "MIA", "DFW", "BOS"]


def _turn(i: int) -> StoredTurn:
    city = CITIES[i % len(CITIES)]
    return StoredTurn.model_validate(
        {
            "turn_id": f"bench-{i:05d}",
            "agent": "airline support",
            "model": "openai/gpt-4o",
            "query": f"Can I change reservation R{i:05d} to {city}?",
            "response": (
                f"Your reservation R{i:05d} to {city} is now economy, seat {i % 40}{'ABCDEF'[i % 6]}. "
                f"The total is ${100 + i % 900}.00"
                + (" and the refund was issued." if i % 7 == 0 else ".")
                + (" Flight HAT043 departs at 06:00." if i == 4242 else "")
            ),
        }
    )


async def _scan(db: Database, tenant: str, needle: str, limit: int) -> list[str]:
    found: list[str] = []
    async for record in crud_turns.iter_turns(db, tenant):
        if needle in searchable_text(record.turn):
            found.append(record.turn_id)
            if len(found) >= limit:
                break
    return found


async def _time(fn: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        await fn()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def run(url: str, n: int) -> None:
    db = Database(url)
    await db.migrate()
    tenant = "bench"
    started = time.perf_counter()
    for i in range(n):
        await crud_turns.put_turn(db, tenant, "bench", _turn(i))
    print(f"stored {n} turns in {time.perf_counter() - started:.1f} s ({db.engine.dialect.name})")
    print(f"{'query':>18} {'matches':>8} {'index ms':>9} {'scan ms':>9} {'scan/index':>10}")
    ratios = []
    for needle in NEEDLES:
        hits = await crud_turns.search_turns(db, tenant, needle, limit=25, after=None)
        expected = await _scan(db, tenant, needle, 25)
        assert [h.turn_id for h in hits] == expected, needle  # same answer as the scan it replaces
        index = await _time(
            lambda needle=needle: crud_turns.search_turns(db, tenant, needle, limit=25, after=None), repeats=9
        )
        scan = await _time(lambda needle=needle: _scan(db, tenant, needle, 25), repeats=1)
        ratios.append(scan / index)
        print(f"{needle!r:>18} {len(hits):>8} {index * 1000:>9.1f} {scan * 1000:>9.1f} {scan / index:>9.0f}x")
    print(f"median speed-up over the scan: {statistics.median(ratios):.0f}x")
    await db.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--database-url", default=None, help="an empty database (default: SQLite in a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        asyncio.run(run(url, args.turns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
