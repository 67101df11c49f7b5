"""``POST /v1/imports`` (chat history as streamed JSONL → stored turns) and ``GET /v1/reports/gating``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from .. import bulk
from ..deps import Caller, Svc
from ..schemas import problem_responses

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
    summary="Import chat history (JSONL, one conversation per line)",
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
        str,
        Query(
            min_length=1,
            max_length=120,
            pattern=r"^[A-Za-z0-9._-]+$",
            description="prefix of the conversation ids (with each line's id field or line number)",
        ),
    ] = "upload",
) -> dict[str, Any]:
    """Each line is one conversation in any supported format. Re-sending the same upload is
    idempotent (`unchanged`); a line that cannot be read is `rejected` with its line number and the
    rest is imported. Returns `{imported, unchanged, conflicting, rejected, errors: [{where, reason}]}`."""
    fmt = bulk.check_format(format)
    counts = bulk.ImportCounts()
    async for number, raw in _lines(request):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            counts.conversations += 1
            counts.reject(f"line {number}", f"not UTF-8: {exc}")
            continue
        for item in bulk.parse_jsonl(iter([line]), "", name):
            counts.conversations += 1
            fixed = bulk.Item(f"line {number}", name, number, obj=item.obj, problem=item.problem)
            await bulk.import_one(svc.db, caller.tenant, caller.user, fixed, fmt, counts)
    return counts.to_dict()


@router.get("/v1/reports/gating", summary="The free tier over every stored turn of the caller's tenant")
async def gating_report(svc: Svc, caller: Caller) -> dict[str, Any]:
    """Per turn its summary line and counts; totals of traceable / quoted / agent_voice / action /
    unanchored over all turns; and the 20 sources quoted most often (by source label)."""
    report = await bulk.gating_report(svc.db, caller.tenant)
    return report.to_dict()
