"""A ``provenance worker`` loads the provider client before it takes a job.

The finding: a worker imported litellm (seconds of CPU) inside its first traces, after arq had handed it
``max_jobs`` jobs, so those traces waited behind the imports while another, warm worker could have run
them — and two workers starting together imported at once on the same cores. Now the worker's start-up
loads the tokenizer and litellm (``PROVENANCE_WARM_UP``, on by default) before its first poll; with the
setting off it does not.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from support.api_server import REPO

STARTUP = """
import asyncio, json, sys
from provenance_api.core.settings import Settings
from provenance_api.wiring import queue_worker

async def main() -> None:
    worker = queue_worker(Settings())
    ctx = {"redis": None}
    before = "litellm" in sys.modules
    await worker.on_startup(ctx)
    loaded = "litellm" in sys.modules
    await worker.on_shutdown(ctx)
    print(json.dumps({"before": before, "loaded_at_startup": loaded}))

asyncio.run(main())
"""


def _start_up(tmp_path: Path, redis_url: str, **env: str) -> dict[str, bool]:
    done = subprocess.run(
        [sys.executable, "-c", STARTUP],
        env={
            **os.environ,
            "PROVENANCE_DATA_DIR": str(tmp_path),
            "PROVENANCE_REDIS_URL": redis_url,
            "PROVENANCE_REDIS_PREFIX": f"warm-{secrets.token_hex(4)}",
            "PROVENANCE_LOG_LEVEL": "WARNING",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, bool] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_worker_loads_the_provider_client_before_it_takes_a_job(tmp_path: Path, redis_url: str) -> None:
    assert _start_up(tmp_path / "warm", redis_url) == {"before": False, "loaded_at_startup": True}
    assert _start_up(tmp_path / "cold", redis_url, PROVENANCE_WARM_UP="false") == {
        "before": False,
        "loaded_at_startup": False,
    }
