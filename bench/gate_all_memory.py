"""Peak memory of ``provenance gate --all`` over ~18,000 stored turns: streamed vs held in a list.

    python bench/gate_all_memory.py [--copies 24] [--data PATH]

Stores the τ-bench airline conversations ``--copies`` times under different names (760 turns each;
24 copies = 18,240 turns) in a temporary data directory, then runs two child processes over the same
store and reads each one's peak resident set size (``wait4``'s ``ru_maxrss``):

* **before** — the former ``gate --all``: every turn read into a list, then the report built;
* **after** — ``provenance gate --all --json`` as shipped: turns read and gated 50 at a time, each
  turn's line written out as it is done.

Both must report the same totals. Prints the peaks, their ratio and the seconds each took.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from provenance_api.core.settings import Settings
from provenance_api.operations import imports as bulk
from provenance_api.storage import crud_turns
from provenance_api.storage.session import Database

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "tests/data/tau-bench/airline-gpt-4o-dev.json"
TENANT = "bench"


def _items(data: Path, copies: int) -> Iterator[bulk.Item]:
    conversations = json.loads(data.read_text(encoding="utf-8"))
    for copy in range(copies):
        for index, conversation in enumerate(conversations):
            yield bulk.Item(f"copy{copy}[{index}]", f"copy{copy}", index, obj=conversation)


async def _fill(db_dir: Path, data: Path, copies: int) -> bulk.ImportCounts:
    settings = Settings(data_dir=db_dir)
    settings.ensure_data_dir()
    db = Database(settings.effective_database_url)
    await db.migrate()
    try:
        return await bulk.import_items(db, TENANT, "bench", _items(data, copies))
    finally:
        await db.dispose()


async def _before(db_dir: Path) -> dict[str, Any]:
    """The former ``gate --all``: all turns in a list, then the report."""
    db = Database(Settings(data_dir=db_dir).effective_database_url)
    try:
        turns = [record.turn async for record in crud_turns.iter_turns(db, TENANT)]
        report = await asyncio.to_thread(bulk.build_report, turns)
    finally:
        await db.dispose()
    return report.to_dict()


def _child(mode: str, db_dir: Path, out: Path) -> tuple[float, float]:
    """Run one mode in a fresh process; (peak RSS in MB, seconds)."""
    env = {**os.environ, "PROVENANCE_DATA_DIR": str(db_dir)}
    if mode == "after":
        argv = [sys.executable, "-m", "provenance_api.cli.main", "gate", "--all", "--json", "--tenant", TENANT]
    else:
        argv = [sys.executable, __file__, "--child-before", str(db_dir)]
    started = time.perf_counter()
    with out.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen(argv, stdout=sink, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{mode} failed with status {status}")
    return usage.ru_maxrss / 1024, seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=24, help="copies of the 100 conversations (760 turns each)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a τ-bench JSON file")
    parser.add_argument("--child-before", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_before:
        json.dump(asyncio.run(_before(args.child_before)), sys.stdout)
        return 0
    with tempfile.TemporaryDirectory(prefix="gate-all-bench-") as tmp:
        db_dir = Path(tmp) / "data"
        started = time.perf_counter()
        counts = asyncio.run(_fill(db_dir, args.data, args.copies))
        print(f"stored: {counts.line()}  ({time.perf_counter() - started:.0f} s)")
        if counts.rejected or counts.conflicting:
            print(f"unexpected: {counts.errors[:3]}", file=sys.stderr)
            return 1
        results = {mode: _child(mode, db_dir, Path(tmp) / f"{mode}.json") for mode in ("before", "after")}
        reports = {mode: json.loads((Path(tmp) / f"{mode}.json").read_text(encoding="utf-8")) for mode in results}
    same = (
        reports["before"]["totals"] == reports["after"]["totals"] and len(reports["after"]["turns"]) == counts.imported
    )
    turns = reports["after"]["totals"]["turns"]
    for mode, (peak, seconds) in results.items():
        print(f"{mode:7} {turns} turns  peak RSS {peak:8.1f} MB  {seconds:6.1f} s")
    ratio = results["after"][0] / results["before"][0]
    print(f"after/before peak RSS: {ratio:.2f}  ·  same totals: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
