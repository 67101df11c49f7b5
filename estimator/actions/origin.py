"""An action's origin in one word, from its argument provenance.

- ``data``: a decisive value appears only in tool returns — the agent acted on what a tool gave it;
- ``invented``: a decisive value appears nowhere the agent could read (made up, or computed);
- ``instructions``: a decisive value appears only in the system prompt (and tool returns);
- ``user``: every decisive value is in the user's request or the earlier conversation (or there is none).

The first that applies wins, in that order: a value from tool data is what an incident most needs to see, then a
value from nowhere. A decisive value is an identifier, an amount, an address (``arguments``); long free text the
agent wrote is not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from estimator.actions.arguments import QUERY_SOURCE, ArgumentSource
from estimator.corpus.units import Layer

__all__ = ["Origin", "action_origin"]


class Origin(StrEnum):
    USER = "user"
    INSTRUCTIONS = "instructions"
    DATA = "data"
    INVENTED = "invented"


_USER_LAYERS = frozenset({QUERY_SOURCE, str(Layer.HISTORY)})


def action_origin(arguments: Sequence[ArgumentSource]) -> Origin:
    decisive = [a for a in arguments if a.decisive]
    layers = [{h.layer for h in a.holders} for a in decisive]
    if any(found and found <= {str(Layer.TOOLS)} for found in layers):
        return Origin.DATA
    if any(not found for found in layers):
        return Origin.INVENTED
    if any(not (found & _USER_LAYERS) and str(Layer.INSTRUCTIONS) in found for found in layers):
        return Origin.INSTRUCTIONS
    return Origin.USER
