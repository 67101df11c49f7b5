"""``/v1/admin/audit/verify``: walk a tenant's custody log (admin key only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from provenance_api.core.schemas import problem_responses
from provenance_api.core.schemas_audit import AuditReport
from provenance_api.http.deps import Caller, Svc
from provenance_api.operations.audit import verify_custody

router = APIRouter(prefix="/v1/admin/audit", tags=["admin"], responses=problem_responses(401, 403, 422))

Tenant = Annotated[
    str | None, Query(min_length=1, max_length=128, description="the tenant whose log to walk (default: the key's)")
]


@router.get("/verify", response_model=AuditReport, summary="Verify a tenant's custody log")
async def verify_audit(svc: Svc, caller: Caller, tenant: Tenant = None) -> AuditReport:
    """Walk the tenant's hash-chained custody log and compare every record with the turns and results stored
    now: `intact`, the first broken record (`broken`: its `seq`, `kind`, `subject`, `problem` and what differs),
    how many rows predate the log (`not_chained`), and the head (`head.hash`: export it, and a rewritten chain
    no longer ends in it). 200 whether or not the log is intact; 403 for any key but the admin key."""
    return await verify_custody(svc, caller, tenant)
