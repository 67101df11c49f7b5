"""The layered corpus's vocabulary: layers, evidence records and source units."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum


class Layer(StrEnum):
    """The three layers of provenance (§2.1), in display order."""

    TOOLS = "tools"
    INSTRUCTIONS = "instructions"
    HISTORY = "history"


PROVENANCE_LAYER_ORDER: tuple[Layer, ...] = (Layer.TOOLS, Layer.INSTRUCTIONS, Layer.HISTORY)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Evidence:
    """An evidence record for one unit (in the spirit of an evidence envelope).

    ``digest`` is the sha256 of the unit's full, untruncated text; ``tokens`` its
    untruncated size; ``transformations`` every change made on the way to a prompt.
    """

    digest: str
    source: str
    tokens: int
    transformations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unit:
    """One source of the context: a tool call with its return, the system prompt, or a prior message."""

    id: str
    kind: str
    tool: str
    label: str
    text: str
    ordinal: int
    layer: Layer
    evidence: Evidence
    unversioned: bool = False
    turns_ago: int | None = None

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")


@dataclass(frozen=True)
class ExcludedCall:
    """A tool call that was not made a unit, and why (disclosed, never silent)."""

    tool: str
    label: str
    reason: str


@dataclass(frozen=True)
class Corpus:
    """The layered corpus of one turn."""

    units: tuple[Unit, ...]
    unscorable: tuple[str, ...] = ()
    excluded: tuple[ExcludedCall, ...] = ()
    path: str = "none"
    notes: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.units)

    def by_id(self, unit_id: str) -> Unit:
        for u in self.units:
            if u.id == unit_id:
                return u
        raise KeyError(unit_id)

    def layers_present(self) -> tuple[Layer, ...]:
        present = {u.layer for u in self.units}
        return tuple(layer for layer in PROVENANCE_LAYER_ORDER if layer in present)

    def in_layer(self, layer: Layer) -> tuple[Unit, ...]:
        return tuple(u for u in self.units if u.layer == layer)

    def tool_units(self) -> tuple[Unit, ...]:
        return self.in_layer(Layer.TOOLS)

    @property
    def digest(self) -> str:
        """A digest over every unit's digest, in id order: identifies the corpus a result was computed on."""
        return sha256_hex("\n".join(f"{u.id}:{u.evidence.digest}" for u in self.units))

    @property
    def unversioned(self) -> bool:
        return any(u.unversioned for u in self.units)
