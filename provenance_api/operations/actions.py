"""The free tier of a stored turn's actions: every tool call, where its argument values came from, its origin and
the steered-by-data screen (``estimator.actions``). Zero model calls, like the segments."""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from estimator.corpus.units import Corpus
from provenance_api.core.schemas_actions import ActionsOut
from provenance_api.operations.auth import Principal
from provenance_api.operations.custody import bound_sources
from provenance_api.operations.request_params import request_params
from provenance_api.operations.services import Services
from provenance_api.providers import free_tier
from provenance_api.storage import crud_turns

__all__ = ["turn_actions"]


async def turn_actions(
    services: Services, caller: Principal, turn_id: str, overrides: dict[str, Any] | None = None
) -> ActionsOut:
    record = await crud_turns.get_turn(services.db, caller.tenant, turn_id)
    params = request_params(services.settings.base_params, overrides)

    def screen() -> tuple[ActionsOut, Corpus]:
        view = free_tier.gate_view(record.turn, params)
        return free_tier.actions_out(turn_id, record.turn, view, services.settings.freshness_policy), view.corpus

    out, corpus = await anyio.to_thread.run_sync(screen)
    sources = await bound_sources(services.db, caller.tenant, out.sources, corpus)  # the MCP gateway's custody
    return out.model_copy(update={"sources": sources})
