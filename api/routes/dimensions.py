"""GET /v1/dimensions, /v1/timeseries and /v1/breakdown: every view, with no per-view code.

A view declared in ``views/`` is served here as soon as the served generation answers it exactly
(its batch views and its realtime part, both computed by the same code); until then its queries
get a 503 naming it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from api import compare, export, render
from api.deps import BreakdownRequestDep, EngineDep, ReaderDep, TimeseriesRequestDep, engine_of, query_openapi
from api.params import BreakdownParams, TimeseriesParams
from api.routes.queries import QUERY_ERRORS
from api.schemas import BreakdownResponse, DimensionsResponse, NotReadyResponse, TimeseriesResponse

router = APIRouter(prefix="/v1", tags=["dimensions"])

ERRORS: dict[int | str, dict[str, Any]] = {
    **QUERY_ERRORS,
    409: {
        "model": NotReadyResponse,
        "description": "The dimension is declared but the served generation cannot answer it "
        "exactly yet (the next batch generation will); `dimension` names it.",
    },
}


@router.get(
    "/dimensions",
    response_model=DimensionsResponse,
    responses={code: QUERY_ERRORS[code] for code in (401, 403, 429, 503)},
    summary="The dimensions (views) and whether the served generation answers each",
)
async def dimensions(engine: EngineDep, _: ReaderDep) -> render.JsonBytes:
    """Every dimension the served generation, the speed layer or this API knows, with its
    description and readiness."""
    gen, described, problems = await engine.views()
    return render.json_response(render.dimensions(gen.gen, described, problems))


@router.get(
    "/timeseries",
    response_model=TimeseriesResponse,
    responses=ERRORS,
    openapi_extra=query_openapi(TimeseriesParams),
    summary="The metrics (visitors, visits, page views, ...) of one value of a dimension, per hour or day",
)
async def timeseries(request: Request, r: TimeseriesRequestDep) -> Response:
    """The metrics asked for (default: page views and unique visitors) from one snapshot of the
    served generation's batch and realtime views: exact page views, unique visitors (HLL with 95%
    bounds, exact when one batch bucket answers alone), and visits, views per visit, bounce rate
    and visit duration (exact unless `exactness` says otherwise). A metric the dimension does not
    count is a 422 naming `metrics`."""
    answer, compared = await compare.series(engine_of(request), r)
    return export.respond(
        request, render.timeseries(answer, r.site, r.value, r.metrics, compared), export.TIMESERIES
    )


@router.get(
    "/breakdown",
    response_model=BreakdownResponse,
    responses=ERRORS,
    openapi_extra=query_openapi(BreakdownParams),
    summary="The top values of a dimension over whole UTC days, with their metrics and totals",
)
async def breakdown(request: Request, r: BreakdownRequestDep) -> Response:
    """Values ranked by page views (by visits for entry_page and exit_page; ties by value) over the
    UTC days the range touches, each with the metrics asked for (default: page views and unique
    visitors); `totals` over every value of the site."""
    answer, compared = await compare.ranked(engine_of(request), r)
    return export.respond(
        request, render.breakdown(answer, r.per_site, r.metrics, compared), export.BREAKDOWN
    )
