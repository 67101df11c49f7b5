"""Binding a stored turn's tool returns to the MCP gateway's evidence records (``provenance gateway``).

A tool return whose text has the digest of a result the tenant's gateway recorded is ``gateway`` custody — custody
verified by the gateway, with the record's time and server; any other is ``history`` — as reported by the agent's
history. The lookup is ``storage.evidence_records.custody_for``; the binding itself is ``core.evidence``.
"""

from __future__ import annotations

from collections.abc import Sequence

from estimator.corpus.units import Corpus
from provenance_api.core.evidence import bind_custody, return_digests
from provenance_api.core.schemas_actions import ActionSourceOut
from provenance_api.storage.evidence_records import custody_for
from provenance_api.storage.session import Database

__all__ = ["bound_sources"]


async def bound_sources(
    db: Database, tenant: str, sources: Sequence[ActionSourceOut], corpus: Corpus
) -> list[ActionSourceOut]:
    """``sources`` (of ``corpus``) with each tool return's custody, from the tenant's evidence records."""
    records = await custody_for(db, tenant, return_digests(corpus).values())
    return bind_custody(sources, corpus, records)
