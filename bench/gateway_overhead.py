"""What the MCP evidence gateway adds to a tool call: N calls made directly and N through ``provenance gateway``, in
one run, over stdio and over streamable HTTP.

One ``ClientSession`` of the official SDK per arm makes ``--calls`` ``tools/call`` requests in turn to the test
server (``tests/support/mcp_tools_server.py``: ``forecast``, a short text answer; ``--payload`` KB of text with
``bulk``); the time of each ``call_tool`` (request sent → result parsed) is kept, after ``--warmup`` calls that are
not. The arms alternate (direct, gateway, direct, gateway …, ``--rounds`` of each) so a load that comes and goes
falls on both. Printed: median and p99 per call for each arm, the gateway's extra per call (median and p99
difference) and the ratio of medians; then that every result was recorded (the store's count against the calls).
Gateway start-up (a process importing the store) is not a per-call cost and is not in the figures.

    .venv/bin/python bench/gateway_overhead.py --calls 500 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.mcp_gateway import (  # noqa: E402 - the tests' helpers, found through the path above
    gateway_env,
    http_gateway,
    http_server,
    server_command,
    stdio_gateway_command,
)


async def _timed_calls(read: Any, write: Any, calls: int, warmup: int, arguments: dict[str, Any]) -> list[float]:
    times: list[float] = []
    async with ClientSession(read, write, read_timeout_seconds=120) as session:
        await session.initialize()
        for i in range(warmup + calls):
            start = time.perf_counter()
            result = await session.call_tool("forecast", arguments)
            elapsed = time.perf_counter() - start
            assert not result.is_error, result
            if i >= warmup:
                times.append(elapsed)
    return times


def stdio_arm(command: Sequence[str], env: dict[str, str] | None, calls: int, warmup: int, city: str) -> list[float]:
    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=env)

    async def main() -> list[float]:
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write):
                return await _timed_calls(read, write, calls, warmup, {"city": city})

    return anyio.run(main)


def http_arm(url: str, calls: int, warmup: int, city: str) -> list[float]:
    async def main() -> list[float]:
        async with streamable_http_client(url) as (read, write):
            return await _timed_calls(read, write, calls, warmup, {"city": city})

    return anyio.run(main)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _report(name: str, direct: list[float], gated: list[float]) -> None:
    dm, gm = statistics.median(direct), statistics.median(gated)
    d99, g99 = _p(direct, 0.99), _p(gated, 0.99)
    print(f"{name}: {len(direct)} calls per arm")
    print(f"  direct   median {dm * 1000:7.3f} ms   p99 {d99 * 1000:7.3f} ms")
    print(f"  gateway  median {gm * 1000:7.3f} ms   p99 {g99 * 1000:7.3f} ms")
    added = f"median {(gm - dm) * 1000:+7.3f} ms   p99 {(g99 - d99) * 1000:+7.3f} ms"
    print(f"  added    {added}   ratio of medians {gm / dm:.2f}")


def _recorded(data_dir: Path) -> int:
    from provenance_api.storage.evidence_records import list_evidence
    from provenance_api.storage.session import Database

    async def count() -> int:
        db = Database(f"sqlite+aiosqlite:///{data_dir / 'provenance.db'}")
        try:
            await db.migrate()
            return sum(1 for r in await list_evidence(db, "local", limit=10**7) if r.kind == "result")
        finally:
            await db.dispose()

    return asyncio.run(count())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500, help="timed calls per arm and round")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls first, per session")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of direct and gateway")
    parser.add_argument("--payload", type=int, default=0, help="KB of text per result (a longer city name)")
    parser.add_argument("--no-http", action="store_true", help="stdio only")
    args = parser.parse_args()
    city = "Oslo" if args.payload <= 0 else "O" * (args.payload * 1024)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        env = gateway_env(data_dir)
        direct: list[float] = []
        gated: list[float] = []
        for _ in range(args.rounds):
            direct += stdio_arm(server_command(), None, args.calls, args.warmup, city)
            gated += stdio_arm(stdio_gateway_command("bench"), env, args.calls, args.warmup, city)
        _report("stdio", direct, gated)
        expected = args.rounds * (args.calls + args.warmup)
        if not args.no_http:
            hdirect: list[float] = []
            hgated: list[float] = []
            with http_server() as (url, _server), http_gateway(url, env, name="bench-http") as gateway:
                for _ in range(args.rounds):
                    hdirect += http_arm(url, args.calls, args.warmup, city)
                    hgated += http_arm(gateway.url, args.calls, args.warmup, city)
            _report("streamable HTTP", hdirect, hgated)
            expected *= 2
        recorded = _recorded(data_dir)
        print(f"recorded {recorded} of {expected} results relayed through the gateway")
    return 0 if recorded == expected else 1


if __name__ == "__main__":
    raise SystemExit(main())
