"""GET /v1/status, /healthz, /readyz and /metrics."""

from __future__ import annotations

import contextlib

from fastapi import APIRouter, Response

from api import render
from api.deps import AdminDep, ServicesDep
from api.routes.responses import GUARD_ERRORS
from api.schemas import HealthResponse, ReadyResponse, StatusResponse
from api.status import collect_status, readiness

router = APIRouter(tags=["operations"])


@router.get(
    "/v1/status",
    response_model=StatusResponse,
    responses=GUARD_ERRORS,
    summary="Served generation, speed layer, log (admin scope)",
)
async def status(services: ServicesDep, _: AdminDep) -> render.JsonBytes:
    """The served generation (cut, age), the speed layer's committed offsets, lag per partition and
    last micro-batch, the log's end offsets and the DLQ size, and the dead letters per source and
    per field of their reason. A store that does not answer is
    listed under `errors`; the rest is still reported."""
    return render.json_response(await collect_status(services))


@router.get("/healthz", response_model=HealthResponse, summary="The process is up")
async def healthz() -> render.JsonBytes:
    return render.json_response({"status": "ok"})


@router.get(
    "/readyz",
    response_model=ReadyResponse,
    responses={503: {"model": ReadyResponse, "description": "MongoDB does not answer."}},
    summary="Can queries be served (MongoDB, Redis, Kafka checked)",
)
async def readyz(services: ServicesDep) -> render.JsonBytes:
    result = await readiness(services)
    return render.json_response(result, status_code=200 if result["ready"] else 503)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}, "description": "Prometheus text format."},
        **GUARD_ERRORS,
    },
    summary="Prometheus metrics (admin scope)",
)
async def metrics(services: ServicesDep, _: AdminDep) -> Response:
    # The dead-letter figures come from the stores: refreshed per scrape, as /v1/status reads them;
    # a store that does not answer leaves the last figures (and /v1/status says why).
    with contextlib.suppress(Exception):
        await collect_status(services)
    return Response(services.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
