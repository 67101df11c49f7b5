#!/usr/bin/env bash
# Install everything the project needs into .venv from the hash-pinned lock file.
# Idempotent: a second run only checks that the environment matches the lock.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==0.13.9"
# --compile-bytecode: the .pyc files are written here, once, so no process compiles the libraries again at every
# start, even where PYTHONDONTWRITEBYTECODE is set (importing litellm alone is twice as slow from source)
.venv/bin/uv pip sync --quiet --python .venv/bin/python --require-hashes --compile-bytecode requirements.lock
.venv/bin/uv pip install --quiet --python .venv/bin/python --no-deps -e .
