"""The tables: API keys, stored turns, quotes, jobs (traces and probes) and their results.

Every row carries its tenant, and every query in ``crud_*`` filters on it. Stored turns are
immutable once written; trace results are an append-only audit record (the ORM refuses to
update or delete one). Times are stored as naive UTC and read back as aware UTC, so SQLite and
Postgres behave the same.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    event,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Mapper, ORMExecuteState, Session, mapped_column
from sqlalchemy.types import TypeDecorator

# An autoincrementing integer on every engine (SQLite only autoincrements INTEGER PRIMARY KEY).
SeqInt = BigInteger().with_variant(Integer, "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out; naive UTC in the column."""

    impl = DateTime(timezone=False)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(),
        list[Any]: JSON(),
    }


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    tenant: Mapped[str] = mapped_column(String(128), index=True)
    user: Mapped[str] = mapped_column(String(128))
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]


class ViewerSession(Base):
    """One signed-in browser of the viewer (the cookie holds the token; only its digest is kept)."""

    __tablename__ = "viewer_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[str] = mapped_column(String(40), ForeignKey("api_keys.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime]
    rotated_at: Mapped[datetime]
    expires_at: Mapped[datetime] = mapped_column(index=True)


class StoredTurnRow(Base):
    __tablename__ = "stored_turns"
    __table_args__ = (
        UniqueConstraint("tenant", "turn_id", name="uq_stored_turns_tenant_turn"),
        Index("ix_stored_turns_tenant_batch", "tenant", "import_batch"),
        # the turn list's sorts and filters (0011): each sort key with turn_id, its tie-breaker
        Index("ix_stored_turns_tenant_stored", "tenant", "stored_at", "turn_id"),
        Index("ix_stored_turns_tenant_created", "tenant", "turn_created_at", "turn_id"),
        Index("ix_stored_turns_tenant_model", "tenant", "model", "turn_id"),
        Index("ix_stored_turns_tenant_traceable", "tenant", "traceable", "turn_id"),
        Index("ix_stored_turns_tenant_agent", "tenant", "agent"),
    )

    seq: Mapped[int] = mapped_column(SeqInt, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(128))
    turn_id: Mapped[str] = mapped_column(String(256))
    digest: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(String(256))
    agent: Mapped[str | None] = mapped_column(String(256))
    turn_created_at: Mapped[datetime | None]
    stored_at: Mapped[datetime]
    stored_by: Mapped[str] = mapped_column(String(128))
    import_batch: Mapped[str | None] = mapped_column(String(40))  # the import that created it (``ib_…``)
    # sentences the free tier marks traceable (0011): counted at store, or at the tenant's next list when null
    traceable: Mapped[int | None] = mapped_column(Integer)


class QuoteRow(Base):
    __tablename__ = "quotes"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(128), index=True)
    user: Mapped[str] = mapped_column(String(128))
    turn_id: Mapped[str] = mapped_column(String(256))
    sentence: Mapped[str] = mapped_column(Text)
    claim: Mapped[str] = mapped_column(Text)
    segment_id: Mapped[str | None] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(256))
    probe: Mapped[bool] = mapped_column(Boolean, default=False)
    params: Mapped[dict[str, Any]]
    # the estimator's quote and the service's additions (``quotes.StoredQuote.document``)
    quote: Mapped[dict[str, Any]]
    # the estimator the quote was made for (0015; quotes made before there was a choice were judged)
    estimator: Mapped[str] = mapped_column(String(16), default="judged", server_default="judged")
    planned_calls: Mapped[int] = mapped_column(Integer)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    refused: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    used_by: Mapped[str | None] = mapped_column(String(40))


