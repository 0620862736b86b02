"""GET /v1/pageviews, /v1/unique-visitors and /v1/top-urls."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from api import render
from api.deps import EngineDep, SeriesRequestDep, TopRequestDep
from api.routes.responses import GUARD_ERRORS
from api.schemas import (
    ErrorResponse,
    PageviewsResponse,
    TimeoutResponse,
    TopUrlsResponse,
    UniqueVisitorsResponse,
    ValidationErrorResponse,
)

router = APIRouter(prefix="/v1", tags=["queries"])

QUERY_ERRORS: dict[int | str, dict[str, Any]] = {
    **GUARD_ERRORS,
    422: {
        "model": ValidationErrorResponse,
        "description": "A parameter is invalid (`loc` names it), or the query costs more than "
        "LAMBDA_API_MAX_COST (`ctx` has the cost and the limit).",
    },
    503: {
        "model": ErrorResponse,
        "description": "MongoDB is down, nothing is served yet, or the worker is serving its limit of "
        "requests; see Retry-After.",
    },
    504: {
        "model": TimeoutResponse,
        "description": "The events of `after` were not visible within `wait_ms`.",
    },
}


@router.get(
    "/pageviews",
    response_model=PageviewsResponse,
    responses=QUERY_ERRORS,
    summary="Page views of a URL or a site, per hour or day",
)
async def pageviews(engine: EngineDep, r: SeriesRequestDep) -> render.JsonBytes:
    """Exact page views: the served generation's batch views plus its realtime views. With Redis
    down the answer comes from the batch views alone and says so (`partial`, `missing`, `covers`)."""
    return render.json_response(render.pageviews(await engine.pageviews(r.query, r.after)))


@router.get(
    "/unique-visitors",
    response_model=UniqueVisitorsResponse,
    responses=QUERY_ERRORS,
    summary="Unique visitors of a URL or a site, per bucket and over the whole range",
)
async def unique_visitors(engine: EngineDep, r: SeriesRequestDep) -> render.JsonBytes:
    """HLL estimates with 95% bounds (the union of bucket sketches, never a sum), or exact counts
    when the batch views alone answer a single stored bucket (`exact: true`)."""
    return render.json_response(render.unique_visitors(await engine.unique_visitors(r.query, r.after)))


@router.get(
    "/top-urls",
    response_model=TopUrlsResponse,
    responses=QUERY_ERRORS,
    summary="The URLs with the most page views over whole UTC days",
)
async def top_urls(engine: EngineDep, r: TopRequestDep) -> render.JsonBytes:
    """Rankings are kept per UTC day, so the range is rounded outwards to whole days; `from` and
    `to` of the answer say which days were ranked. Counts are exact (batch ranking + realtime)."""
    return render.json_response(render.top(await engine.top(r.query, r.after)))
