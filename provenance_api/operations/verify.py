"""``POST /v1/turns/{id}/verify``: the answer-level gate over every sentence of a stored turn.

Every traceable sentence is quoted first; the sum of the quotes must fit ``max_cost_usd`` (else
422 naming it, and nothing is spent) and every quote's calls are reserved from the caller's budget
before any trace starts (else 429, and nothing is spent). Each sentence then runs as an ordinary
trace job — stored, auditable at ``/v1/traces/{id}``, with its declared-attribution audit — and the
request waits for all of them (up to ``timeout``). Sentences quoted verbatim by the free tier pass
for free with their quoted sources. ``estimator.audit.answer_gate.decide`` gives the decision.

Fail closed: a trace that fails, is interrupted or is still running at the deadline is an
``error`` outcome, which blocks; a refused budget is never ``allow``.
"""

from __future__ import annotations

import time

import anyio.to_thread

from estimator.audit.answer_gate import GateSentence, SentenceOutcome, decide, outcome_from_trace, quoted_outcome
from estimator.audit.declared import audit_declared, audit_trace
from estimator.results.models import DeclaredAuditModel, trace_job_result
from provenance_api.core.errors import CostRefused, ProvenanceError
from provenance_api.core.schemas import TraceCalls, VerifyIn, VerifyOut, VerifySentenceOut
from provenance_api.operations.auth import Principal
from provenance_api.operations.request_params import request_params
from provenance_api.operations.services import Services
from provenance_api.operations.tracing import judge_model, launch, make_quote, reserve
from provenance_api.providers import free_tier
from provenance_api.storage import crud_traces, crud_turns
from provenance_api.storage.crud_traces import JobRecord
from provenance_api.storage.limits import Reservation
from provenance_api.storage.quotes import StoredQuote

REFUSED = {"decision": "block", "rule": "budget_refused"}


def _refuse(exc: ProvenanceError) -> ProvenanceError:
    """A refused budget is never allow: the problem says so, beside its field and fix."""
    exc.extra.update(REFUSED)
    return exc


async def _quote_all(
    services: Services, caller: Principal, turn_id: str, body: VerifyIn, model: str, segment_ids: list[str]
) -> list[StoredQuote]:
    quotes = [
        await make_quote(services, caller, turn_id, sid, model=body.model, probe=False, overrides=body.params)
        for sid in segment_ids
    ]
    for quote in quotes:
        if quote.refused is not None:
            raise _refuse(
                CostRefused(
                    f"{quote.segment_id}: {quote.refused}",
                    field="params",
                    fix="narrow the turn's corpus or lower the request's params",
                )
            )
    total = sum(q.cost_usd or 0.0 for q in quotes)
    try:
        for quote in quotes:
            if quote.cost_usd is None:
                raise CostRefused(
                    f"no price is known for model {quote.model!r}, so max_cost_usd cannot be guaranteed",
                    field="max_cost_usd",
                    fix="choose a judge model with a known price",
                )
        if total > body.max_cost_usd:
            raise CostRefused(
                f"the quoted cost of tracing {len(quotes)} sentence(s) is ${total:.4f}, over max_cost_usd "
                f"${body.max_cost_usd:.4f}",
                field="max_cost_usd",
                fix="raise max_cost_usd, lower params.max_sources, or choose a cheaper model",
                extra={"quoted_cost_usd": round(total, 6)},
            )
    except CostRefused as exc:
        raise _refuse(exc) from None
    return quotes


async def _reserve_all(services: Services, caller: Principal, quotes: list[StoredQuote]) -> list[Reservation]:
    """All the quotes' calls, or none of them."""
    held: list[Reservation] = []
    try:
        for quote in quotes:
            held.append(await reserve(services, caller, quote.planned_calls, quote.cost_usd or 0.0))
    except ProvenanceError as exc:
        for reservation in held:
            await services.limiter.settle(reservation, 0)
        raise _refuse(exc) from None
    return held


async def _await_all(services: Services, caller: Principal, jobs: list[JobRecord], timeout: float) -> list[JobRecord]:
    deadline = time.monotonic() + timeout
    current = list(jobs)
    while (pending := [j for j in current if not j.terminal]) and (left := deadline - time.monotonic()) > 0:
        await services.hub.wait(pending[0].id, min(left, services.settings.sse_poll_seconds))
        current = [j if j.terminal else await crud_traces.get_job(services.db, caller.tenant, j.id) for j in current]
    return current


