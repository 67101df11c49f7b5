"""litellm's price map, read without importing litellm unless a model call needs it anyway.

Pricing a trace (``provenance quote``, the cost gate of every trace) needs each model's USD per input and
output token, which litellm keeps in ``litellm.model_cost``. Importing litellm to read it costs seconds of
CPU (it imports the OpenAI SDK and every provider adapter), so a command that makes no model call would
pay for a library it never uses. With the offline defaults the package pins (``LITELLM_LOCAL_MODEL_COST_MAP``
or ``LITELLM_OFFLINE_MODE``), ``litellm.model_cost`` is the JSON file bundled in litellm's package with its
aliases expanded; that file is read here the same way, located with ``importlib.util.find_spec`` (which
finds the package without running it). Once litellm is loaded (a model call was made) or when the operator
asked for litellm's remote map, litellm's own ``model_cost`` is used: its answer is the reference.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

__all__ = ["BUNDLED_FILE", "LiteLLMPricing", "bundled_price_map", "litellm_price_map", "offline_price_map"]

BUNDLED_FILE = "model_prices_and_context_window_backup.json"
"""The price map litellm ships in its package (what ``litellm.model_cost`` is read from offline)."""

_NOT_MODELS = frozenset({"fallback_generalizations"})  # a block of rules litellm takes out of the map

_LOCK = threading.Lock()
_BUNDLED: dict[str, Mapping[str, Any]] | None = None


def offline_price_map() -> bool:
    """Whether litellm would read its bundled map (rather than fetch one) if it were imported now."""
    local = os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "").strip().lower() == "true"
    return local or os.environ.get("LITELLM_OFFLINE_MODE", "").strip().lower() == "true"


def _bundled_path() -> Path | None:
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(location) / BUNDLED_FILE
        if candidate.is_file():
            return candidate
    return None


def _expand_aliases(raw: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The rows as litellm serves them: a row whose ``alias_of`` names a model row is that row; an ``aliases``
    list names a row again (never over a model row or an earlier alias); pointers to nothing are dropped, and so
    is the block of name rules that is no model."""
    rows = {name: row for name, row in raw.items() if isinstance(row, Mapping) and name not in _NOT_MODELS}
    pointers = {name: row["alias_of"] for name, row in rows.items() if isinstance(row.get("alias_of"), str)}
    owners: dict[str, str] = {}
    for name, row in rows.items():
        aliases = row.get("aliases")
        if name in pointers or not isinstance(aliases, list):
            continue
        for alias in aliases:
            if isinstance(alias, str) and (alias not in rows or alias in pointers) and alias not in owners:
                owners[alias] = name
    for alias, target in pointers.items():
        if target in rows and target not in pointers and alias not in owners:
            owners[alias] = target
    served = {name: row for name, row in rows.items() if name not in pointers}
    served.update({alias: rows[owner] for alias, owner in owners.items()})
    return served


def bundled_price_map() -> Mapping[str, Mapping[str, Any]]:
    """The price map bundled in litellm's package, aliases expanded, read once; empty when it is missing."""
    global _BUNDLED
    if _BUNDLED is None:
        with _LOCK:
            if _BUNDLED is None:
                path = _bundled_path()
                raw = json.loads(path.read_bytes()) if path is not None else {}
                _BUNDLED = _expand_aliases(raw if isinstance(raw, dict) else {})
    return _BUNDLED


def litellm_price_map() -> Mapping[str, Any]:
    """``litellm.model_cost`` when litellm is loaded or would fetch its map; else the same map read from its
    package without importing it."""
    if "litellm" not in sys.modules and offline_price_map():
        bundled = bundled_price_map()
        if bundled:
            return bundled
    from provenance_api.providers.llm_litellm import load_litellm

    return cast(Mapping[str, Any], load_litellm().model_cost)


class LiteLLMPricing:
    """``estimator.cost.Pricing`` from litellm's bundled (offline) price map.

    The model is looked up as given, then without its provider prefix(es): ``openai/gpt-4o`` →
    ``gpt-4o``. ``overrides`` (model → (input, output) USD per token) win over the map."""

    def __init__(self, overrides: Mapping[str, tuple[float, float]] | None = None) -> None:
        self._overrides = dict(overrides or {})

    @staticmethod
    def _candidates(model: str) -> Iterator[str]:
        name = model.strip()
        while name:
            yield name
            if "/" not in name:
                return
            name = name.split("/", 1)[1]

    def overridden(self, model: str) -> bool:
        """Whether ``overrides`` price ``model``."""
        return any(name in self._overrides for name in self._candidates(model))

    def price(self, model: str) -> tuple[float, float] | None:
        for name in self._candidates(model):
            if name in self._overrides:
                return self._overrides[name]
        cost_map = litellm_price_map()
        for name in self._candidates(model):
            entry = cost_map.get(name)
            if not isinstance(entry, Mapping):
                continue
            inp, out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
            if isinstance(inp, int | float) and isinstance(out, int | float):
                return float(inp), float(out)
        return None
