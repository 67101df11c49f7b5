"""Import throughput of ``provenance import`` on a ~50 MB JSONL, with its progress lines shown.

    python bench/import_throughput.py [--mb 50] [--checkout PATH] [--baseline PATH]

Writes a JSONL of OpenAI Chat Completions conversations (``{"id", "messages"}``, system prompt, user turns,
assistant tool calls and tool returns, answers) built from the τ-bench airline transcripts shipped in
``tests/data/tau-bench``: each generated conversation is one transcript with its digits permuted (ids, dates,
amounts and reservation codes differ, so every turn is new content, and tool-call ids still match their
returns), until the file holds ``--mb`` megabytes. Then it runs ``provenance import FILE --json`` of a checkout
in a child process (``PYTHONPATH`` the checkout; the child refuses to run if the project would be imported from
anywhere else) into a fresh SQLite data directory, and prints its wall time, MB/s, conversations/s, turns
stored/s and peak RSS (``wait4``). The child's stderr is a pipe, as in a CI log: its progress lines are echoed
as they arrive, prefixed with ``|``.

``--checkout`` is the code measured (default: this one); ``--baseline PATH`` measures another checkout first on
the same file (e.g. ``git worktree add ../before HEAD``) and prints the ratio of the two.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / "tests/data/tau-bench/airline-gpt-4o-dev.json"
DIGITS = "0123456789"

# Runs in the child: the checkout's console script, refusing a project imported from elsewhere.
CHILD = r"""
import importlib, os, sys, tomllib
checkout = os.path.realpath(sys.argv[1])
with open(os.path.join(checkout, "pyproject.toml"), "rb") as fh:
    target = tomllib.load(fh)["project"]["scripts"]["provenance"]
for name in ("provenance_api", "estimator"):
    origin = os.path.realpath(importlib.import_module(name).__file__)
    if not origin.startswith(checkout + os.sep):
        sys.exit(f"{name} imported from {origin}, not from {checkout}")
module, _, attr = target.partition(":")
sys.exit(getattr(importlib.import_module(module), attr)(sys.argv[2:]))
"""


def _permuted(value: Any, table: dict[int, int]) -> Any:
    if isinstance(value, str):
        return value.translate(table)
    if isinstance(value, list):
        return [_permuted(v, table) for v in value]
    if isinstance(value, dict):
        return {k: _permuted(v, table) for k, v in value.items()}
    return value


def conversations(data: Path, seed: int) -> Iterator[dict[str, Any]]:
    """Endless OpenAI-chat conversations: the τ-bench transcripts in turn, each with its digits permuted."""
    transcripts = [c["traj"] for c in json.loads(data.read_text(encoding="utf-8"))]
    rng = random.Random(seed)
    n = 0
    while True:
        for traj in transcripts:
            shuffled = list(DIGITS)
            rng.shuffle(shuffled)
            table = str.maketrans(DIGITS, "".join(shuffled))
            yield {"id": f"conv-{n:06d}", "messages": _permuted(traj, table)}
            n += 1


def write_jsonl(path: Path, data: Path, megabytes: float, seed: int) -> tuple[int, int]:
    """The file, ``megabytes`` MB (10^6 bytes) or just over; (conversations, bytes)."""
    target = int(megabytes * 1_000_000)
    written = count = 0
    with path.open("wb") as out:
        for conversation in conversations(data, seed):
            line = json.dumps(conversation, ensure_ascii=False).encode("utf-8") + b"\n"
            out.write(line)
            written += len(line)
            count += 1
            if written >= target:
                break
    return count, written


@dataclass
class Run:
    checkout: Path
    seconds: float
    peak_mb: float
    code: int
    counts: dict[str, Any]
    progress_lines: int


def _echo(stream: Any, lines: list[str]) -> None:
    for line in iter(stream.readline, ""):
        lines.append(line)
        print(f"  | {line.rstrip()}", flush=True)


def measure(checkout: Path, jsonl: Path, scratch: Path) -> Run:
    data_dir = scratch / f"data-{len(list(scratch.iterdir()))}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVENANCE_")}
    env.update(PYTHONPATH=str(checkout), PROVENANCE_DATA_DIR=str(data_dir), NO_COLOR="1")
    out = scratch / f"{data_dir.name}.json"
    print(f"{checkout}: provenance import {jsonl.name} --json", flush=True)
    lines: list[str] = []
    started = time.perf_counter()
    with out.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(checkout), "import", str(jsonl), "--json"],
            cwd=checkout,
            env=env,
            stdout=sink,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        echo = threading.Thread(target=_echo, args=(process.stderr, lines), daemon=True)
        echo.start()
        _, status, usage = os.wait4(process.pid, 0)
        echo.join()
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    try:
        counts = json.loads(out.read_text(encoding="utf-8"))
    except ValueError:
        counts = {}
    progress = sum(1 for line in lines if line.startswith("["))
    return Run(checkout, seconds, usage.ru_maxrss / 1024, code, counts, progress)


def report(run: Run, conversations_n: int, size: int) -> None:
    c = run.counts
    stored = c.get("imported", 0) + c.get("unchanged", 0)
    print(
        f"  exit {run.code} · {run.seconds:7.1f} s · {size / 1e6 / run.seconds:6.3f} MB/s · "
        f"{conversations_n / run.seconds:7.1f} conversations/s · {stored / run.seconds:7.1f} turns/s · "
        f"peak RSS {run.peak_mb:,.0f} MB · {run.progress_lines} progress lines\n"
        f"  imported {c.get('imported')}, unchanged {c.get('unchanged')}, rejected {c.get('rejected')}, "
        f"conflicting {c.get('conflicting')}, notes {len(c.get('notes', []))}",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=50.0, help="size of the generated JSONL in MB (default 50)")
    parser.add_argument("--checkout", type=Path, default=REPO, help="the checkout measured (default: this one)")
    parser.add_argument("--baseline", type=Path, help="another checkout, measured first on the same file")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="τ-bench transcripts to build from")
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"no data at {args.data}; pass --data", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="import-throughput-") as tmp:
        scratch = Path(tmp)
        jsonl = scratch / "history.jsonl"
        count, size = write_jsonl(jsonl, args.data, args.mb, args.seed)
        (scratch / "runs").mkdir()
        print(f"{jsonl.name}: {size / 1e6:.1f} MB, {count:,} conversations (OpenAI chat, tool calls)", flush=True)
        runs = []
        for checkout in ([args.baseline] if args.baseline else []) + [args.checkout]:
            run = measure(checkout.resolve(), jsonl, scratch / "runs")
            report(run, count, size)
            runs.append(run)
    if len(runs) == 2:
        print(f"baseline ÷ measured wall time: ×{runs[0].seconds / runs[1].seconds:.2f}")
    return 0 if all(r.code in (0, 1) and r.counts for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