async def verify_turn(services: Services, caller: Principal, turn_id: str, body: VerifyIn, timeout: float) -> VerifyOut:
    record = await crud_turns.get_turn(services.db, caller.tenant, turn_id)
    params = request_params(services.settings.base_params, body.params)
    choice = judge_model(record.turn, body.model, services, caller.tenant)
    model = choice.model
    view = await anyio.to_thread.run_sync(free_tier.gate_view, record.turn, params)
    corpus = view.corpus
    sentences = [GateSentence(g.segment.id, g.segment.text, g.status.value) for g in view.report.segments]
    outcomes: dict[str, SentenceOutcome] = {}
    declared: dict[str, DeclaredAuditModel] = {}
    for g in view.report.segments:
        if g.status.value == "quoted":
            ids = list(dict.fromkeys(c.source_id for c in g.citations))
            audit = audit_declared(g.segment.text, corpus, ids)
            outcomes[g.segment.id] = quoted_outcome(g.segment.id, ids, audit)
            declared[g.segment.id] = audit

    traceable = [s.segment_id for s in sentences if s.status == "traceable"]
    quotes = await _quote_all(services, caller, turn_id, body, model, traceable)
    reservations = await _reserve_all(services, caller, quotes)
    jobs: list[JobRecord] = []
    for index, (quote, reservation) in enumerate(zip(quotes, reservations, strict=True)):
        try:
            jobs.append(await launch(services, quote, reservation, max_cost_usd=body.max_cost_usd))
        except BaseException:
            for unused in reservations[index + 1 :]:
                await services.limiter.settle(unused, 0)
            raise
    jobs = await _await_all(services, caller, jobs, timeout)

    by_segment: dict[str, JobRecord] = {}
    text = {s.segment_id: s.text for s in sentences}
    for job in jobs:
        sid = job.segment_id or ""
        by_segment[sid] = job
        if job.status == "succeeded" and job.result is not None:
            traced = trace_job_result(job.result)
            audit = audit_trace(text[sid], corpus, traced)
            outcomes[sid] = outcome_from_trace(sid, traced, audit)
            declared[sid] = audit
        elif job.terminal:
            outcomes[sid] = SentenceOutcome(sid, "error", reason=f"trace {job.id} {job.status}: {job.reason}")
        else:
            outcomes[sid] = SentenceOutcome(
                sid,
                "error",
                reason=f"trace {job.id} was still {job.status} after {timeout:g} s "
                f"(it continues: GET /v1/traces/{job.id})",
            )

    answer = decide(sentences, outcomes)
    status = {s.segment_id: s.status for s in sentences}
    rows = []
    for reason in answer.reasons:
        job_or_none = by_segment.get(reason.segment_id)
        outcome = outcomes.get(reason.segment_id)
        rows.append(
            VerifySentenceOut(
                segment_id=reason.segment_id,
                text=reason.text,
                status=status[reason.segment_id],
                decision=reason.decision,
                rule=reason.rule,
                reason=reason.reason,
                outcome=outcome.kind if outcome else None,
                trace_id=job_or_none.id if job_or_none else None,
                verdict=outcome.verdict if outcome else None,
                declared=declared.get(reason.segment_id),
            )
        )
    fired = next(
        (r.reason for r in answer.reasons if r.rule == answer.rule),
        "every claim that needs evidence has a verified grounding source"
        if answer.rule == "all_grounded"
        else "no sentence of the answer needs evidence",
    )
    if answer.rule == "no_sentences":
        fired = "the answer has no sentences to verify"
    return VerifyOut(
        turn_id=turn_id,
        decision=answer.decision,
        rule=answer.rule,
        reason=fired,
        model=model,
        model_reason=choice.reason,
        quoted_cost_usd=round(sum(q.cost_usd or 0.0 for q in quotes), 6),
        max_cost_usd=body.max_cost_usd,
        calls=TraceCalls(
            planned=sum(j.calls_planned for j in jobs),
            made=sum(j.calls_made for j in jobs),
            cached=sum(j.calls_cached for j in jobs),
            billed=sum(j.calls_billed for j in jobs),
            failed=sum(j.calls_failed for j in jobs),
        ),
        sentences=rows,
    )
