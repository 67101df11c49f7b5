"""The turn list and the trace list: filters, sort, total and the page cursor, for the HTTP routes and the viewer.

Each turn carries ``traceable``, the free tier's count of its traceable sentences, stored with the turn: counted
as ``POST /v1/turns`` stores it, and for turns stored otherwise (imports, or before the count existed) by the same
code just before their tenant's turns are listed, so filters, sorts and totals always see every turn's count. A
turn that can no longer be read counts 0 and stays listed.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import get_args

import anyio

from estimator.corpus.turn import StoredTurn
from estimator.loo.logprob_cost import EstimatorChoice
from estimator.params import Params
from estimator.results.models import Verdict
from provenance_api.core.errors import InvalidInput
from provenance_api.core.schemas import (
    JobStatus,
    TraceList,
    TraceSort,
    TraceSummary,
    TurnList,
    TurnSort,
    TurnSummary,
)
from provenance_api.operations import page_cursor
from provenance_api.operations.auth import Principal
from provenance_api.operations.services import Services
from provenance_api.operations.tracing import job_calls
from provenance_api.providers import free_tier
from provenance_api.storage import lists
from provenance_api.storage.lists import Order, TraceFilter, TurnFilter

log = logging.getLogger(__name__)
COUNT_BATCH = 200
_KEY_KINDS: dict[str, page_cursor.KeyKind] = {
    "stored_at": "datetime",
    "created_at": "datetime",
    "model": "str",
    "traceable": "int",
    "cost": "float",
}
_VERDICTS: frozenset[str] = frozenset(get_args(Verdict))
_ESTIMATORS: frozenset[str] = frozenset(get_args(EstimatorChoice))


def _order(sort: str) -> Order:
    return Order(sort.removeprefix("-"), sort.startswith("-"))


def _utc(value: datetime | None) -> datetime | None:
    """A filter's time as aware UTC (a time without a zone is read as UTC)."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# --------------------------------------------------------------------------- traceable counts


def traceable_count(turn: StoredTurn, params: Params) -> int:
    """How many sentences of the turn's response the free tier marks traceable (0 if it cannot gate the turn)."""
    try:
        return int(free_tier.gate_view(turn, params).report.summary.traceable)
    except Exception:  # a turn the free tier cannot gate is listed as having nothing to trace, never a 500
        log.warning("free tier could not gate turn %r; its traceable count is 0", turn.turn_id, exc_info=True)
        return 0


def _counts(turns: list[tuple[int, StoredTurn | None]], params: Params) -> dict[int, int]:
    return {seq: 0 if turn is None else traceable_count(turn, params) for seq, turn in turns}


async def count_uncounted(services: Services, tenant: str) -> int:
    """Count and store the traceable sentences of the tenant's turns stored without a count; how many were."""
    done = 0
    while turns := await lists.uncounted_turns(services.db, tenant, COUNT_BATCH):
        counts = await anyio.to_thread.run_sync(_counts, turns, services.settings.base_params)
        await lists.store_counts(services.db, counts)
        done += len(counts)
    return done


# --------------------------------------------------------------------------- turns


@dataclass(frozen=True)
class TurnQuery:
    """The turn list's query: the search, the filters and the order (``GET /v1/turns``)."""

    q: str = ""
    model: str | None = None
    agent: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    min_traceable: int | None = None
    sort: TurnSort = "-stored_at"

    def filter(self) -> TurnFilter:
        since, until = _utc(self.since), _utc(self.until)
        if since is not None and until is not None and until <= since:
            raise InvalidInput(
                f"until ({until.isoformat()}) is not after since ({since.isoformat()})",
                field="query.until",
                fix="give an until later than since (until is exclusive), or leave one of them out",
            )
        return TurnFilter(
            q=self.q.strip(),
            model=self.model or None,
            agent=self.agent or None,
            since=since,
            until=until,
            min_traceable=self.min_traceable or None,
        )


async def turn_list(
    services: Services, caller: Principal, query: TurnQuery, limit: int, cursor: str | None
) -> TurnList:
    """One page of the caller's turns matching ``query``, in its order, with the total and the next cursor."""
    filt = query.filter()
    order = _order(query.sort)
    print_ = page_cursor.fingerprint(caller.tenant, "turns", query.sort, asdict(filt))
    after = page_cursor.decode(cursor, print_, _KEY_KINDS[order.key])
    await count_uncounted(services, caller.tenant)
    rows = await lists.turn_page(services.db, caller.tenant, filt, order, after, limit + 1)
    page = rows[:limit]
    total = await lists.count_turns(services.db, caller.tenant, filt)
    traces = await lists.trace_counts(services.db, caller.tenant, [r.turn_id for r in page])
    last = page[-1] if page else None
    next_cursor = None
    if len(rows) > limit and last is not None:
        next_cursor = page_cursor.encode(print_, lists.turn_key(last, order.key), last.turn_id)
    return TurnList(
        items=[
            TurnSummary(
                turn_id=r.turn_id,
                digest=r.digest,
                model=r.model,
                agent=r.agent,
                created_at=r.created_at,
                stored_at=r.stored_at,
                traceable=r.traceable or 0,
                traces=traces.get(r.turn_id, 0),
            )
            for r in page
        ],
        total=total,
        next_cursor=next_cursor,
    )


# --------------------------------------------------------------------------- traces


@dataclass(frozen=True)
class TraceQuery:
    """The trace list's query: exact-match filters and the order (``GET /v1/traces``). Traces only: probes are
    jobs too, listed by ``GET /v1/probes/{id}`` one at a time, never here."""

    turn_id: str | None = None
    verdict: Verdict | None = None
    model: str | None = None
    status: JobStatus | None = None
    estimator: EstimatorChoice | None = None
    sort: TraceSort = "-created_at"

    def filter(self) -> TraceFilter:
        return TraceFilter(
            turn_id=self.turn_id or None,
            verdict=self.verdict,
            model=self.model or None,
            status=self.status,
            estimator=self.estimator,
        )


def _summary(row: lists.TraceRow) -> TraceSummary:
    job = row.job
    verdict = row.verdict if row.verdict in _VERDICTS else None
    estimator = row.estimator if row.estimator in _ESTIMATORS else None
    return TraceSummary.model_validate(
        {
            "trace_id": job.id,
            "turn_id": job.turn_id,
            "claim": job.claim,
            "status": job.status,
            "verdict": verdict,
            "estimator": estimator,
            "model": job.model,
            "calls": job_calls(job),
            "cost_usd": row.cost_usd,
            "created_at": job.created_at,
            "finished_at": job.finished_at,
            "source": job.source,
        }
    )


async def trace_list(
    services: Services, caller: Principal, query: TraceQuery, limit: int, cursor: str | None
) -> TraceList:
    """One page of the caller's traces across turns matching ``query``, with the total and the next cursor."""
    filt = query.filter()
    order = _order(query.sort)
    print_ = page_cursor.fingerprint(caller.tenant, "traces", query.sort, asdict(filt))
    after = page_cursor.decode(cursor, print_, _KEY_KINDS[order.key])
    rows = await lists.trace_page(services.db, caller.tenant, filt, order, after, limit + 1)
    page = rows[:limit]
    total = await lists.count_traces(services.db, caller.tenant, filt)
    last = page[-1] if page else None
    next_cursor = None
    if len(rows) > limit and last is not None:
        next_cursor = page_cursor.encode(print_, lists.trace_key(last, order.key), last.job.id)
    return TraceList(items=[_summary(r) for r in page], total=total, next_cursor=next_cursor)
