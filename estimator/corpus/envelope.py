"""The evidence envelope of a source: what the history recorded about where it came from and what was done to it.

Every corpus unit carries one (``Unit.envelope``): the producing tool (and MCP server / resource when the history
names them), when it was observed, the principal, tenant and scope it was fetched for, the digest of its raw content,
the transformations made before a prompt showed it, the sources it was derived from, and its custody — who kept
the record: ``history`` (the stored history it was read from) or ``gateway`` (a gateway that saw it pass).

Nothing is inferred: a field the history does not carry is None and reads ``not recorded``. ``derived_from``: a
rule of the system prompt (``Params.instructions_as_rules``, a section split off or small sections merged) is
derived from the prompt, named ``system_prompt:<sha256 of the whole prompt>``; every other source is read as it
was recorded, so its list is empty.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from estimator.corpus.turn import SourceMeta, StoredTurn

__all__ = [
    "NOT_RECORDED",
    "Custody",
    "Envelope",
    "custody_of",
    "is_lossy",
    "make_envelope",
    "shown_time",
]

NOT_RECORDED = "not recorded"
"""What a field of the envelope the history did not carry reads as."""

Custody = Literal["history", "gateway"]

_LOSSY = ("truncated", "cut to", "not inlined")
"""Words of a transformation that lost part of the content (a cut to a token budget, media named instead of
shown); a header written above the content, or a heading, loses nothing."""


def is_lossy(transformation: str) -> bool:
    """Whether a transformation lost part of the source's content."""
    lowered = transformation.lower()
    return any(word in lowered for word in _LOSSY)


class Envelope(BaseModel):
    """The evidence envelope of one source (see the module docstring). A None field: not recorded."""

    model_config = ConfigDict(frozen=True)

    tool: str = Field(description="the producing tool (system_prompt for instructions, role:user … for history)")
    server: str | None = Field(None, description="the MCP server (or service) that answered")
    resource: str | None = Field(None, description="the resource read (an MCP resource URI)")
    observed_at: datetime | None = Field(None, description="when its content was observed")
    principal: str | None = Field(None, description="whom it was fetched for")
    tenant: str | None = Field(None, description="the tenant it was fetched for")
    scope: str | None = Field(None, description="the scope it was fetched under")
    digest: str = Field(description="sha256 of the raw content, as the model saw it")
    transformations: tuple[str, ...] = Field((), description="every change made before a prompt showed it")
    derived_from: tuple[str, ...] = Field((), description="what it was built from (a rule: the whole prompt)")
    custody: Custody = Field("history", description="who kept the record: the history, or a gateway")

    @property
    def lossy(self) -> tuple[str, ...]:
        """The transformations that lost part of the content (empty: the model saw it whole)."""
        return tuple(t for t in self.transformations if is_lossy(t))


def custody_of(turn: StoredTurn) -> Custody:
    """Who kept the record of the turn's sources: the one place custody is decided. Every stored turn is read
    from a history its platform kept, so ``history``; a turn a gateway recorded as it passed is ``gateway``, decided
    here once the turn can say so."""
    del turn  # the stored turn does not yet say who recorded it
    return "history"


def make_envelope(
    *,
    tool: str,
    digest: str,
    transformations: tuple[str, ...],
    custody: Custody,
    observed_at: datetime | None = None,
    meta: SourceMeta | None = None,
    derived_from: tuple[str, ...] = (),
) -> Envelope:
    """An envelope from what the history recorded (``meta``: its server, resource, principal, tenant, scope)."""
    given = meta or SourceMeta()
    return Envelope(
        tool=tool,
        digest=digest,
        transformations=transformations,
        custody=custody,
        observed_at=observed_at,
        server=given.server,
        resource=given.resource,
        principal=given.principal,
        tenant=given.tenant,
        scope=given.scope,
        derived_from=derived_from,
    )


def shown_time(when: datetime | None) -> str:
    """A recorded time as shown to a user (ISO 8601), or ``not recorded``."""
    return when.isoformat() if when is not None else NOT_RECORDED