class TraceJobRow(Base):
    __tablename__ = "trace_jobs"
    __table_args__ = (
        Index("ix_trace_jobs_status", "status"),
        Index("ix_trace_jobs_tenant", "tenant"),
        # the trace list (newest first, per tenant) and a turn's traces (0011)
        Index("ix_trace_jobs_tenant_kind_created", "tenant", "kind", "created_at", "id"),
        Index("ix_trace_jobs_tenant_turn", "tenant", "turn_id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), default="trace", server_default="trace")
    source_id: Mapped[str | None] = mapped_column(String(64))  # the source a probe removes
    tenant: Mapped[str] = mapped_column(String(128))
    user: Mapped[str] = mapped_column(String(128))
    turn_id: Mapped[str] = mapped_column(String(256))
    quote_id: Mapped[str] = mapped_column(String(40))
    claim: Mapped[str] = mapped_column(Text)
    segment_id: Mapped[str | None] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(256))
    params: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    calls_planned: Mapped[int] = mapped_column(Integer)
    calls_made: Mapped[int] = mapped_column(Integer, default=0)
    calls_billed: Mapped[int] = mapped_column(Integer, default=0)
    # answered from the judgement cache (not sent, not billed) and sent but failed (0012)
    calls_cached: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    calls_failed: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    source: Mapped[str] = mapped_column(Text, default="api", server_default="api")  # 'api' or 'cli' (0012)
    round: Mapped[str | None] = mapped_column(String(16))
    message: Mapped[str | None] = mapped_column(Text)
    layer_scores: Mapped[dict[str, Any]]
    quoted_cost_usd: Mapped[float | None] = mapped_column(Float)
    max_cost_usd: Mapped[float | None] = mapped_column(Float)
    # the budget reservation the job holds, settled to its calls made if a restart finds it interrupted
    reservation: Mapped[dict[str, Any] | None]
    created_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    updated_at: Mapped[datetime]


class TraceResultRow(Base):
    """The audit record of one finished trace. Append-only."""

    __tablename__ = "trace_results"

    id: Mapped[int] = mapped_column(SeqInt, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("trace_jobs.id"), unique=True)
    tenant: Mapped[str] = mapped_column(String(128), index=True)
    user: Mapped[str] = mapped_column(String(128))
    turn_id: Mapped[str] = mapped_column(String(256))
    turn_digest: Mapped[str] = mapped_column(String(64))
    claim_digest: Mapped[str] = mapped_column(String(64))
    query_digest: Mapped[str] = mapped_column(String(64))
    corpus_digest: Mapped[str] = mapped_column(String(64))
    prompt_versions: Mapped[dict[str, Any]]
    params: Mapped[dict[str, Any]]
    model: Mapped[str] = mapped_column(String(256))
    result: Mapped[dict[str, Any]]
    calls_planned: Mapped[int] = mapped_column(Integer)
    calls_made: Mapped[int] = mapped_column(Integer)
    calls_billed: Mapped[int] = mapped_column(Integer)
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime]


class ModelCallRow(Base):
    """One model call of a job (``crud_calls``): its mask, prompt as sent (capped), reply, parsed value,
    timing, tokens, cost and outcome; ``trace_calls`` is how many calls the job made in all."""

    __tablename__ = "model_calls"
    __table_args__ = (
        UniqueConstraint("tenant", "trace_id", "call_index", name="uq_model_calls_trace_index"),
        Index("ix_model_calls_tenant_turn", "tenant", "turn_id"),
    )

    id: Mapped[int] = mapped_column(SeqInt, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(128))
    trace_id: Mapped[str] = mapped_column(String(40))
    turn_id: Mapped[str] = mapped_column(String(256))
    call_index: Mapped[int] = mapped_column(Integer)
    trace_calls: Mapped[int] = mapped_column(Integer)
    stage: Mapped[str] = mapped_column(String(16))
    mask: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(8))
    outcome: Mapped[str] = mapped_column(String(16))
    prompt: Mapped[list[Any]]
    prompt_truncated: Mapped[bool] = mapped_column(Boolean)
    reply: Mapped[str | None] = mapped_column(Text)
    parsed: Mapped[float | None] = mapped_column(Float)
    started_at: Mapped[datetime]
    seconds: Mapped[float] = mapped_column(Float)
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    estimated: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class AppendOnlyViolation(RuntimeError):
    """An attempt to change or remove an audit record."""


@event.listens_for(TraceResultRow, "before_update")
def _no_update(mapper: Mapper[Any], connection: Any, target: TraceResultRow) -> None:
    raise AppendOnlyViolation("trace results are append-only: a stored result is never changed")


@event.listens_for(TraceResultRow, "before_delete")
def _no_delete(mapper: Mapper[Any], connection: Any, target: TraceResultRow) -> None:
    raise AppendOnlyViolation("trace results are append-only: a stored result is never removed")


ERASE_TURN_RESULTS = "provenance_erase_turn_results"
"""The execution option of the one statement allowed to remove trace results: ``crud_turns.delete_turns``
(deleting a turn takes its audit records with it). Any other bulk UPDATE or DELETE of ``trace_results``
through the ORM is refused like a row-level one."""


@event.listens_for(Session, "do_orm_execute")
def _no_bulk_change(state: ORMExecuteState) -> None:
    if not (state.is_update or state.is_delete):
        return
    if TraceResultRow.__mapper__ not in state.all_mappers:
        return
    if state.is_delete and state.execution_options.get(ERASE_TURN_RESULTS):
        return
    raise AppendOnlyViolation("trace results are append-only: only deleting their turn removes them")


