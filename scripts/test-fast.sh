#!/usr/bin/env bash
# The fast loop while you work: lint, format and every test that starts no server process, no browser,
# no PostgreSQL or Redis and no local model (markers set by tests/conftest.py). The full command,
# scripts/test.sh, runs all of them and is what CI runs.
#   scripts/test-fast.sh                 the fast tests
#   scripts/test-fast.sh tests/test_x.py extra pytest arguments narrow it further
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/pytest ] || ./scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/ruff check estimator provenance_api prompts tests bench
.venv/bin/ruff format --check estimator provenance_api prompts tests bench
.venv/bin/pytest -q -m "not (service or browser or postgres or redis or local_model)" "$@"
