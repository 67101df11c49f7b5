"""Keep-alive request latency: the service's listening socket with and without TCP_NODELAY on accepted sockets.

Runs the real app under uvicorn twice in this process, on a listening socket made the old way (protocol 0, so
asyncio never sets TCP_NODELAY on accepted connections) and on the one ``provenance serve`` makes now
(``provenance_api.cli.service._bind``: IPPROTO_TCP), and times sequential ``GET /v1/turns`` requests on one
keep-alive connection.

    .venv/bin/python bench/keepalive_latency.py [--requests 200]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from provenance_api.cli.service import _bind
from provenance_api.core.settings import Settings
from provenance_api.http.app import create_app


def _old_bind() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # protocol 0: the listener before the fix
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def _measure(sock: socket.socket, data_dir: Path, n: int) -> list[float]:
    settings = Settings(data_dir=data_dir, warm_up=False)
    config = uvicorn.Config(create_app(settings), log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    key = (data_dir / "admin.key").read_text().strip()
    port = sock.getsockname()[1]
    times: list[float] = []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as client:
        client.get("/v1/turns").raise_for_status()  # the first request opens the connection
        for _ in range(n):
            started = time.perf_counter()
            client.get("/v1/turns").raise_for_status()
            times.append(time.perf_counter() - started)
    server.should_exit = True
    thread.join(10)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = _measure(_old_bind(), Path(tmp) / "before", args.requests)
        after = _measure(_bind("127.0.0.1", 0), Path(tmp) / "after", args.requests)
    b, a = statistics.median(before), statistics.median(after)
    print(f"keep-alive GET /v1/turns, {args.requests} sequential requests on one connection")
    print(
        f"  without TCP_NODELAY (protocol 0 listener): median {b * 1000:.2f} ms, "
        f"p95 {statistics.quantiles(before, n=20)[18] * 1000:.2f} ms"
    )
    print(
        f"  with TCP_NODELAY (IPPROTO_TCP listener):   median {a * 1000:.2f} ms, "
        f"p95 {statistics.quantiles(after, n=20)[18] * 1000:.2f} ms"
    )
    print(f"  ratio before/after (median): {b / a:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
