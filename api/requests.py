"""A query's parameters made into the serving layer's query: key, checked range, read-your-writes.

Each builder takes the parameter model (:mod:`api.params`) and the app's services, translates the
names into stored keys (:mod:`api.keys`), fills in the range's defaults and checks it, and turns
``after``/``wait_ms`` into the offsets the answer must include. Anything that does not make a
query raises InvalidQuery naming the parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from api.keys import series_key, site_key, target_of
from api.metric_names import VISITORS, asks_visits, metrics_of
from api.params import (
    BreakdownParams,
    CurrentVisitorsParams,
    RangeParams,
    SeriesParams,
    TimeseriesParams,
    TopParams,
)
from api.services import Services
from config.settings import Settings
from contract import normalize_url, utc
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
from serving_layer.comparison import Compare
from serving_layer.consistency import decode_token
from serving_layer.current_visitors import CurrentQuery
from serving_layer.queries import bounded
from serving_layer.tiling import HOUR
from views.campaigns import page_key
from views.scopes import scope_of


@dataclass(frozen=True)
class SeriesRequest:
    query: SeriesQuery
    after: ReadAfter | None


@dataclass(frozen=True)
class TopRequest:
    query: TopQuery
    after: ReadAfter | None
    per_site: bool = False
    metrics: tuple[str, ...] = ()
    """The metrics asked for (api.metric_names), in their order; /v1/top-urls asks none."""
    only_sites: tuple[str, ...] | None = None
    """A site listing limited to these sites (a key that may read only them)."""
    compare: Compare | None = None
    """Also the comparison range's answer (serving_layer.comparison)."""


@dataclass(frozen=True)
class TimeseriesRequest:
    query: SeriesQuery
    after: ReadAfter | None
    site: str | None
    value: str
    metrics: tuple[str, ...]
    per_site: bool = False
    compare: Compare | None = None
    """Also the comparison range's answer (serving_layer.comparison)."""


def time_range(settings: Settings, params: RangeParams, default_days: int = 1) -> tuple[datetime, datetime]:
    """The checked ``[start, end)`` of a query, with the defaults filled in."""
    end = (
        bounded("to", utc.as_utc(params.to))
        if params.to is not None
        else utc.now().replace(minute=0, second=0, microsecond=0) + HOUR
    )
    start = (
        bounded("from", utc.as_utc(params.from_))
        if params.from_ is not None
        else end - timedelta(days=min(default_days, settings.api_max_range_days))
    )
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


async def dimension_of(engine: QueryEngine, name: str) -> dict[str, Any]:
    """How the dimension ``name`` is served (``per_site``, the metrics it counts); InvalidQuery
    naming it if no view has that name."""
    info = await engine.description(name)
    if info is None:
        raise InvalidQuery("dimension", f"no dimension named {name!r} (GET /v1/dimensions lists them)")
    return info


def _check_limit(services: Services, limit: int) -> None:
    if limit > services.settings.api_max_top:
        raise InvalidQuery("limit", f"must be at most {services.settings.api_max_top}")


DEFAULT_DAYS = {Granularity.HOUR: 1, Granularity.DAY: 7, Granularity.WEEK: 28, Granularity.MONTH: 90}
"""How far back a series reaches without ``from``, per granularity (at most the longest range)."""


def _default_days(granularity: Granularity) -> int:
    return DEFAULT_DAYS[granularity]


async def series_request(services: Services, params: SeriesParams) -> SeriesRequest:
    view, key = target_of(params.url, params.site)
    start, end = time_range(services.settings, params, _default_days(params.granularity))
    query = SeriesQuery(view, key, start, end, params.granularity)
    return SeriesRequest(query, await read_after(services, params))


async def top_request(services: Services, params: TopParams) -> TopRequest:
    _check_limit(services, params.limit)
    start, end = time_range(services.settings, params)
    site = None if params.site is None else site_key(params.site)
    query = TopQuery(URL_VIEW, start, end, params.limit, site)
    return TopRequest(query, await read_after(services, params))


async def timeseries_request(services: Services, params: TimeseriesParams) -> TimeseriesRequest:
    info = await dimension_of(services.engine, params.dimension)
    metrics = metrics_of(params.metrics, params.dimension, info)
    key, value = series_key(
        params.dimension, bool(info.get("per_site")), params.site, params.value, bool(info.get("url_keys"))
    )
    start, end = time_range(services.settings, params, _default_days(params.granularity))
    query = SeriesQuery(params.dimension, key, start, end, params.granularity, visits=asks_visits(metrics))
    site = None if params.site is None else site_key(params.site)
    return TimeseriesRequest(
        query,
        await read_after(services, params),
        site,
        value,
        metrics,
        bool(info.get("per_site")),
        params.compare,
    )


async def breakdown_request(services: Services, params: BreakdownParams) -> TopRequest:
    _check_limit(services, params.limit)
    info = await dimension_of(services.engine, params.dimension)
    per_site = bool(info.get("per_site"))
    metrics = metrics_of(params.metrics, params.dimension, info)
    if params.dimension == SITE_VIEW and params.site is not None:
        raise InvalidQuery("site", "omit it for the site dimension (it ranks the sites)")
    if per_site and params.site is None:
        raise InvalidQuery("site", f"required: {params.dimension!r} is a per-site dimension")
    start, end = time_range(services.settings, params)
    site = None if params.site is None else site_key(params.site)
    query = TopQuery(
        params.dimension,
        start,
        end,
        params.limit,
        site,
        visitors=VISITORS in metrics,
        visits=asks_visits(metrics),
    )
    return TopRequest(query, await read_after(services, params), per_site, metrics, compare=params.compare)


def current_visitors_query(settings: Settings, params: CurrentVisitorsParams) -> CurrentQuery:
    """The site or page and the window's length of GET /v1/current-visitors."""
    minutes = settings.current_visitors_minutes if params.minutes is None else params.minutes
    if minutes > settings.current_visitors_max_minutes:
        raise InvalidQuery(
            "minutes", f"must be at most {settings.current_visitors_max_minutes} (older minutes are not kept)"
        )
    site = site_key(params.site)
    if params.page is None:
        return CurrentQuery(site, SITE_VIEW, site, minutes)
    try:
        page = page_key(normalize_url(params.page))  # the page dimension's key, as target_of keys one
    except ValueError as exc:
        raise InvalidQuery("page", str(exc)) from None
    if scope_of(page, False) != site:
        raise InvalidQuery("page", f"the page is not on the site {site!r}")
    return CurrentQuery(site, URL_VIEW, page, minutes)
