#!/usr/bin/env bash
# The project's test command: installs everything on a fresh machine, then runs
# lint, types and the whole test suite. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/system-deps.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# real Redis and PostgreSQL on loopback for their variants of the tests; stopped on exit
. ./scripts/services.sh
services_start

.venv/bin/ruff check estimator provenance_api prompts tests bench
.venv/bin/ruff format --check estimator provenance_api prompts tests bench
.venv/bin/mypy
.venv/bin/lint-imports --no-cache  # the layer contracts in pyproject.toml
.venv/bin/pytest -q "$@"
