"""What ``provenance audit verify`` and ``GET /v1/admin/audit/verify`` return: the walk of one tenant's custody
log (``storage/custody_log.py``) against the turns and results stored now.

The JSON contract (``--json`` and the endpoint give the same object)::

    {"tenant", "intact", "records", "head": null | {"seq", "hash"},
     "broken": null | {"seq", "kind", "subject", "problem", "detail", "differs": [...]},
     "problems", "checked": {"turns", "results"}, "not_chained": {"turns", "results"}}

``broken`` is the first broken record (lowest ``seq``; a row stored without any record, ``seq`` null, comes
after every record); ``problems`` counts every break found. ``not_chained`` counts the rows stored before the
tenant's log began: they are not covered, and not a break.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AuditBreak", "AuditCounts", "AuditHead", "AuditReport", "BreakProblem"]

BreakProblem = Literal[
    "record_altered",
    "chain_broken",
    "record_missing",
    "content_differs",
    "row_missing",
    "row_unrecorded",
    "row_after_deletion",
]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class AuditHead(_Out):
    """The newest record of the log: export its hash somewhere the database's operator cannot write, and a
    rewritten chain no longer ends in it."""

    seq: int = Field(ge=1, description="the newest record's place in the tenant's log, from 1")
    hash: str = Field(description="its chain hash (sha-256, hex): it depends on every record before it")


class AuditBreak(_Out):
    """The first place the log and the stored rows disagree."""

    seq: int | None = Field(description="the record's place in the log; null for a row no record covers")
    kind: str = Field(description="turn_stored, result_stored, turn_deleted, log_started, …")
    subject: str = Field(description="the turn id or trace id the record is about")
    problem: BreakProblem = Field(
        description="record_altered: the record's own fields no longer give its digest or hash; chain_broken: it "
        "does not name the hash of the record before it; record_missing: records before it were removed; "
        "content_differs: the stored turn or result is not what the record attested; row_missing: the row is "
        "gone without a turn_deleted record; row_unrecorded: a row stored after the log began has no record; "
        "row_after_deletion: a row a turn_deleted record removed is stored again without a new record"
    )
    detail: str = Field(description="what differs, in words")
    differs: list[str] = Field(default_factory=list, description="the fields or sources (s3 …) that differ")


class AuditCounts(_Out):
    turns: int = Field(ge=0)
    results: int = Field(ge=0)


class AuditReport(_Out):
    """One tenant's custody log, walked and compared with what is stored now."""

    tenant: str
    intact: bool = Field(description="true when every record chains and every covered row is as attested")
    records: int = Field(ge=0, description="records in the tenant's log")
    head: AuditHead | None = Field(description="the newest record (null: the log is empty)")
    broken: AuditBreak | None = Field(description="the first broken record; null when intact")
    problems: int = Field(ge=0, description="breaks found in all (the first is `broken`)")
    checked: AuditCounts = Field(description="stored turns and results compared with their records")
    not_chained: AuditCounts = Field(
        description="rows stored before the tenant's log began: not covered by it, and not a break"
    )
