"""What the MCP evidence gateway adds to a tool call: calls made directly and through ``provenance gateway``, in
one run, interleaved call by call, over stdio and over streamable HTTP.

Each arm is a ``ClientSession`` of the official SDK on the test server (``tests/support/mcp_tools_server.py``:
``forecast``, a short text answer; ``--payload`` KB of text with a longer city name). All arms are open at once
and take turns, one ``tools/call`` each, the order rotating every turn, so load from other work falls on every arm
alike; the time of each ``call_tool`` (request sent → result parsed) is kept after ``--warmup`` untimed calls.
``--rounds`` opens fresh sessions (and a fresh stdio gateway) that many times. With ``--baseline DIR`` (a
checkout of an earlier commit) a third arm runs that checkout's gateway, so a change is measured before → after
in the same run. Printed: median and p99 per call for each arm, what each gateway adds (median and p99
difference to the direct arm) and the ratio of medians; over HTTP also the CPU time each gateway process spent per
call it relayed (a figure the load of other work does not move); then that every result the current gateway relayed was
recorded. Gateway start-up (a process importing the store) is not a per-call cost and is not in the figures.

    .venv/bin/python bench/gateway_overhead.py --calls 500 --rounds 3
    .venv/bin/python bench/gateway_overhead.py --calls 500 --rounds 3 --baseline BEFORE
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.mcp_gateway import (  # noqa: E402 - the tests' helpers, found through the path above
    GATEWAY,
    free_port,
    gateway_env,
    http_gateway,
    http_server,
    server_command,
    stdio_gateway_command,
    wait_for_port,
)

Opener = Callable[[], AbstractAsyncContextManager[tuple[Any, Any]]]


def stdio_opener(command: Sequence[str], env: dict[str, str] | None, cwd: Path | None = None) -> Opener:
    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=env, cwd=cwd)

    @asynccontextmanager
    async def open_() -> AsyncIterator[tuple[Any, Any]]:
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write):
                yield read, write

    return open_


def http_opener(url: str) -> Opener:
    @asynccontextmanager
    async def open_() -> AsyncIterator[tuple[Any, Any]]:
        async with streamable_http_client(url) as (read, write):
            yield read, write

    return open_


def interleaved(openers: Sequence[Opener], calls: int, warmup: int, city: str) -> list[list[float]]:
    """One session per opener, all open at once, taking turns call by call (the order rotating); each arm's times."""

    async def main() -> list[list[float]]:
        times: list[list[float]] = [[] for _ in openers]
        async with AsyncExitStack() as stack:
            sessions: list[ClientSession] = []
            for opener in openers:
                read, write = await stack.enter_async_context(opener())
                session = await stack.enter_async_context(ClientSession(read, write, read_timeout_seconds=120))
                await session.initialize()
                sessions.append(session)
            for i in range(warmup + calls):
                for k in range(len(sessions)):
                    arm = (i + k) % len(sessions)
                    start = time.perf_counter()
                    result = await sessions[arm].call_tool("forecast", {"city": city})
                    elapsed = time.perf_counter() - start
                    assert not result.is_error, result
                    if i >= warmup:
                        times[arm].append(elapsed)
        return times

    return anyio.run(main)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _report(name: str, direct: list[float], arms: dict[str, list[float]]) -> None:
    dm, d99 = statistics.median(direct), _p(direct, 0.99)
    print(f"{name}: {len(direct)} calls per arm")
    print(f"  direct    median {dm * 1000:7.3f} ms   p99 {d99 * 1000:7.3f} ms")
    for label, gated in arms.items():
        gm, g99 = statistics.median(gated), _p(gated, 0.99)
        print(f"  {label:<9} median {gm * 1000:7.3f} ms   p99 {g99 * 1000:7.3f} ms")
    for label, gated in arms.items():
        gm, g99 = statistics.median(gated), _p(gated, 0.99)
        added = f"median {(gm - dm) * 1000:+7.3f} ms   p99 {(g99 - d99) * 1000:+7.3f} ms"
        print(f"  added by {label:<9} {added}   ratio of medians {gm / dm:.2f}")


