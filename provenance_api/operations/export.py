"""Export one trace as a file: its JSON (exactly ``GET /v1/traces/{id}``) or a Markdown citation block."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from provenance_api.operations import records
from provenance_api.operations.auth import Principal
from provenance_api.operations.citation_markdown import citation_markdown
from provenance_api.operations.services import Services
from provenance_api.operations.tracing import trace_out

ExportFormat = Literal["json", "markdown"]


@dataclass(frozen=True)
class Exported:
    """A trace as a file to download."""

    filename: str
    media_type: str
    body: str


async def export_trace(services: Services, caller: Principal, trace_id: str, fmt: ExportFormat) -> Exported:
    """The caller's trace ``trace_id`` as ``fmt``; RecordMissing (404) for a trace of no or another tenant."""
    trace = trace_out(await records.get_job(services, caller, trace_id, "trace"))
    if fmt == "markdown":
        return Exported(f"{trace.trace_id}.md", "text/markdown; charset=utf-8", citation_markdown(trace))
    return Exported(f"{trace.trace_id}.json", "application/json", trace.model_dump_json(indent=2))
