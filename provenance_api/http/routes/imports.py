"""``POST /v1/imports`` (chat history as streamed JSONL → stored turns) and ``GET /v1/reports/gating``."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from fastapi import Path as PathParam

from provenance_api.core.schemas import problem_responses
from provenance_api.http.deps import Caller, FreeTierCaller, Svc
from provenance_api.operations import imports as bulk
from provenance_api.operations import records

router = APIRouter(tags=["imports"], responses=problem_responses(401, 422))


async def _lines(request: Request) -> AsyncIterator[tuple[int, bytes]]:
    """The body's lines, numbered from 1, read as the chunks arrive (the body-size limit applies)."""
    pending = b""
    number = 0
    async for chunk in request.stream():
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            number += 1
            yield number, line
    if pending:
        yield number + 1, pending


@router.post(
    "/v1/imports",
    summary="Import chat history (JSONL, one conversation per line, or one JSON document)",
    responses=problem_responses(413),
)
async def import_history(
    svc: Svc,
    caller: Caller,
    request: Request,
    format: Annotated[
        str | None, Query(max_length=40, description="the format of every line (default: detected per line)")
    ] = None,
    name: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=120,
            pattern=r"^[A-Za-z0-9._-]+$",
            description="prefix of the conversation ids (default `upload`); each id ends with the "
            "conversation's id field or, without one, a hash of its content",
        ),
    ] = None,
) -> dict[str, Any]:
    """Each line is one conversation in any supported format; a body whose first line is not JSON by
    itself is read as one JSON document (a conversation or a list of them, e.g. pretty-printed).
    Re-sending the same upload is idempotent (`unchanged`); a line that cannot be read is `rejected`
    with its line number and the rest is imported. Returns `{batch_id, imported, unchanged, conflicting,
    rejected, errors: [{where, reason}], warnings: [{where, reason}], notes: [{where, reason}]}` (warnings: read,
    but not in full or not as written, e.g. an image named instead of inlined — the turns are stored; notes:
    conversations that gave no turn); `DELETE /v1/imports/{batch_id}` removes the turns this import created."""
    fmt = bulk.check_format(format)
    prefix = name or "upload"
    counts = bulk.ImportCounts(max_turn_bytes=svc.settings.max_body_bytes, redactor=svc.settings.redactor)
    lines = _lines(request)
    async for number, raw in lines:
        if not raw.strip() or raw.strip() == bulk.BOM:
            continue
        item = bulk.parse_line(raw.rstrip(b"\r"), f"line {number}", prefix, number)
        if counts.conversations == 0 and item.problem and item.problem.startswith("invalid JSON"):
            rest = [(number, raw)] + [pair async for pair in lines]
            await _document_or_lines(svc, caller, rest, prefix, fmt, counts)
            break
        counts.conversations += 1
        await bulk.import_one(svc.db, caller.tenant, caller.user, item, fmt, counts)
    return counts.to_dict()


async def _document_or_lines(
    svc: Svc, caller: Caller, lines: list[tuple[int, bytes]], prefix: str, fmt: str | None, counts: bulk.ImportCounts
) -> None:
    """The body from its first line on, whose first line is not JSON: one JSON document if it parses as
    one; else its lines, unless none of them is JSON — then one error says what the body should be."""
    body = b"\n".join(raw for _, raw in lines)
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = ""
    document = list(bulk.document_items(text, "body", prefix)) if text.strip() else []
    if document and document[0].problem is None:
        items = [dataclasses.replace(item, single=False) for item in document]  # ids from content, not "upload"
    else:
        items = [
            bulk.parse_line(raw.rstrip(b"\r"), f"line {n}", prefix, n)
            for n, raw in lines
            if raw.strip() and raw.strip() != bulk.BOM
        ]
        if all(item.problem for item in items):
            counts.conversations += 1
            detail = document[0].problem if document else "not UTF-8 text"
            counts.reject(
                "body",
                f"the body is neither JSONL (one conversation per line) nor one JSON "
                f"document ({detail}); send one conversation per line, or one JSON value",
            )
            return
    for item in items:
        counts.conversations += 1
        await bulk.import_one(svc.db, caller.tenant, caller.user, item, fmt, counts)


@router.delete(
    "/v1/imports/{batch_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=problem_responses(404, 409),
    summary="Delete the turns one import created (the caller's tenant only)",
)
async def delete_import(
    svc: Svc,
    caller: Caller,
    batch_id: Annotated[
        str,
        PathParam(
            min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$", description="the batch_id an import returned"
        ),
    ],
) -> Response:
    """Removes every turn of the caller's tenant that the import created (turns it found `unchanged` were
    created earlier and stay), with their quotes, traces, probes and results. 404 when the tenant has no turn
    of that batch; 409 naming the trace while one of them is being traced (nothing is deleted then)."""
    await records.delete_import_batch(svc, caller, batch_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/v1/reports/gating",
    responses=problem_responses(429),
    summary="The free tier over every stored turn of the caller's tenant",
)
async def gating_report(svc: Svc, caller: FreeTierCaller) -> dict[str, Any]:
    """Per turn its summary line and counts; totals of traceable / quoted / agent_voice / action /
    unanchored over all turns; and the 20 sources quoted most often (by source label)."""
    report = await bulk.gating_report(svc.db, caller.tenant)
    return report.to_dict()