@contextmanager
def baseline_http_gateway(checkout: Path, upstream: str, env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """The gateway of another checkout (run from it, so its modules come first), in front of ``upstream``."""
    port = free_port()
    proc = subprocess.Popen(
        [*GATEWAY, "--http", upstream, "--name", "baseline", "--listen", f"127.0.0.1:{port}"],
        env={**os.environ, **env, "PYTHONPATH": str(checkout)},
        cwd=checkout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}{urlsplit(upstream).path}", proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc``), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    parser.add_argument("--rounds", type=int, default=3, help="fresh sessions (and stdio gateways) this many times")
    parser.add_argument("--payload", type=int, default=0, help="KB of text per result (a longer city name)")
    parser.add_argument("--baseline", type=Path, help="a checkout of an earlier commit: its gateway as a third arm")
    parser.add_argument("--no-stdio", action="store_true", help="streamable HTTP only")
    parser.add_argument("--no-http", action="store_true", help="stdio only")
    args = parser.parse_args()
    city = "Oslo" if args.payload <= 0 else "O" * (args.payload * 1024)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    baseline: Path | None = args.baseline.resolve() if args.baseline else None
    per_session = args.calls + args.warmup
    expected = 0
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as other:
        data_dir = Path(tmp)
        env = gateway_env(data_dir)
        benv = gateway_env(Path(other))
        if not args.no_stdio:
            labels = ["gateway", *(["baseline"] if baseline else [])]
            times: list[list[float]] = [[] for _ in range(1 + len(labels))]
            for _ in range(args.rounds):
                openers = [stdio_opener(server_command(), None), stdio_opener(stdio_gateway_command("bench"), env)]
                if baseline is not None:
                    base_env = {**os.environ, **benv, "PYTHONPATH": str(baseline)}
                    openers.append(stdio_opener([*GATEWAY, "--stdio", "--", *server_command()], base_env, baseline))
                for arm, found in enumerate(interleaved(openers, args.calls, args.warmup, city)):
                    times[arm] += found
            _report("stdio", times[0], dict(zip(labels, times[1:], strict=True)))
            expected += args.rounds * per_session
        if not args.no_http:
            with ExitStack() as stack:
                url, _server = stack.enter_context(http_server())
                current = stack.enter_context(http_gateway(url, env, name="bench-http"))
                urls, pids = {"gateway": current.url}, {"gateway": current.proc.pid}
                if baseline is not None:
                    urls["baseline"], pids["baseline"] = stack.enter_context(baseline_http_gateway(baseline, url, benv))
                times = [[] for _ in range(1 + len(urls))]
                interleaved([http_opener(u) for u in urls.values()], 0, args.warmup, city)  # the store opened, first
                cpu = {label: _cpu_seconds(pid) for label, pid in pids.items()}
                for _ in range(args.rounds):
                    openers = [http_opener(url), *(http_opener(u) for u in urls.values())]
                    for arm, found in enumerate(interleaved(openers, args.calls, args.warmup, city)):
                        times[arm] += found
                cpu = {label: _cpu_seconds(pid) - cpu[label] for label, pid in pids.items()}
            _report("streamable HTTP", times[0], dict(zip(urls, times[1:], strict=True)))
            spent = "   ".join(f"{label} {cpu[label] / (args.rounds * per_session) * 1e6:5.0f} µs" for label in cpu)
            print(f"  gateway process CPU per relayed call (sessions included): {spent}")
            expected += args.rounds * per_session + args.warmup
        recorded = _recorded(data_dir)
        print(f"recorded {recorded} of {expected} results relayed through the gateway")
    return 0 if recorded == expected else 1


if __name__ == "__main__":
    raise SystemExit(main())
