"""A cost quote as the service keeps it: ``StoredQuote``, one row of the ``quotes`` table, typed.

Operations build one (``POST /v1/quotes``, a trace the command line logs), ``crud_traces`` writes and reads
it, the job runner reads the estimator it was made for. The row's columns are the fields the service queries
and reserves by (``estimator``, ``planned_calls``, ``cost_usd``, ``refused``, …); the ``quote`` JSON column
holds the estimator's quote (``priced``, ``estimator.cost.CostQuote`` as its JSON contract) with the
service's additions beside it, each absent when not made: why this judge model (``model_reason``,
``model_source``), what a logprob trace's scoring adds (``scoring``), whether the judge offers top
log-probabilities (``expected_digit``) and both sides of a proxy trace (``proxy``).

``planned_calls`` and ``cost_usd`` are the service's: the ceiling the budget reserves and the ledger enforces
for the chosen estimator (under proxy the fallback's worst case), where ``priced`` holds the judged plan's.

Quotes stored by earlier versions read back: a key added since (``calls.redundancy``, the additions) has a
default, and the ``estimator`` key their JSON carried is the column now (migration 0015); an unknown key is
ignored. A proxy quote stored before 0015 carries the worst case as ``priced.cost_usd``; nothing reads it.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from estimator.cost import CostQuote
from estimator.loo.logprob_cost import EstimatorChoice
from estimator.results.models import ScoringQuoteModel
from estimator.results.proxy import ProxyQuoteModel
from provenance_api.core.schemas import ExpectedDigitOut
from provenance_api.storage.models import utcnow

__all__ = ["ADDED", "ModelSource", "StoredQuote", "new_quote_id", "quote_times"]

ModelSource = Literal["explicit", "turn", "default"]  # where the judge model came from (model_policy.ChoiceSource)
ADDED = frozenset({"scoring", "proxy", "model_reason", "model_source", "expected_digit"})
"""The service's additions, kept in the ``quote`` JSON column beside the estimator's quote."""


def new_quote_id() -> str:
    return f"q_{secrets.token_hex(10)}"


def quote_times(ttl_seconds: int) -> tuple[datetime, datetime]:
    """(created_at, expires_at) of a quote made now and kept ``ttl_seconds``."""
    now = utcnow()
    return now, now + timedelta(seconds=ttl_seconds)


class StoredQuote(BaseModel):
    """One stored quote: who asked, what is traced, under which estimator and model, and what it costs."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=new_quote_id)
    tenant: str
    user: str
    turn_id: str
    sentence: str
    claim: str
    segment_id: str | None
    model: str
    probe: bool
    params: dict[str, Any]
    estimator: EstimatorChoice = "judged"
    planned_calls: int
    cost_usd: float | None
    refused: str | None
    priced: CostQuote
    scoring: ScoringQuoteModel | None = None
    proxy: ProxyQuoteModel | None = None
    model_reason: str | None = None
    model_source: ModelSource | None = None
    expected_digit: ExpectedDigitOut | None = None
    created_at: datetime
    expires_at: datetime
    used_by: str | None = None

    def document(self) -> dict[str, Any]:
        """The ``quote`` JSON column: the estimator's quote, then the service's additions that were made."""
        out = self.priced.to_dict()
        out.update(self.model_dump(mode="json", include=set(ADDED), exclude_none=True))
        return out
