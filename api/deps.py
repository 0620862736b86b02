"""Dependencies of the routes: the services of the app, and the query parameters every query shares.

Every dependency is ``async def`` although most do not await: FastAPI runs plain ``def``
dependencies in a thread pool, and a thread hop per dependency cost more than the whole query.
For the same reason a query route takes two flat dependencies (the engine and the parsed
request), each reading the app's services from the request.

Parameter checks that need more than a type (a URL that must normalise, a range that must be
whole hours and not too long, an offsets token) raise InvalidQuery naming the parameter; the app
turns that into a 422 of the same shape as FastAPI's own validation errors.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Query, Request
from pydantic import BaseModel, Field
from pymongo import AsyncMongoClient
from redis.asyncio import Redis

from api.events import EventIngest
from api.kafka import KafkaProbe
from api.metrics import ApiMetrics
from config.settings import Settings
from contract import normalize_url, site_of, utc
from serving_layer import (
    SITE_VIEW,
    URL_VIEW,
    Granularity,
    InvalidQuery,
    QueryEngine,
    ReadAfter,
    SeriesQuery,
    TopQuery,
    check_range,
)
from serving_layer.consistency import decode_token
from serving_layer.tiling import HOUR
from views.scopes import scope_of, stored_key


@dataclass
class Services:
    """Everything the app holds for its lifetime (built in api.app's lifespan)."""

    settings: Settings
    engine: QueryEngine
    ingest: EventIngest
    kafka: KafkaProbe
    metrics: ApiMetrics
    mongo: AsyncMongoClient[dict[str, object]]
    redis: Redis


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.services.settings
    return settings


async def get_engine(request: Request) -> QueryEngine:
    engine: QueryEngine = request.app.state.services.engine
    return engine


SettingsDep = Annotated[Settings, Depends(get_settings)]
EngineDep = Annotated[QueryEngine, Depends(get_engine)]


# --- the query parameters ------------------------------------------------------------------------
# Declared as models (FastAPI query-parameter models): one pydantic validation per request instead
# of FastAPI's per-parameter handling, which measured a tenth of a query's CPU time.
class RangeParams(BaseModel):
    from_: datetime | None = Field(
        None,
        alias="from",
        description="Start (inclusive), ISO 8601, a whole UTC hour; naive times are UTC. "
        "Default: `to` minus one day (seven days for daily series).",
        examples=["2026-11-20T00:00:00Z"],
    )
    to: datetime | None = Field(
        None,
        description="End (exclusive), a whole hour. Default: the end of the current hour.",
        examples=["2026-11-21T00:00:00Z"],
    )
    after: str | None = Field(
        None,
        max_length=4096,
        description="Offsets token from POST /v1/events: answer only once those events are "
        "included (or 504 when `wait_ms` runs out).",
    )
    wait_ms: int | None = Field(
        None,
        ge=0,
        description="How long to wait for `after` (default from settings). Without `after`: wait "
        "until every event in the log at the time of the request is included.",
    )


class SeriesParams(RangeParams):
    granularity: Granularity = Field(Granularity.HOUR, description="Series bucket size.")
    url: str | None = Field(
        None,
        max_length=4096,
        description="The page (normalised like ingested events). Give `url` or `site`.",
        examples=["https://shop.example.com/cart"],
    )
    site: str | None = Field(
        None,
        max_length=300,
        description="Site-wide answer for this host (or origin) instead of one page.",
        examples=["shop.example.com"],
    )


class TimeseriesParams(RangeParams):
    granularity: Granularity = Field(Granularity.HOUR, description="Series bucket size.")
    dimension: str = Field(
        "site",
        max_length=64,
        description="A dimension of GET /v1/dimensions. `site` (the default): the site's totals.",
        examples=["country"],
    )
    site: str | None = Field(
        None,
        max_length=300,
        description="The site (host, or origin). Required for per-site dimensions and `site`.",
        examples=["shop.example.com"],
    )
    value: str | None = Field(
        None,
        max_length=4096,
        description="The dimension's value, as /v1/breakdown lists it (a URL for `page`); "
        "omitted for `site`.",
        examples=["DE"],
    )


class BreakdownParams(RangeParams):
    dimension: str = Field(
        max_length=64, description="A dimension of GET /v1/dimensions.", examples=["referrer"]
    )
    site: str | None = Field(
        None,
        max_length=300,
        description="Only this site's values (required for per-site dimensions; not for `site`).",
        examples=["shop.example.com"],
    )
    limit: int = Field(10, ge=1, description="How many values (at most LAMBDA_API_MAX_TOP).")


class TopParams(RangeParams):
    limit: int = Field(10, ge=1, description="How many URLs (at most LAMBDA_API_MAX_TOP).")
    site: str | None = Field(None, max_length=300, description="Only URLs of this site.")


def normalize_site(raw: str) -> str:
    """A site as the views key it: the host (with a non-default port) of ``shop.example.com`` or
    ``https://shop.example.com``."""
    url = normalize_url(raw if "://" in raw else f"https://{raw}")
    if url.split("/", 3)[3:] not in ([], [""]):
        raise ValueError("must be a host (shop.example.com) or an origin, without a path")
    return site_of(url)


def site_key(site: str) -> str:
    try:
        return normalize_site(site)
    except ValueError as exc:
        raise InvalidQuery("site", str(exc)) from None


def target_of(url: str | None, site: str | None) -> tuple[str, str]:
    """(view, key) of a query: one page's URL, or a site for site-wide answers."""
    if url is not None and site is not None:
        raise InvalidQuery("site", "give either url or site, not both")
    if url is not None:
        try:
            return URL_VIEW, normalize_url(url)
        except ValueError as exc:
            raise InvalidQuery("url", str(exc)) from None
    if site is not None:
        return SITE_VIEW, site_key(site)
    raise InvalidQuery("url", "give url (one page) or site (site-wide)")


def time_range(settings: Settings, params: RangeParams, default_days: int = 1) -> tuple[datetime, datetime]:
    """The checked ``[start, end)`` of a query, with the defaults filled in."""
    end = (
        utc.as_utc(params.to)
        if params.to is not None
        else utc.now().replace(minute=0, second=0, microsecond=0) + HOUR
    )
    start = utc.as_utc(params.from_) if params.from_ is not None else end - timedelta(days=default_days)
    check_range(start, end, settings.api_max_range_days)
    return start, end


async def read_after(services: Services, params: RangeParams) -> ReadAfter | None:
    """Read your writes: wait for the offsets of ``after`` (or of the whole log, ``wait_ms`` alone)."""
    after, wait_ms = params.after, params.wait_ms
    if after is None and not wait_ms:
        return None
    settings = services.settings
    if wait_ms is not None and wait_ms > settings.api_max_wait_ms:
        raise InvalidQuery("wait_ms", f"must be at most {settings.api_max_wait_ms}")
    if after is not None:
        wait = settings.api_default_wait_ms if wait_ms is None else wait_ms
        return ReadAfter(decode_token(after), wait / 1000)
    assert wait_ms is not None
    return ReadAfter(await services.kafka.end_offsets(), wait_ms / 1000)


@dataclass(frozen=True)
class SeriesRequest:
    query: SeriesQuery
    after: ReadAfter | None


@dataclass(frozen=True)
class TopRequest:
    query: TopQuery
    after: ReadAfter | None
    per_site: bool = False


@dataclass(frozen=True)
class TimeseriesRequest:
    query: SeriesQuery
    after: ReadAfter | None
    site: str | None
    value: str


async def dimension_of(engine: QueryEngine, name: str) -> bool:
    """Whether the dimension ``name`` is per site; InvalidQuery naming it if no view has that name."""
    info = await engine.description(name)
    if info is None:
        raise InvalidQuery("dimension", f"no dimension named {name!r} (GET /v1/dimensions lists them)")
    return bool(info.get("per_site"))


def series_key(dimension: str, per_site: bool, site: str | None, value: str | None) -> tuple[str, str]:
    """(stored key, value) of a timeseries: ``site|value`` for a per-site dimension, the site itself
    for `site`, the normalised URL for `page`, the value as given otherwise."""
    if per_site:
        if site is None:
            raise InvalidQuery("site", f"required: {dimension!r} is a per-site dimension")
        if value is None:
            raise InvalidQuery("value", f"required for the dimension {dimension!r}")
        return stored_key(site_key(site), value, True), value
    if dimension == SITE_VIEW:
        if site is None:
            raise InvalidQuery("site", "required for the site dimension")
        if value is not None and value != site:
            raise InvalidQuery("value", "omit it for the site dimension (the site is the value)")
        key = site_key(site)
        return key, key
    if value is None:
        raise InvalidQuery("value", f"required for the dimension {dimension!r}")
    if dimension == URL_VIEW:
        key = target_of(value, None)[1]
        if site is not None and scope_of(key, False) != site_key(site):
            raise InvalidQuery("value", f"the page is not on the site {site!r}")
        return key, key
    return value, value


async def get_series_request(request: Request, params: Annotated[SeriesParams, Query()]) -> SeriesRequest:
    services: Services = request.app.state.services
    view, key = target_of(params.url, params.site)
    start, end = time_range(services.settings, params, 1 if params.granularity is Granularity.HOUR else 7)
    query = SeriesQuery(view, key, start, end, params.granularity)
    return SeriesRequest(query, await read_after(services, params))


async def get_top_request(request: Request, params: Annotated[TopParams, Query()]) -> TopRequest:
    services: Services = request.app.state.services
    if params.limit > services.settings.api_max_top:
        raise InvalidQuery("limit", f"must be at most {services.settings.api_max_top}")
    start, end = time_range(services.settings, params)
    site = None if params.site is None else site_key(params.site)
    query = TopQuery(URL_VIEW, start, end, params.limit, site)
    return TopRequest(query, await read_after(services, params))


async def get_timeseries_request(
    request: Request, params: Annotated[TimeseriesParams, Query()]
) -> TimeseriesRequest:
    services: Services = request.app.state.services
    per_site = await dimension_of(services.engine, params.dimension)
    key, value = series_key(params.dimension, per_site, params.site, params.value)
    start, end = time_range(services.settings, params, 1 if params.granularity is Granularity.HOUR else 7)
    query = SeriesQuery(params.dimension, key, start, end, params.granularity)
    site = None if params.site is None else site_key(params.site)
    return TimeseriesRequest(query, await read_after(services, params), site, value)


async def get_breakdown_request(request: Request, params: Annotated[BreakdownParams, Query()]) -> TopRequest:
    services: Services = request.app.state.services
    if params.limit > services.settings.api_max_top:
        raise InvalidQuery("limit", f"must be at most {services.settings.api_max_top}")
    per_site = await dimension_of(services.engine, params.dimension)
    if params.dimension == SITE_VIEW and params.site is not None:
        raise InvalidQuery("site", "omit it for the site dimension (it ranks the sites)")
    if per_site and params.site is None:
        raise InvalidQuery("site", f"required: {params.dimension!r} is a per-site dimension")
    start, end = time_range(services.settings, params)
    site = None if params.site is None else site_key(params.site)
    query = TopQuery(params.dimension, start, end, params.limit, site, visitors=True)
    return TopRequest(query, await read_after(services, params), per_site)


SeriesRequestDep = Annotated[SeriesRequest, Depends(get_series_request)]
TopRequestDep = Annotated[TopRequest, Depends(get_top_request)]
TimeseriesRequestDep = Annotated[TimeseriesRequest, Depends(get_timeseries_request)]
BreakdownRequestDep = Annotated[TopRequest, Depends(get_breakdown_request)]


# --- writes ----------------------------------------------------------------------------------------
async def require_api_key(
    settings: SettingsDep,
    x_api_key: Annotated[
        str | None, Header(description="Required when the server sets LAMBDA_API_KEY.")
    ] = None,
) -> None:
    expected = settings.api_key
    if expected is None:
        return
    if x_api_key is None or not secrets.compare_digest(
        x_api_key.encode(), expected.get_secret_value().encode()
    ):
        raise HTTPException(401, "X-API-Key: missing or wrong", headers={"WWW-Authenticate": "ApiKey"})


ApiKeyDep = Annotated[None, Depends(require_api_key)]
