"""Bulk-import benchmark: τ-bench airline → stored turns (SQLite in a temp data dir) → free tier.

    python bench/import_history.py [--data PATH]

Imports the conversations twice (the second pass is all ``unchanged``) and runs the free tier over
every stored turn, as ``provenance import`` and ``provenance gate --all`` do. Prints conversations/s
for each import pass and sentences gated/s for the report (reading the turns back included).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from provenance_api.core.settings import Settings
from provenance_api.operations import imports as bulk
from provenance_api.storage.session import Database

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "tests/data/tau-bench/airline-gpt-4o-dev.json"


async def run(data: Path, db_dir: Path) -> int:
    settings = Settings(data_dir=db_dir)  # the storage ``provenance serve`` would use there
    settings.ensure_data_dir()
    db = Database(settings.effective_database_url)
    await db.migrate()
    try:
        for label in ("import (new)", "import (again)"):
            started = time.perf_counter()
            counts = await bulk.import_items(db, "bench", "bench", bulk.file_items(data))
            seconds = time.perf_counter() - started
            rate = counts.conversations / seconds
            print(f"{label:16} {counts.line()}  {seconds:6.2f} s  {rate:8.1f} conversations/s")
            if counts.rejected or counts.conflicting:
                print(f"unexpected: {counts.errors[:3]}", file=sys.stderr)
                return 1
        started = time.perf_counter()
        report = await bulk.gating_report(db, "bench")
        seconds = time.perf_counter() - started
        sentences = report.totals["sentences"]
        print(
            f"{'free tier':16} {report.totals['turns']} turns, {sentences} sentences  {seconds:6.2f} s  "
            f"{sentences / seconds:8.1f} sentences gated/s"
        )
    finally:
        await db.dispose()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a τ-bench JSON file (list of conversations)")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"no data at {args.data}; pass --data", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="import-bench-") as tmp:
        return asyncio.run(run(args.data, Path(tmp)))


if __name__ == "__main__":
    raise SystemExit(main())
