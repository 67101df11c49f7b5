#!/usr/bin/env bash
# The fast loop while you work: lint, format and every test that starts no server process, no browser,
# no PostgreSQL or Redis and no local model (markers set by tests/conftest.py), spread over every core
# (pytest-xdist). The full command, scripts/test.sh, runs all of them, one process, and is what CI runs.
#   scripts/test-fast.sh                 the fast tests
#   scripts/test-fast.sh tests/method/test_x.py extra pytest arguments narrow it further (-n 0: one process)
set -euo pipefail
cd "$(dirname "$0")/.."
# (re)install when .venv is missing or older than the lock's pytest-xdist
{ [ -x .venv/bin/pytest ] && .venv/bin/python -c 'import xdist' 2>/dev/null; } || ./scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/ruff check estimator provenance_api prompts tests bench
.venv/bin/ruff format --check estimator provenance_api prompts tests bench
.venv/bin/pytest -q -n auto --dist loadscope -m "not (service or browser or postgres or redis or local_model or slow or gateway)" "$@"
