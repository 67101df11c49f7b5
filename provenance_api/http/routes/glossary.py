"""``GET /v1/glossary``: what every number and word of a trace means, for the viewer and any client.

The same text the command line prints (``provenance explain``). It holds no tenant data, so it needs no
key and may be cached.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from provenance_api.core.glossary import GlossaryOut, glossary_out

router = APIRouter(prefix="/v1", tags=["glossary"])
CACHE_CONTROL = "public, max-age=3600"


@router.get("/glossary", response_model=GlossaryOut, summary="What each number and word of a trace means")
async def glossary(response: Response) -> GlossaryOut:
    """Every term (Γ, s(1), s(0), Δ, the roles, verdicts and span-check labels, the judge's confidence, the
    call counts, the warnings and the estimators): ``short`` is one line, ``detail`` a paragraph."""
    response.headers["Cache-Control"] = CACHE_CONTROL
    return glossary_out()
