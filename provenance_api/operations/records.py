"""Reading and storing records for the HTTP surface: turns, their pages, jobs and a turn's traces.

Routes call these, never storage; each is scoped to the caller's tenant. Storage's own outcomes
(``RecordMissing``…) pass through and are mapped to problems in one place (``http.problems``).
"""

from __future__ import annotations

import anyio

from estimator.corpus.turn import StoredTurn
from provenance_api.operations import listing
from provenance_api.operations.auth import Principal
from provenance_api.operations.redaction import redact_turn
from provenance_api.operations.services import Services
from provenance_api.storage import crud_traces, crud_turns
from provenance_api.storage.crud_traces import JobKind, JobRecord
from provenance_api.storage.crud_turns import Deleted, TurnRecord, TurnSummary
from provenance_api.storage.judgement_cache import judgement_store, turn_scope

__all__ = [
    "Deleted",
    "JobKind",
    "JobRecord",
    "TurnRecord",
    "TurnSummary",
    "delete_import_batch",
    "delete_turn",
    "get_job",
    "get_turn",
    "store_turn",
    "traces_of_turn",
]


async def store_turn(services: Services, caller: Principal, turn: StoredTurn) -> tuple[TurnRecord, bool]:
    """Store ``turn`` for the caller's tenant, with the free tier's count of its traceable sentences: (record,
    created); the same content again is not created."""
    turn = redact_turn(turn, services.settings.redactor)  # before it is stored and hashed
    traceable = await anyio.to_thread.run_sync(listing.traceable_count, turn, services.settings.base_params)
    return await crud_turns.put_turn(services.db, caller.tenant, caller.user, turn, traceable=traceable)


async def get_turn(services: Services, caller: Principal, turn_id: str) -> TurnRecord:
    return await crud_turns.get_turn(services.db, caller.tenant, turn_id)


async def get_job(services: Services, caller: Principal, job_id: str, kind: JobKind) -> JobRecord:
    """The caller's trace or probe, with its result when it succeeded."""
    return await crud_traces.get_job(services.db, caller.tenant, job_id, kind)


async def traces_of_turn(services: Services, caller: Principal, turn_id: str, limit: int) -> list[JobRecord]:
    """The turn's traces (the caller's tenant only), newest first; RecordMissing for a turn it lacks."""
    await crud_turns.get_turn(services.db, caller.tenant, turn_id)
    ids = await crud_traces.trace_ids_of_turn(services.db, caller.tenant, turn_id, limit)
    return [await crud_traces.get_job(services.db, caller.tenant, job_id) for job_id in ids]


async def delete_turn(services: Services, caller: Principal, turn_id: str) -> Deleted:
    """Delete the caller's turn with its quotes, traces, probes and their results, and its search-index row.
    RecordMissing for a turn of no (or another) tenant; RecordConflict while a trace or probe of it runs."""
    deleted = await crud_turns.delete_turns(services.db, caller.tenant, turn_id=turn_id)
    await _forget_judgements(services, caller.tenant, deleted.turn_ids)
    return deleted


async def delete_import_batch(services: Services, caller: Principal, batch_id: str) -> Deleted:
    """Delete every turn of the caller's tenant that import ``batch_id`` created, as ``delete_turn`` does."""
    deleted = await crud_turns.delete_turns(services.db, caller.tenant, batch=batch_id)
    await _forget_judgements(services, caller.tenant, deleted.turn_ids)
    return deleted


async def _forget_judgements(services: Services, tenant: str, turn_ids: list[str]) -> None:
    """Purge the deleted turns' cached judgements (kept per tenant and turn). Entries the operator chose to
    share across tenants belong to no one turn; they expire with the cache's TTL."""
    store = judgement_store(services.settings, services.redis)
    if store is None:
        return
    for turn_id in turn_ids:
        await store.purge(turn_scope(tenant, turn_id))
