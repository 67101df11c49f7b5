"""Verifying a tenant's custody log (``provenance audit verify``, ``GET /v1/admin/audit/verify``).

The walk is storage's (``storage/custody_verify.py``); this decides who may ask for it. Over HTTP only the admin
key may (it names any tenant, its own by default); any other key gets a 403 problem. The command line reads the
local store directly, as ``provenance keys`` and ``provenance import`` do.
"""

from __future__ import annotations

from provenance_api.core.errors import ProvenanceError
from provenance_api.core.schemas_audit import AuditReport
from provenance_api.operations.auth import Principal
from provenance_api.operations.services import Services
from provenance_api.storage import custody_verify
from provenance_api.storage.session import Database

__all__ = ["AdminOnly", "AuditReport", "verify_custody", "verify_store"]


class AdminOnly(ProvenanceError):
    """A request only the admin key may make."""

    status = 403
    type_slug = "admin-only"
    title = "Forbidden"


async def verify_store(db: Database, tenant: str) -> AuditReport:
    """The walk of ``tenant``'s custody log over ``db`` (the command line's local store)."""
    return await custody_verify.verify(db, tenant)


async def verify_custody(services: Services, caller: Principal, tenant: str | None) -> AuditReport:
    """The walk of ``tenant``'s custody log (the caller's own tenant when None), for the admin key only."""
    if not caller.admin:
        raise AdminOnly(
            "verifying the custody log takes the admin key",
            fix="ask the operator, or run provenance audit verify on the service's host",
        )
    return await verify_store(services.db, tenant or caller.tenant)
