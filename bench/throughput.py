"""Trace throughput of the queued mode: traces per minute with 1 worker, then with 2 (ratio printed).

One API process and N ``provenance worker`` processes on a throwaway Redis and a SQLite file; the
judge is the fake OpenAI server answering every call after a fixed latency, so the figure measures the
service (queueing, storage, estimator) around a provider of known speed. The judgement cache is off
(every trace pays its calls). Each worker runs ``--max-jobs`` traces at once.

    .venv/bin/python bench/throughput.py [--traces 24] [--latency 0.2] [--max-jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.api_server import REPO, SMALL_CLAIM, KeyedJudge, ServerProcess, make_key, small_turn
from support.fake_openai import FakeOpenAI, FakeReply
from support.services import RedisServer


def run(workers: int, traces: int, latency: float, max_jobs: int, redis_url: str, root: Path) -> float:
    """Seconds from the first submission until every trace succeeded."""
    judge = KeyedJudge()
    data = root / f"w{workers}"
    database_url = f"sqlite+aiosqlite:///{data / 'bench.db'}"
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
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "provenance_api.cli.main", "worker", "--max-jobs", str(max_jobs)],
                env={**env, "PROVENANCE_DATA_DIR": str(data / f"worker{n}")},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=REPO,
            )
            for n in range(workers)
        ]
        try:
            key = make_key(data / "keys", "bench", "bench", database_url=database_url)
            with httpx.Client(base_url=api.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
                quotes = []
                for i in range(traces):
                    turn_id = f"bench-{i}"
                    c.post("/v1/turns", json=small_turn(turn_id, query=f"Where is my order A-1? (bench {i})"))
                    r = c.post("/v1/quotes", json={"turn_id": turn_id, "sentence": SMALL_CLAIM})
                    quotes.append(r.json()["quote_id"])
                # one warm-up trace per worker process (imports, tokenizer), not timed
                time.sleep(2.0)
                start = time.monotonic()
                ids = [c.post("/v1/traces", json={"quote_id": q}).json()["trace_id"] for q in quotes]
                for trace_id in ids:
                    while True:
                        job = c.get(f"/v1/traces/{trace_id}", params={"wait": "true", "timeout": 10}).json()
                        if job["status"] in ("succeeded", "failed", "interrupted"):
                            if job["status"] != "succeeded":
                                raise RuntimeError(f"trace {trace_id} ended {job['status']}: {job['reason']}")
                            break
                return time.monotonic() - start
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
    args = parser.parse_args()
    redis = RedisServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rates = {}
            for workers in (1, 2):
                seconds = run(workers, args.traces, args.latency, args.max_jobs, redis.url, Path(tmp))
                rates[workers] = args.traces / seconds * 60
                print(f"{workers} worker(s): {args.traces} traces in {seconds:.1f} s = {rates[workers]:.1f} traces/min")
            print(f"ratio 2 workers / 1 worker: {rates[2] / rates[1]:.2f} (ideal 2.00)")
    finally:
        redis.stop()


if __name__ == "__main__":
    main()
