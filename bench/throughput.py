"""Trace throughput of the queued mode: traces per minute with 1 worker, then with 2 (ratio printed).

One API process and N ``provenance worker`` processes consuming one Redis queue, on PostgreSQL (a fresh
database per run; the default) or one SQLite file (``--backend sqlite``). The judge is the fake OpenAI
server answering every call after a fixed latency, reached through litellm, so the figure measures the
service (queueing, storage, estimator) around a provider of known speed. The judgement cache is off
(every trace pays its calls). Each worker runs ``--max-jobs`` traces at once.

Redis and PostgreSQL are the ones ``scripts/services.sh`` exports (``PROVENANCE_TEST_REDIS_URL``,
``PROVENANCE_TEST_POSTGRES_URL``) or throwaway servers started here from the Debian binaries:

    . ./scripts/services.sh && services_start && .venv/bin/python bench/throughput.py
    .venv/bin/python bench/throughput.py [--backend postgres|sqlite] [--traces 24] [--latency 0.2] [--max-jobs 2]

Besides the rates it prints, per run, the peak number of model calls the provider had in flight (a
second worker that waits shows up as a peak no higher than one worker's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.api_server import REPO, SMALL_CLAIM, KeyedJudge, ServerProcess, make_key, small_turn
from support.fake_openai import FakeOpenAI, FakeReply
from support.services import POSTGRES_ENV, REDIS_ENV, PostgresCluster, RedisServer, create_database


def wait_all(c: httpx.Client, ids: list[str], check: Callable[[], None], limit: float = 600) -> None:
    """Until every trace succeeded (a failed one, a dead worker or ``limit`` seconds raise)."""
    deadline = time.monotonic() + limit
    for trace_id in ids:
        while True:
            check()
            if time.monotonic() > deadline:
                raise RuntimeError(f"trace {trace_id} did not end within {limit:.0f} s")
            job = c.get(f"/v1/traces/{trace_id}", params={"wait": "true", "timeout": 10}).json()
            if job["status"] in ("succeeded", "failed", "interrupted"):
                if job["status"] != "succeeded":
                    raise RuntimeError(f"trace {trace_id} ended {job['status']}: {job['reason']}")
                break


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pids: list[int], limit: float = 120) -> None:
    """Until the processes are idle (under 0.05 CPU seconds in 0.5 s): the API's background warm-up (and a
    worker's) is over before the timed part starts."""
    deadline = time.monotonic() + limit
    before = sum(cpu_seconds(pid) for pid in pids)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = sum(cpu_seconds(pid) for pid in pids)
        if now - before < 0.05:
            return
        before = now


