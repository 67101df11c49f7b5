#!/usr/bin/env bash
# The project's test command: installs everything on a fresh machine, then runs
# lint, formatting, types, the layer contracts and the whole test suite. CI runs exactly this.
#
# Install is install, test is test: every build the tests need (the local model included) happens here,
# before pytest starts, so no test waits on a compile or a download. Each step is cached and resumable.
# The fast loop while you work is scripts/test-fast.sh (CONTRIBUTING.md).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '== %s\n' "$*" >&2; }

step "python environment (.venv from the hash-pinned lock)"
./scripts/setup.sh
step "Debian packages (Chromium, redis-server, postgresql) when missing"
./scripts/system-deps.sh
step "the local models (llama-cpp-python compiled for this CPU, the GGUF files assembled; cached in \${PROVENANCE_CACHE:-~/.cache/provenance})"
./scripts/local-model.sh build
./scripts/local-model.sh --small build
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# real Redis and PostgreSQL on loopback for their variants of the tests; stopped on exit
. ./scripts/services.sh
services_start

step "lint, format, types, layer contracts"
.venv/bin/ruff check estimator provenance_api prompts tests bench
.venv/bin/ruff format --check estimator provenance_api prompts tests bench
.venv/bin/mypy
.venv/bin/lint-imports --no-cache # the layer contracts in pyproject.toml
step "the test suite"
.venv/bin/pytest -q "$@"
