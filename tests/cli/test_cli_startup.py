"""The free commands start without the provider library: ``provenance --version``, ``quote``, ``gate``,
``explain`` and ``traces`` send no model call, so they never import litellm (seconds of CPU) or another
provider library. Each runs as a child process under ``python -X importtime``, whose report names every module
the command imported; nothing here is timed (``bench/README.md`` has the measured start-up).

A quote still prices its calls: the price map is read from litellm's package without importing it
(``providers/price_map.py``), and it must be litellm's own map, row for row.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from provenance_api.providers import price_map
from provenance_api.providers.price_map import LiteLLMPricing, bundled_price_map

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = str(ROOT / "fixtures" / "eo_worldview_turn.json")
PROVIDER_LIBRARIES = frozenset(
    {"litellm", "openai", "anthropic", "google", "boto3", "cohere", "mistralai", "llama_cpp", "transformers"}
)
FREE_COMMANDS = {
    "version": ["--version"],
    "quote": ["quote", FIXTURE, "r10"],
    "gate": ["gate", FIXTURE],
    "explain": ["explain", "gamma"],
    "traces": ["traces"],
}


def _imported(argv: list[str], data_dir: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``provenance ARGV`` in a child process; its result and the modules it imported (``-X importtime``)."""
    env = {**os.environ, "PROVENANCE_DATA_DIR": str(data_dir), "NO_COLOR": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    ran = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "provenance_api.cli.main", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in ran.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    return ran, names


@pytest.mark.parametrize("command", list(FREE_COMMANDS))
def test_a_free_command_imports_no_provider_library(command: str, tmp_path: Path) -> None:
    ran, names = _imported(FREE_COMMANDS[command], tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "provenance_api.core.errors" in names  # the report was read: it names the command's own modules
    loaded = sorted({name.split(".", 1)[0] for name in names} & PROVIDER_LIBRARIES)
    assert loaded == [], f"provenance {command} imported {loaded}"


def test_quote_prices_its_calls_without_litellm(tmp_path: Path) -> None:
    ran, names = _imported(FREE_COMMANDS["quote"], tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "litellm" not in names
    assert "Est. cost         at most ~$" in ran.stdout  # priced from the map: the model's price was found


def test_the_price_map_read_without_litellm_is_litellms_own() -> None:
    bundled = bundled_price_map()
    before = LiteLLMPricing().price("openai/gpt-4o")
    from provenance_api.providers.llm_litellm import load_litellm

    live = load_litellm().model_cost  # imports litellm in this process, as a model call would
    assert len(bundled) > 1000 and set(bundled) == set(live)
    assert [name for name, row in live.items() if dict(bundled[name]) != dict(row)] == []
    assert price_map.litellm_price_map() is live  # once litellm is loaded, its map is the one read
    assert before is not None and LiteLLMPricing().price("openai/gpt-4o") == before


def test_aliases_are_served_as_litellm_serves_them() -> None:
    raw = {
        "gpt-x": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "aliases": ["gpt-x-latest", "gpt-y"]},
        "gpt-y": {"input_cost_per_token": 3e-6, "output_cost_per_token": 4e-6},
        "gpt-x-2025": {"alias_of": "gpt-x"},
        "gpt-z": {"alias_of": "nothing-here"},
        "fallback_generalizations": {"rules": []},
    }
    served = price_map._expand_aliases(raw)
    assert served["gpt-x-latest"] is served["gpt-x-2025"] is raw["gpt-x"]
    assert served["gpt-y"] is raw["gpt-y"]  # an alias never hides a model row
    assert "gpt-z" not in served and "fallback_generalizations" not in served
