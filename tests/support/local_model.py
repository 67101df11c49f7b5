"""A real local model for tests: built (once, cached outside the work tree) by scripts/local-model.sh.

The test command (scripts/test.sh) builds both models before pytest starts; a test only checks that the build is
there (``local-model.sh check``) and never builds, so no test can time out on a compile or a download. Nothing here
skips: when the build is missing or the server cannot come up, the test fails and says why.
``small=True`` is Qwen2.5-Coder-0.5B (fast, plumbing only), otherwise Qwen2.5-Coder-1.5B.
"""

from __future__ import annotations

import importlib
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "local-model.sh"


def _script(*args: str, timeout: float = 1800) -> str:
    proc = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        pytest.fail(
            f"scripts/local-model.sh {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}", pytrace=False
        )
    return proc.stdout


def model_path(*, small: bool) -> str:
    """The GGUF path; fails, naming the command to run, when the install step has not built it."""
    out = _script(*(["--small"] if small else []), "check", timeout=300)
    path = out.strip().splitlines()[-1]
    if not Path(path).is_file():
        pytest.fail(f"scripts/local-model.sh path printed {path!r}, which is not a file", pytrace=False)
    importlib.invalidate_caches()  # the build may just have installed llama-cpp-python into this venv
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def llama_server(*, small: bool) -> Iterator[str]:
    """An OpenAI-compatible llama.cpp server on loopback; yields its base URL (…/v1)."""
    flag = ["--small"] if small else []
    port = free_port()
    _script(*flag, "check", timeout=300)
    _script(*flag, "start", str(port))
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        subprocess.run([str(SCRIPT), *flag, "stop", str(port)], capture_output=True, timeout=60, check=False)
