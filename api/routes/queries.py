"""GET /v1/pageviews, /v1/unique-visitors and /v1/top-urls."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from api import render
from api.deps import EngineDep, RangeDep, ReadAfterDep, SeriesQueryDep, SettingsDep, normalize_site
from api.schemas import (
    ErrorResponse,
    PageviewsResponse,
    TimeoutResponse,
    TopUrlsResponse,
    UniqueVisitorsResponse,
    ValidationErrorResponse,
)
from serving_layer import URL_VIEW, InvalidQuery, TopQuery

router = APIRouter(prefix="/v1", tags=["queries"])

QUERY_ERRORS: dict[int | str, dict[str, Any]] = {
    422: {"model": ValidationErrorResponse, "description": "A parameter is invalid; `loc` names it."},
    503: {
        "model": ErrorResponse,
        "description": "MongoDB is down or nothing is served yet; see Retry-After.",
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
async def pageviews(engine: EngineDep, q: SeriesQueryDep, after: ReadAfterDep) -> render.JsonBytes:
    """Exact page views: the served generation's batch views plus its realtime views. With Redis
    down the answer comes from the batch views alone and says so (`partial`, `missing`, `covers`)."""
    return render.json_response(render.pageviews(await engine.pageviews(q, after)))


@router.get(
    "/unique-visitors",
    response_model=UniqueVisitorsResponse,
    responses=QUERY_ERRORS,
    summary="Unique visitors of a URL or a site, per bucket and over the whole range",
)
async def unique_visitors(engine: EngineDep, q: SeriesQueryDep, after: ReadAfterDep) -> render.JsonBytes:
    """HLL estimates with 95% bounds (the union of bucket sketches, never a sum), or exact counts
    when the batch views alone answer a single stored bucket (`exact: true`)."""
    return render.json_response(render.unique_visitors(await engine.unique_visitors(q, after)))


@router.get(
    "/top-urls",
    response_model=TopUrlsResponse,
    responses=QUERY_ERRORS,
    summary="The URLs with the most page views over whole UTC days",
)
async def top_urls(
    engine: EngineDep,
    settings: SettingsDep,
    rng: RangeDep,
    after: ReadAfterDep,
    limit: Annotated[int, Query(ge=1, description="How many URLs (at most LAMBDA_API_MAX_TOP).")] = 10,
    site: Annotated[str | None, Query(max_length=300, description="Only URLs of this site.")] = None,
) -> render.JsonBytes:
    """Rankings are kept per UTC day, so the range is rounded outwards to whole days; `from` and
    `to` of the answer say which days were ranked. Counts are exact (batch ranking + realtime)."""
    if limit > settings.api_max_top:
        raise InvalidQuery("limit", f"must be at most {settings.api_max_top}")
    try:
        site_key = None if site is None else normalize_site(site)
    except ValueError as exc:
        raise InvalidQuery("site", str(exc)) from None
    q = TopQuery(URL_VIEW, rng.start, rng.end, limit, site_key)
    return render.json_response(render.top(await engine.top(q, after)))
