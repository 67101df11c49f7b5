"""Incident export: one action or sentence of a stored turn → its chain → the sources it could read, with their
envelopes, ages, custody and digests, its latest finished trace, and the custody log's record of the turn with
whether the tenant's chain verifies now (``GET /v1/turns/{turn_id}/incident``, ``provenance incident``).

Built from the store only — the stored turn, the MCP gateway's evidence records, the trace jobs and the custody
log — with no model call, so the same store gives the same document. The chain in words and the Markdown are
``incident_markdown``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import anyio.to_thread

from estimator.actions.trace import find_action
from estimator.free_tier.gating import GateReport
from provenance_api.core.errors import InvalidInput
from provenance_api.core.evidence import canonical_json
from provenance_api.core.schemas_actions import ActionOut, ActionSourceOut, ActionsOut
from provenance_api.core.schemas_incident import (
    IncidentCauseOut,
    IncidentChainOut,
    IncidentCustodyLogOut,
    IncidentLinkOut,
    IncidentOut,
    IncidentRecordOut,
    IncidentSourceOut,
    IncidentTargetOut,
    IncidentTraceOut,
    IncidentTraceSourceOut,
    IncidentTurnOut,
)
from provenance_api.core.settings import Settings
from provenance_api.operations.auth import Principal
from provenance_api.operations.citation_markdown import by_effect, score_unit
from provenance_api.operations.custody import bound_sources
from provenance_api.operations.incident_markdown import chain_text, incident_markdown
from provenance_api.operations.services import Services
from provenance_api.operations.tracing import trace_out
from provenance_api.providers import free_tier
from provenance_api.storage import crud_traces, crud_turns, custody_verify, incident_reads
from provenance_api.storage.crud_turns import TurnRecord
from provenance_api.storage.session import Database

__all__ = ["IncidentFile", "IncidentFormat", "build_incident", "export_incident", "stored_turn_hint", "turn_incident"]

IncidentFormat = Literal["json", "markdown"]
_ACTION_ID = re.compile(r"a\d+")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")  # a file name's characters (a turn id may hold / and :)


@dataclass(frozen=True)
class IncidentFile:
    """An incident as a file to download."""

    filename: str
    media_type: str
    body: str


def _ids(ids: Sequence[str]) -> str:
    return f"{ids[0]}…{ids[-1]}" if len(ids) > 1 else ids[0]


def _unknown_target(turn_id: str, target: str, actions: Sequence[str], sentences: Sequence[str]) -> InvalidInput:
    names = [f"an action {_ids(actions)}" if actions else "", f"a sentence {_ids(sentences)}" if sentences else ""]
    has = " or ".join(n for n in names if n) or "no action and no sentence"
    return InvalidInput(
        f"turn {turn_id!r} has no action or sentence {target!r}: name {has}",
        field="target",
        fix=f"target={_ids(actions) if actions else _ids(sentences or ['r0'])} (list them with "
        "GET /v1/turns/{id}/actions and /segments, or provenance gate)",
    )


def _lines(span: tuple[int, int]) -> str:
    return f"line {span[0]}" if span[0] == span[1] else f"lines {span[0]}–{span[1]}"


def _conversation(turn_id: str) -> str | None:
    head, sep, _ = turn_id.rpartition(":")
    return head if sep and head else None


def _source(source: ActionSourceOut, age_seconds: float | None, age: str) -> IncidentSourceOut:
    envelope = source.envelope
    custody = source.custody or (envelope.custody if envelope is not None else "history")
    return IncidentSourceOut(
        id=source.id,
        layer=source.layer,
        label=source.label,
        tool=source.tool,
        call_id=source.call_id,
        envelope=envelope,
        age_seconds=age_seconds,
        age=age,
        custody=custody,
        custody_observed_at=source.custody_observed_at,
        custody_server=source.custody_server,
        digest=envelope.digest if envelope is not None else "",
    )


def _trace(job: crud_traces.JobRecord | None) -> IncidentTraceOut | None:
    if job is None:
        return None
    trace = trace_out(job)
    result = trace.result
    sources = [] if result is None else by_effect(result.sources, result.s_none)
    return IncidentTraceOut(
        trace_id=trace.trace_id,
        status=trace.status,
        estimator=None if result is None else result.estimator,
        verdict=None if result is None else result.verdict,
        unit=None if result is None else score_unit(result)[0],
        finished_at=trace.finished_at,
        reason=trace.reason,
        sources=[
            IncidentTraceSourceOut(source_id=s.source_id, layer=s.layer, label=s.label, role=s.role, delta=s.delta)
            for s in sources
        ],
        injection=None if result is None else result.injection,
    )


def _causes(
    trace: IncidentTraceOut | None, action: ActionOut | None, report: GateReport, sentence_id: str | None
) -> list[IncidentCauseOut]:
    """Measured causes when a trace of the target succeeded; else what the free tier names."""
    causes: list[IncidentCauseOut] = []
    if trace is not None and trace.status == "succeeded":
        for s in trace.sources:
            if s.role == "grounds":
                drop = "not measured" if s.delta is None else f"{s.delta:.2f} {trace.unit or 'points'}"
                causes.append(IncidentCauseOut(source_id=s.source_id, basis="trace", because=f"grounds, Δ {drop}"))
    elif action is not None and action.injection.suspected and action.injection.source_id:
        causes.append(
            IncidentCauseOut(source_id=action.injection.source_id, basis="screen", because=action.injection.because)
        )
    elif action is not None:
        for a in action.argument_sources:
            if a.decisive and a.source_id is not None:
                where = f", {_lines(a.lines)}" if a.lines else ""
                because = f"{a.path} = {a.value!r} first appears there{where}"
                causes.append(IncidentCauseOut(source_id=a.source_id, basis="arguments", because=because))
    else:
        gated = next(g for g in report.segments if g.segment.id == sentence_id)
        for c in gated.citations if gated.status.value == "quoted" else ():
            lines = _lines((c.line_start, c.line_end))
            causes.append(IncidentCauseOut(source_id=c.source_id, basis="quote", because=f"quoted verbatim, {lines}"))
    first: dict[str, IncidentCauseOut] = {}
    for cause in causes:
        first.setdefault(cause.source_id, cause)  # each source once, on its strongest ground
    return list(first.values())


async def build_incident(db: Database, settings: Settings, tenant: str, turn_id: str, target: str) -> IncidentOut:
    """The incident of ``target`` (an action a0… or a sentence r0…) of the tenant's turn ``turn_id``.
    RecordMissing for a turn the tenant does not have; InvalidInput naming ``target`` for one the turn lacks."""
    record: TurnRecord = await crud_turns.get_turn(db, tenant, turn_id)
    params, policy = settings.base_params, settings.freshness_policy

    def screen() -> tuple[free_tier.GateView, ActionsOut]:
        view = free_tier.gate_view(record.turn, params)
        return view, free_tier.actions_out(turn_id, record.turn, view, policy)

    view, actions = await anyio.to_thread.run_sync(screen)
    bound = await bound_sources(db, tenant, actions.sources, view.corpus)
    segments = {g.segment.id: g for g in view.report.segments}
    wanted = target.strip()
    action = next((a for a in actions.actions if a.id == wanted), None) if _ACTION_ID.fullmatch(wanted) else None
    if action is None and wanted not in segments:
        raise _unknown_target(turn_id, target, [a.id for a in actions.actions], list(segments))

    trace_id = await incident_reads.latest_finished_trace(db, tenant, turn_id, wanted)
    job = None if trace_id is None else await crud_traces.get_job(db, tenant, trace_id, "trace")
    trace = _trace(job)
    texts = {g.segment.id: g.segment.text for g in view.report.segments}
    if action is not None:
        call = find_action(record.turn, action.id).text
        ages = {a.source_id: a for a in action.source_ages}
        sources = [_source(s, ages[s.id].age_seconds, ages[s.id].age) for s in bound if s.id in ages]
        target_out = IncidentTargetOut(
            kind="action",
            id=action.id,
            produced_at=action.produced_at,
            tool=action.tool,
            call_id=action.call_id,
            arguments=canonical_json({} if action.arguments is None else action.arguments),
            call=call,
            origin=action.origin,
        )
        reported_by = [IncidentLinkOut(kind="sentence", id=r, text=texts.get(r, "")) for r in action.reported_by]
        reports: list[IncidentLinkOut] = []
    else:
        gated = segments[wanted]
        sources = [_source(s, s.age_seconds, s.age) for s in bound]
        target_out = IncidentTargetOut(
            kind="sentence",
            id=wanted,
            produced_at=actions.answered_at,
            text=gated.segment.text,
            status=gated.status.value,
        )
        reported_by = []
        reports = [
            IncidentLinkOut(kind="action", id=a.id, text=find_action(record.turn, a.id).text)
            for a in actions.actions
            if wanted in a.reported_by
        ]
    causes = _causes(trace, action, view.report, None if action is not None else wanted)
    if action is None and not causes:  # a sentence that reports actions: their causes, through them
        reported = [a for a in actions.actions if wanted in a.reported_by]
        causes = [c.model_copy(update={"via": a.id}) for a in reported for c in _causes(None, a, view.report, None)]
    chain = IncidentChainOut(
        reported_by=reported_by,
        reports=reports,
        caused_by=causes,
        text=chain_text(target_out, reported_by, reports, causes, {s.id: s for s in sources}),
    )
    entry = await incident_reads.turn_record(db, tenant, turn_id)
    report = await custody_verify.verify(db, tenant)
    shown = (
        f"the latest finished trace of {wanted}: {trace.trace_id} ({trace.status})"
        if trace
        else f"no trace of {wanted} has finished: none was run, or none has ended yet"
    )
    return IncidentOut(
        turn=IncidentTurnOut(
            turn_id=turn_id,
            conversation=_conversation(turn_id),
            agent=record.turn.agent,
            model=record.turn.model,
            query=record.turn.query,
            answered_at=actions.answered_at,
            digest=record.digest,
            stored_at=record.stored_at,
        ),
        target=target_out,
        chain=chain,
        sources=sources,
        argument_sources=None if action is None else action.argument_sources,
        injection=None if action is None else action.injection,
        freshness=[] if action is None else action.freshness,
        freshness_rules=actions.freshness_rules,
        trace=trace,
        trace_note=shown,
        custody_log=IncidentCustodyLogOut(
            record=None
            if entry is None
            else IncidentRecordOut(
                seq=entry.seq,
                kind=entry.kind,
                hash=entry.hash,
                content_digest=entry.content_digest,
                created_at=entry.created_at,
            ),
            intact=report.intact,
            records=report.records,
            head=report.head,
            broken=report.broken,
            turn_broken=report.broken is not None and report.broken.subject == turn_id,
        ),
    )


async def turn_incident(services: Services, caller: Principal, turn_id: str, target: str) -> IncidentOut:
    """The caller's incident of ``target`` in ``turn_id`` (its own tenant only)."""
    return await build_incident(services.db, services.settings, caller.tenant, turn_id, target)


def incident_file(incident: IncidentOut, fmt: IncidentFormat) -> IncidentFile:
    """``incident`` as a file: its JSON, or the Markdown report."""
    name = _SAFE.sub("_", f"incident-{incident.turn.turn_id}-{incident.target.id}")
    if fmt == "markdown":
        return IncidentFile(f"{name}.md", "text/markdown; charset=utf-8", incident_markdown(incident))
    return IncidentFile(f"{name}.json", "application/json", incident.model_dump_json(indent=2))


async def export_incident(
    services: Services, caller: Principal, turn_id: str, target: str, fmt: IncidentFormat
) -> IncidentFile:
    return incident_file(await turn_incident(services, caller, turn_id, target), fmt)


async def stored_turn_hint(db: Database, tenant: str, shown: int = 5) -> str:
    """Which turns the tenant does have, for an id that named none: the newest few, or how to store one."""
    ids = await incident_reads.newest_turn_ids(db, tenant, shown + 1)
    if not ids:
        return "the store holds no turn of this tenant: provenance import FILE stores a history"
    more = " …" if len(ids) > shown else ""
    return "stored turns, newest first: " + ", ".join(ids[:shown]) + more + " (GET /v1/turns lists them all)"
