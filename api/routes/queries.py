"""GET /v1/pageviews, /v1/unique-visitors and /v1/top-urls."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from api import export, render
from api.deps import SeriesRequestDep, TopRequestDep, answers_of, engine_of, query_openapi
from api.direct_route import DirectRoute
from api.params import SeriesParams, TopParams
from api.requests import SeriesRequest
from api.routes.responses import GUARD_ERRORS
from api.schemas import (
    ErrorResponse,
    PageviewsResponse,
    TimeoutResponse,
    TopUrlsResponse,
    UniqueVisitorsResponse,
    ValidationErrorResponse,
)
from serving_layer import SeriesQuery

router = APIRouter(prefix="/v1", tags=["queries"], route_class=DirectRoute)


def reusable(route: str, r: SeriesRequest) -> tuple[str, SeriesQuery] | None:
    """The answer cache's key of a series query (api.answer_cache); None for a read-your-writes
    query, which waits on the commit and is never answered from the cache."""
    return None if r.after is not None else (route, r.query)


QUERY_ERRORS: dict[int | str, dict[str, Any]] = {
    **export.CSV_RESPONSE,
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
    openapi_extra=query_openapi(SeriesParams),
    summary="Page views of a URL or a site, per hour or day",
)
async def pageviews(request: Request, r: SeriesRequestDep) -> Response:
    """Exact page views: the served generation's batch views plus its realtime views. With Redis
    down the answer comes from the batch views alone and says so (`partial`, `missing`, `covers`)."""
    engine = engine_of(request)
    if export.wants_csv(request):  # CSV answers are not kept: the cache holds the JSON bytes
        answer = await engine.pageviews(r.query, r.after)
        return export.respond(request, render.pageviews(answer), export.PAGEVIEWS)
    return render.JsonBytes(
        await answers_of(request).answer(
            reusable("pageviews", r), lambda: engine.pageviews(r.query, r.after), render.pageviews_bytes
        )
    )


@router.get(
    "/unique-visitors",
    response_model=UniqueVisitorsResponse,
    responses=QUERY_ERRORS,
    openapi_extra=query_openapi(SeriesParams),
    summary="Unique visitors of a URL or a site, per bucket and over the whole range",
)
async def unique_visitors(request: Request, r: SeriesRequestDep) -> Response:
    """HLL estimates with 95% bounds (the union of bucket sketches, never a sum), or exact counts
    when the batch views alone answer a single stored bucket (`exact: true`)."""
    engine = engine_of(request)
    if export.wants_csv(request):
        answer = await engine.unique_visitors(r.query, r.after)
        return export.respond(request, render.unique_visitors(answer), export.UNIQUE_VISITORS)
    return render.JsonBytes(
        await answers_of(request).answer(
            reusable("unique-visitors", r),
            lambda: engine.unique_visitors(r.query, r.after),
            render.unique_visitors_bytes,
        )
    )


@router.get(
    "/top-urls",
    response_model=TopUrlsResponse,
    responses=QUERY_ERRORS,
    openapi_extra=query_openapi(TopParams),
    summary="The URLs with the most page views over whole UTC days",
)
async def top_urls(request: Request, r: TopRequestDep) -> Response:
    """Rankings are kept per UTC day, so the range is rounded outwards to whole days; `from` and
    `to` of the answer say which days were ranked. Counts are exact (batch ranking + realtime)."""
    engine = engine_of(request)
    return export.respond(request, render.top(await engine.top(r.query, r.after)), export.TOP_URLS)