class CustodyRecordRow(Base):
    """One record of a tenant's custody log (``custody_log``): what was stored or deleted (``kind``, ``subject``),
    the digest of what it attests (``attested``, a canonical JSON document), and the hash that chains it to the
    tenant's previous record. Append-only, like the results it attests."""

    __tablename__ = "custody_log"
    __table_args__ = (
        UniqueConstraint("tenant", "seq", name="uq_custody_log_tenant_seq"),
        Index("ix_custody_log_tenant_subject", "tenant", "subject"),
    )

    id: Mapped[int] = mapped_column(SeqInt, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(128))
    seq: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(32))
    subject: Mapped[str] = mapped_column(String(256))
    attested: Mapped[dict[str, Any]]
    content_digest: Mapped[str] = mapped_column(String(64))
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]


@event.listens_for(CustodyRecordRow, "before_update")
def _no_custody_update(mapper: Mapper[Any], connection: Any, target: CustodyRecordRow) -> None:
    raise AppendOnlyViolation("the custody log is append-only: a record is never changed")


@event.listens_for(CustodyRecordRow, "before_delete")
def _no_custody_delete(mapper: Mapper[Any], connection: Any, target: CustodyRecordRow) -> None:
    raise AppendOnlyViolation("the custody log is append-only: a record is never removed")


@event.listens_for(Session, "do_orm_execute")
def _no_bulk_custody_change(state: ORMExecuteState) -> None:
    if (state.is_update or state.is_delete) and CustodyRecordRow.__mapper__ in state.all_mappers:
        raise AppendOnlyViolation("the custody log is append-only: no record is changed or removed")


class EvidenceRow(Base):
    """One ``tools/call`` result the MCP gateway relayed (``kind='result'``), or a gap: results it relayed but could
    not record (``kind='gap'``, ``missed`` and ``cause``). Append-only (``storage/evidence_records.py``)."""

    __tablename__ = "evidence_records"
    __table_args__ = (Index("ix_evidence_records_tenant_digest", "tenant", "digest"),)

    id: Mapped[int] = mapped_column(SeqInt, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(16))
    principal: Mapped[str] = mapped_column(String(256))
    server: Mapped[str] = mapped_column(String(256))
    transport: Mapped[str] = mapped_column(String(16))
    tool: Mapped[str] = mapped_column(String(256))
    request_id: Mapped[str] = mapped_column(String(256))
    arguments_digest: Mapped[str] = mapped_column(String(64))
    digest: Mapped[str] = mapped_column(String(64))
    is_error: Mapped[bool] = mapped_column(Boolean, default=False)
    observed_at: Mapped[datetime]
    missed: Mapped[int] = mapped_column(Integer, default=0)
    cause: Mapped[str] = mapped_column(Text, default="")


@event.listens_for(EvidenceRow, "before_update")
def _no_evidence_update(mapper: Mapper[Any], connection: Any, target: EvidenceRow) -> None:
    raise AppendOnlyViolation("evidence records are append-only: a record is never changed")


@event.listens_for(EvidenceRow, "before_delete")
def _no_evidence_delete(mapper: Mapper[Any], connection: Any, target: EvidenceRow) -> None:
    raise AppendOnlyViolation("evidence records are append-only: a record is never removed")


@event.listens_for(Session, "do_orm_execute")
def _no_bulk_evidence_change(state: ORMExecuteState) -> None:
    if (state.is_update or state.is_delete) and EvidenceRow.__mapper__ in state.all_mappers:
        raise AppendOnlyViolation("evidence records are append-only: no record is changed or removed")


class ImportCursorRow(Base):
    """How far one tenant has imported one history source (``provenance import URL``, configured sources):
    the source's high-water mark (a row id or checkpoint id) when its last import finished."""

    __tablename__ = "import_cursors"

    tenant: Mapped[str] = mapped_column(String(128), primary_key=True)
    source: Mapped[str] = mapped_column(String(512), primary_key=True)
    position: Mapped[str] = mapped_column(String(128))
    conversations: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime]


class BudgetEntry(Base):
    """A live reservation of the per-user call budget and the per-user and per-tenant money budgets
    (``db_limits.DatabaseLimiter``): the calls and USD it holds (reserved, then used and billed)."""

    __tablename__ = "budget_entries"
    __table_args__ = (
        Index("ix_budget_entries_user_at", "user_key", "at"),
        Index("ix_budget_entries_tenant_at", "tenant_key", "at"),
    )

    id: Mapped[int] = mapped_column(SeqInt, primary_key=True, autoincrement=True)
    user_key: Mapped[str] = mapped_column(String(260))
    at: Mapped[float] = mapped_column(Float)
    calls: Mapped[int] = mapped_column(Integer)
    tenant_key: Mapped[str | None] = mapped_column(String(260), nullable=True)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")


class ServiceInstance(Base):
    """The database's identity: one row (``name`` = ``service``) holding a random id written at the service's
    first start. The service keeps it in memory and compares it on every readiness probe, so a database replaced
    under it (restored, copied over, recreated empty) is noticed instead of written to."""

    __tablename__ = "service_instance"

    name: Mapped[str] = mapped_column(String(16), primary_key=True)
    instance_id: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
