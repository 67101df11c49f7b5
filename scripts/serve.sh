#!/usr/bin/env bash
# Run the service with its embedded defaults (SQLite in the data directory, in-process
# job runner): installs on first use, then starts `provenance serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/provenance ] || ./scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/provenance serve "$@"
