"""Probes and metrics: ``/healthz`` (alive), ``/readyz`` (the database durably takes writes, schema at head),
``/metrics``."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from provenance_api.core.schemas import Health, Readiness, problem_responses
from provenance_api.http.api_errors import NotReady
from provenance_api.http.deps import Svc

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", response_model=Readiness, responses=problem_responses(503), summary="Readiness")
async def readyz(svc: Svc) -> Readiness:
    ok, detail = await svc.db.ready()
    if not ok:
        raise NotReady(
            detail,
            fix="check PROVENANCE_DATABASE_URL, the disk and files of the data directory and the service's log; "
            "a database replaced, damaged or missing its write-ahead log needs the service's own database back "
            "and a restart (no write is taken until then)",
        )
    return Readiness(status="ready", database=detail, running_traces=len(svc.hub.live))


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    summary="Prometheus metrics",
    responses={200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}}}},
)
async def metrics(svc: Svc) -> PlainTextResponse:
    return PlainTextResponse(generate_latest(svc.metrics.registry), media_type=CONTENT_TYPE_LATEST)
