"""Put the MCP gateway's evidence records into a service's store, as ``provenance gateway`` writes them: for tests
that need a tool return bound to a record without running a gateway."""

from __future__ import annotations

import asyncio

from provenance_api.core.evidence import EvidenceRecord
from provenance_api.storage.evidence_records import append_evidence
from provenance_api.storage.session import Database


def put_evidence(database_url: str, *records: EvidenceRecord) -> None:
    """Append ``records`` to the store at ``database_url`` (append-only, as the gateway's recorder does)."""

    async def work() -> None:
        db = Database(database_url)
        try:
            await append_evidence(db, list(records))
        finally:
            await db.dispose()

    asyncio.run(work())
