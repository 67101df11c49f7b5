"""The turn list and the trace list: filtered, sorted, counted, paged by keyset.

A page starts after a ``Keyset``: the sort key's value on the last row shown and that row's tie-breaker (a turn's
``turn_id``, a trace's id), both unique within the tenant. Rows without the sort key's value (a turn with no
``created_at``, a trace with no cost) come after all the others in either direction, so every order is total and a
page never repeats or skips a row, whatever is stored or deleted between pages. No global sequence number appears
in a position (it would tell one tenant how much the others store).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Select, and_, func, or_, select, update
from sqlalchemy.orm import InstrumentedAttribute

from estimator.corpus.turn import StoredTurn
from provenance_api.storage import search_index
from provenance_api.storage.crud_traces import JobRecord, _job
from provenance_api.storage.crud_turns import TurnSummary
from provenance_api.storage.models import QuoteRow, StoredTurnRow, TraceJobRow, TraceResultRow
from provenance_api.storage.session import Database

Key = str | int | float | datetime | None
_Query = TypeVar("_Query", bound="Select[*tuple[Any, ...]]")


@dataclass(frozen=True)
class Keyset:
    """Where a page starts: after the row whose sort key is ``key`` and whose tie-breaker is ``tie``."""

    key: Key
    tie: str


@dataclass(frozen=True)
class Order:
    """A sort key (one of the list's names) and its direction."""

    key: str
    descending: bool


def _beyond(column: Any, value: Any, descending: bool) -> ColumnElement[bool]:
    return column < value if descending else column > value  # type: ignore[no-any-return]


def _after(column: Any, tie: Any, order: Order, at: Keyset) -> ColumnElement[bool]:
    """Rows after ``at`` in ``order``: rows with a value first (in order), then rows without one (by tie)."""
    if at.key is None:
        return and_(column.is_(None), _beyond(tie, at.tie, order.descending))
    return or_(
        _beyond(column, at.key, order.descending),
        and_(column == at.key, _beyond(tie, at.tie, order.descending)),
        column.is_(None),
    )


def _ordered(query: _Query, column: Any, tie: Any, order: Order) -> _Query:
    if order.descending:
        return query.order_by(column.desc().nulls_last(), tie.desc())
    return query.order_by(column.asc().nulls_last(), tie.asc())


# --------------------------------------------------------------------------- turns


@dataclass(frozen=True)
class TurnFilter:
    """What a turn must match to be listed: ``q`` (the search index), exact ``model`` and ``agent``, its date
    (``created_at``, else when it was stored) within [``since``, ``until``), at least ``min_traceable``."""

    q: str = ""
    model: str | None = None
    agent: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    min_traceable: int | None = None


TURN_KEYS: dict[str, InstrumentedAttribute[Any]] = {
    "stored_at": StoredTurnRow.stored_at,
    "created_at": StoredTurnRow.turn_created_at,
    "model": StoredTurnRow.model,
    "traceable": StoredTurnRow.traceable,
}


def _turn_where(dialect: str, tenant: str, filt: TurnFilter) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [StoredTurnRow.tenant == tenant]
    if filt.q.strip():
        where.append(StoredTurnRow.seq.in_(search_index.matching(dialect, tenant, filt.q)))
    if filt.model is not None:
        where.append(StoredTurnRow.model == filt.model)
    if filt.agent is not None:
        where.append(StoredTurnRow.agent == filt.agent)
    day = func.coalesce(StoredTurnRow.turn_created_at, StoredTurnRow.stored_at)
    if filt.since is not None:
        where.append(day >= filt.since)
    if filt.until is not None:
        where.append(day < filt.until)
    if filt.min_traceable:
        where.append(StoredTurnRow.traceable >= filt.min_traceable)
    return where


async def turn_page(
    db: Database, tenant: str, filt: TurnFilter, order: Order, after: Keyset | None, limit: int
) -> list[TurnSummary]:
    """Up to ``limit`` of the tenant's turns matching ``filt``, in ``order``, after ``after``."""
    column = TURN_KEYS[order.key]
    async with db.session() as session:
        query = select(
            StoredTurnRow.turn_id,
            StoredTurnRow.digest,
            StoredTurnRow.model,
            StoredTurnRow.agent,
            StoredTurnRow.turn_created_at,
            StoredTurnRow.stored_at,
            StoredTurnRow.seq,
            StoredTurnRow.traceable,
        ).where(*_turn_where(session.get_bind().dialect.name, tenant, filt))
        if after is not None:
            query = query.where(_after(column, StoredTurnRow.turn_id, order, after))
        rows = (await session.execute(_ordered(query, column, StoredTurnRow.turn_id, order).limit(limit))).all()
    return [
        TurnSummary(
            turn_id=r[0], digest=r[1], model=r[2], agent=r[3], created_at=r[4], stored_at=r[5], seq=r[6], traceable=r[7]
        )
        for r in rows
    ]


async def count_turns(db: Database, tenant: str, filt: TurnFilter) -> int:
    """How many of the tenant's turns match ``filt``."""
    async with db.session() as session:
        query = (
            select(func.count())
            .select_from(StoredTurnRow)
            .where(*_turn_where(session.get_bind().dialect.name, tenant, filt))
        )
        return int((await session.execute(query)).scalar_one())


def turn_key(turn: TurnSummary, key: str) -> Key:
    """The value of sort key ``key`` on a listed turn (what its next page starts after)."""
    values: dict[str, Key] = {
        "stored_at": turn.stored_at,
        "created_at": turn.created_at,
        "model": turn.model,
        "traceable": turn.traceable,
    }
    return values[key]


async def trace_counts(db: Database, tenant: str, turn_ids: list[str]) -> dict[str, int]:
    """How many traces (probes are not counted) each of ``turn_ids`` has, in the tenant."""
    if not turn_ids:
        return {}
    query = (
        select(TraceJobRow.turn_id, func.count())
        .where(TraceJobRow.tenant == tenant, TraceJobRow.kind == "trace", TraceJobRow.turn_id.in_(turn_ids))
        .group_by(TraceJobRow.turn_id)
    )
    async with db.session() as session:
        return {str(turn_id): int(n) for turn_id, n in (await session.execute(query)).all()}


async def uncounted_turns(db: Database, tenant: str, limit: int) -> list[tuple[int, StoredTurn | None]]:
    """Up to ``limit`` of the tenant's turns whose traceable count is not stored yet: (seq, turn), the turn None
    when its stored body no longer reads as one."""
    query = (
        select(StoredTurnRow.seq, StoredTurnRow.body)
        .where(StoredTurnRow.tenant == tenant, StoredTurnRow.traceable.is_(None))
        .order_by(StoredTurnRow.seq)
        .limit(limit)
    )
    async with db.session() as session:
        rows = (await session.execute(query)).all()
    out: list[tuple[int, StoredTurn | None]] = []
    for seq, body in rows:
        try:
            out.append((int(seq), StoredTurn.model_validate_json(body)))
        except (ValueError, RecursionError):
            out.append((int(seq), None))
    return out


async def store_counts(db: Database, counts: dict[int, int]) -> None:
    """Store the traceable counts of turns (by seq) that have none yet."""
    if not counts:
        return
    async with db.transaction() as session:
        for seq, n in counts.items():
            await session.execute(
                update(StoredTurnRow)
                .where(StoredTurnRow.seq == seq, StoredTurnRow.traceable.is_(None))
                .values(traceable=n)
            )


# --------------------------------------------------------------------------- traces


@dataclass(frozen=True)
class TraceFilter:
    """What a trace must match to be listed (exact values); ``None`` matches any."""

    turn_id: str | None = None
    verdict: str | None = None
    model: str | None = None
    status: str | None = None
    estimator: str | None = None


@dataclass(frozen=True)
class TraceRow:
    """One listed trace: its job, and from its result and quote the verdict, cost and estimator."""

    job: JobRecord
    verdict: str | None
    cost_usd: float | None
    estimator: str | None


_VERDICT = TraceResultRow.result["verdict"].as_string()
# the estimator a trace was started with is its quote's (null when its quote is no longer kept)
_ESTIMATOR = QuoteRow.estimator
TRACE_KEYS: dict[str, Any] = {"created_at": TraceJobRow.created_at, "cost": TraceResultRow.cost_usd}


def _trace_query(selected: _Query, tenant: str, filt: TraceFilter) -> _Query:
    query = (
        selected.outerjoin(TraceResultRow, TraceResultRow.job_id == TraceJobRow.id)
        .outerjoin(QuoteRow, and_(QuoteRow.id == TraceJobRow.quote_id, QuoteRow.tenant == TraceJobRow.tenant))
        .where(TraceJobRow.tenant == tenant, TraceJobRow.kind == "trace")
    )
    if filt.turn_id is not None:
        query = query.where(TraceJobRow.turn_id == filt.turn_id)
    if filt.model is not None:
        query = query.where(TraceJobRow.model == filt.model)
    if filt.status is not None:
        query = query.where(TraceJobRow.status == filt.status)
    if filt.verdict is not None:
        query = query.where(_VERDICT == filt.verdict)  # noqa: SIM300  (only a succeeded trace has a result)
    if filt.estimator is not None:
        query = query.where(_ESTIMATOR == filt.estimator)  # noqa: SIM300
    return query


async def trace_page(
    db: Database, tenant: str, filt: TraceFilter, order: Order, after: Keyset | None, limit: int
) -> list[TraceRow]:
    """Up to ``limit`` of the tenant's traces matching ``filt``, in ``order``, after ``after``."""
    column = TRACE_KEYS[order.key]
    query = _trace_query(select(TraceJobRow, _VERDICT, TraceResultRow.cost_usd, _ESTIMATOR), tenant, filt)
    if after is not None:
        query = query.where(_after(column, TraceJobRow.id, order, after))
    async with db.session() as session:
        rows = (await session.execute(_ordered(query, column, TraceJobRow.id, order).limit(limit))).all()
    return [
        TraceRow(
            job=_job(row),
            verdict=verdict if row.status == "succeeded" else None,
            cost_usd=None if cost is None else float(cost),
            estimator=estimator,
        )
        for row, verdict, cost, estimator in rows
    ]


async def count_traces(db: Database, tenant: str, filt: TraceFilter) -> int:
    """How many of the tenant's traces match ``filt``."""
    async with db.session() as session:
        query = _trace_query(select(func.count(TraceJobRow.id)).select_from(TraceJobRow), tenant, filt)
        return int((await session.execute(query)).scalar_one())


def trace_key(trace: TraceRow, key: str) -> Key:
    """The value of sort key ``key`` on a listed trace."""
    return trace.job.created_at if key == "created_at" else trace.cost_usd