def run(
    workers: int,
    traces: int,
    latency: float,
    max_jobs: int,
    redis_url: str,
    root: Path,
    postgres_url: str | None,
    warm_up: int,
    cold_workers: bool,
) -> tuple[float, int, float, dict[str, float]]:
    """Seconds from the first submission until every trace succeeded, the provider's peak calls in flight,
    and the slowest worker's start-up (launch to its first poll)."""
    judge = KeyedJudge()
    data = root / f"w{workers}"
    if postgres_url is None:
        database_url = f"sqlite+aiosqlite:///{data / 'bench.db'}"
    else:
        database_url = create_database(postgres_url, prefix="bench")
    with FakeOpenAI(lambda req: FakeReply(text=judge.openai(req), delay=latency)) as provider:
        env = {
            **os.environ,
            "OPENAI_API_KEY": "sk-bench",
            "OPENAI_API_BASE": provider.base_url,
            "PROVENANCE_DATABASE_URL": database_url,
            "PROVENANCE_REDIS_URL": redis_url,
            "PROVENANCE_REDIS_PREFIX": f"bench-{workers}-{os.getpid()}",
            "PROVENANCE_JUDGEMENT_CACHE": "false",
            "PROVENANCE_PARAMS": json.dumps({"rate_max_calls": 100_000}),
            "PROVENANCE_WARM_UP": "true",
            "PROVENANCE_LOG_LEVEL": "WARNING",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        api = ServerProcess(data / "api", env).start()
        logs = []
        for n in range(workers):
            (data / f"worker{n}").mkdir(parents=True, exist_ok=True)
            logs.append(data / f"worker{n}" / "worker.log")
        procs = []
        worker_env = {**env, "PROVENANCE_LOG_LEVEL": "INFO"}  # its "worker started" line: it polls from then on
        if cold_workers:
            worker_env["PROVENANCE_WARM_UP"] = "false"
        launched = time.monotonic()
        for n, log in enumerate(logs):
            with log.open("wb") as out:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "provenance_api.cli.main", "worker", "--max-jobs", str(max_jobs)],
                        env={**worker_env, "PROVENANCE_DATA_DIR": str(data / f"worker{n}")},
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        cwd=REPO,
                    )
                )

        def check_workers() -> None:
            for proc, log in zip(procs, logs, strict=True):
                if proc.poll() is not None:
                    raise RuntimeError(f"a worker exited with {proc.returncode}: {log.read_text()[-2000:]}")

        def wait_started() -> float:
            while not all("worker started" in log.read_text() for log in logs):
                check_workers()
                if time.monotonic() > launched + 300:
                    raise RuntimeError("the workers did not start within 300 s")
                time.sleep(0.05)
            return time.monotonic() - launched

        try:
            key = make_key(data / "keys", "bench", "bench", database_url=database_url)
            with httpx.Client(base_url=api.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
                warm = warm_up * workers
                quotes = []
                for i in range(warm + traces):
                    turn_id = f"bench-{i}"
                    c.post("/v1/turns", json=small_turn(turn_id, query=f"Where is my order A-1? (bench {i})"))
                    r = c.post("/v1/quotes", json={"turn_id": turn_id, "sentence": SMALL_CLAIM})
                    quotes.append(r.json()["quote_id"])
                ready = wait_started()
                # warm-up traces (``--warm-up`` per worker), not timed
                wait_all(
                    c,
                    [c.post("/v1/traces", json={"quote_id": q}).json()["trace_id"] for q in quotes[:warm]],
                    check_workers,
                )
                pids = {
                    "workers": [p.pid for p in procs],
                    "API": [api.proc.pid if api.proc else 0],
                    "this process (provider, client)": [os.getpid()],
                }
                settle([pid for name, ps in pids.items() if name != "this process (provider, client)" for pid in ps])
                cpu0 = {name: sum(cpu_seconds(pid) for pid in ps) for name, ps in pids.items()}
                start = time.monotonic()
                ids = [c.post("/v1/traces", json={"quote_id": q}).json()["trace_id"] for q in quotes[warm:]]
                wait_all(c, ids, check_workers)
                seconds = time.monotonic() - start
                cpu = {name: sum(cpu_seconds(pid) for pid in ps) - cpu0[name] for name, ps in pids.items()}
                return seconds, provider.max_in_flight, ready, cpu
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                proc.wait(30)
            api.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=24)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    parser.add_argument("--max-jobs", type=int, default=2, help="traces one worker runs at once")
    parser.add_argument(
        "--warm-up",
        type=int,
        default=0,
        help="untimed traces per worker before the timed ones (default 0: a worker's start is part "
        "of what is measured)",
    )
    parser.add_argument(
        "--cold-workers",
        action="store_true",
        help="workers with PROVENANCE_WARM_UP=false: they import the provider client in their first "
        "traces (as every worker did before the start-up warm-up)",
    )
    parser.add_argument(
        "--backend",
        choices=("postgres", "sqlite"),
        default="postgres",
        help="the service's database (default: postgres, a fresh database per run)",
    )
    args = parser.parse_args()
    stack = contextlib.ExitStack()
    with stack:
        redis_url = os.environ.get(REDIS_ENV)
        if not redis_url:
            redis = RedisServer().start()
            stack.callback(redis.stop)
            redis_url = redis.url
        postgres_url = None
        if args.backend == "postgres":
            postgres_url = os.environ.get(POSTGRES_ENV)
            if not postgres_url:
                cluster = PostgresCluster()
                stack.callback(cluster.stop)
                postgres_url = cluster.start().url
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        print(
            f"{args.backend} + Redis, {args.traces} traces, {args.latency:.2f} s per model call, "
            f"{args.max_jobs} jobs per worker"
        )
        rates = {}
        for workers in (1, 2):
            seconds, peak, ready, cpu = run(
                workers,
                args.traces,
                args.latency,
                args.max_jobs,
                redis_url,
                tmp,
                postgres_url,
                args.warm_up,
                args.cold_workers,
            )
            rates[workers] = args.traces / seconds * 60
            print(
                f"{workers} worker(s): {args.traces} traces in {seconds:.1f} s = {rates[workers]:.1f} traces/min "
                f"(peak {peak} model calls in flight; workers polling {ready:.1f} s after launch)"
            )
            print("   CPU seconds per trace: " + ", ".join(f"{k} {v / args.traces:.3f}" for k, v in cpu.items()))
        print(f"ratio 2 workers / 1 worker: {rates[2] / rates[1]:.2f} (ideal 2.00)")


if __name__ == "__main__":
    main()
