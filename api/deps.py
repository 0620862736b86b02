"""The routes' dependencies: the app's services and the parsed request of each query, as
``Annotated`` types a route declares as parameters (``engine: EngineDep``).

Every dependency is ``async def`` although most do not await: FastAPI runs plain ``def``
dependencies in a thread pool, and a thread hop per dependency costs more than the query itself.
For the same reason a query route takes one dependency, its parsed request, and the engine from the
request (:func:`engine_of`): FastAPI's solving of each dependency and of each declared parameter
costs more per request than a query's own work. That dependency calls the key checks (the same
security objects and :func:`get_caller`) and validates the query-parameter model (:mod:`api.params`)
itself; the route's ``openapi_extra`` (:func:`query_openapi`) describes both in the OpenAPI document
exactly as FastAPI would have.

A parameter that does not make a query raises InvalidQuery naming it (:mod:`api.requests`); the
app turns that into a 422 of the same shape as FastAPI's own validation errors.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

import orjson
from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from api import compare, cost, scoping
from api.answer_cache import AnswerCache
from api.auth import Caller, require_scope, require_site
from api.collect.collector import Collector
from api.keys import normalize_site
from api.params import (
    BreakdownParams,
    CurrentVisitorsParams,
    SeriesParams,
    TimeseriesParams,
    TopParams,
    openapi_operation,
    openapi_parameters,
    parsed,
)
from api.query_v2 import QueryV2Request
from api.requests import (
    SeriesRequest,
    TimeseriesRequest,
    TopRequest,
    breakdown_request,
    current_visitors_query,
    series_request,
    timeseries_request,
    top_request,
)
from api.services import Services
from config.settings import Settings
from contract import utc
from serving_layer import InvalidQuery, QueryEngine
from serving_layer.current_visitors import CurrentQuery
from serving_layer.filters import FilterQuery, parse_query
from stores.api_keys import ADMIN, READ, WRITE


def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def get_services(request: Request) -> Services:
    return _services(request)


async def get_settings(request: Request) -> Settings:
    return _services(request).settings


async def get_engine(request: Request) -> QueryEngine:
    return _services(request).engine


def engine_of(request: Request) -> QueryEngine:
    return _services(request).engine


async def get_collector(request: Request) -> Collector:
    return _services(request).collect


def answers_of(request: Request) -> AnswerCache:
    return _services(request).answers


ServicesDep = Annotated[Services, Depends(get_services)]
CollectorDep = Annotated[Collector, Depends(get_collector)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
EngineDep = Annotated[QueryEngine, Depends(get_engine)]


# --- who is calling ---------------------------------------------------------------------------------
_bearer = HTTPBearer(
    auto_error=False, description="An API key (`python -m api keys add`): `Authorization: Bearer <key>`."
)
_x_api_key = APIKeyHeader(
    name="X-API-Key", auto_error=False, description="An API key, in place of `Authorization: Bearer`."
)


async def get_caller(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    x_api_key: Annotated[str | None, Depends(_x_api_key)],
) -> Caller:
    """The caller (api.auth), counted against its key's rate limit (429 past it)."""
    services = _services(request)
    caller = await services.auth.caller(bearer.credentials if bearer is not None else x_api_key)
    if caller.rate_key is not None:
        services.rate.hit(caller.rate_key)
    return caller


CallerDep = Annotated[Caller, Depends(get_caller)]


async def get_reader(caller: CallerDep) -> Caller:
    require_scope(caller, READ)
    return caller


async def get_writer(caller: CallerDep) -> Caller:
    require_scope(caller, WRITE)
    return caller


async def get_admin(caller: CallerDep) -> Caller:
    require_scope(caller, ADMIN)
    return caller


ReaderDep = Annotated[Caller, Depends(get_reader)]
WriterDep = Annotated[Caller, Depends(get_writer)]
AdminDep = Annotated[Caller, Depends(get_admin)]


async def _reader_of(request: Request) -> Caller:
    """What ``ReaderDep`` gives, without FastAPI solving its three dependencies."""
    caller = await get_caller(request, await _bearer(request), await _x_api_key(request))
    require_scope(caller, READ)
    return caller


@cache
def query_openapi(model: type[BaseModel]) -> dict[str, Any]:
    """A query route's ``openapi_extra``: the parameters of ``model`` and the key schemes of
    ``ReaderDep``, as FastAPI writes them for a route declaring both (taken from a throwaway app's
    document)."""
    return {**openapi_parameters(model), "security": openapi_operation(ReaderDep)["security"]}


# --- the parsed request of each query: within the caller's sites and the cost limit ---------------
async def get_series_request(request: Request) -> SeriesRequest:
    caller = await _reader_of(request)
    services = _services(request)
    r = await series_request(services, parsed(SeriesParams, request))
    scoping.check_series(caller, r.query)
    cost.check(cost.series_cost(r.query), services.settings.api_max_cost, "to")
    return r


async def get_top_request(request: Request) -> TopRequest:
    caller = await _reader_of(request)
    services = _services(request)
    r = scoping.scope_top(caller, await top_request(services, parsed(TopParams, request)))
    cost.check(scoping.top_cost(r), services.settings.api_max_cost, "to")
    return r


async def get_timeseries_request(request: Request) -> TimeseriesRequest:
    caller = await _reader_of(request)
    services = _services(request)
    r = await timeseries_request(services, parsed(TimeseriesParams, request))
    scoping.check_timeseries(caller, r)
    other = compare.series_comparison(r)
    comparison_cost = 0 if other is None else cost.series_cost(other)
    cost.check(cost.series_cost(r.query) + comparison_cost, services.settings.api_max_cost, "to")
    return r


async def get_breakdown_request(request: Request) -> TopRequest:
    caller = await _reader_of(request)
    services = _services(request)
    r = scoping.scope_top(caller, await breakdown_request(services, parsed(BreakdownParams, request)))
    other = compare.top_comparison(r)
    comparison_cost = 0 if other is None else scoping.top_cost(other)
    cost.check(scoping.top_cost(r) + comparison_cost, services.settings.api_max_cost, "limit")
    return r


async def get_current_visitors_query(request: Request) -> CurrentQuery:
    caller = await _reader_of(request)
    settings = _services(request).settings
    q = current_visitors_query(settings, parsed(CurrentVisitorsParams, request))
    scoping.check_current(caller, q)
    cost.check(
        cost.current_visitors_cost(q.minutes, settings.current_visitors_exact_limit),
        settings.api_max_cost,
        "minutes",
    )
    return q


SeriesRequestDep = Annotated[SeriesRequest, Depends(get_series_request)]
TopRequestDep = Annotated[TopRequest, Depends(get_top_request)]
TimeseriesRequestDep = Annotated[TimeseriesRequest, Depends(get_timeseries_request)]
BreakdownRequestDep = Annotated[TopRequest, Depends(get_breakdown_request)]
CurrentVisitorsQueryDep = Annotated[CurrentQuery, Depends(get_current_visitors_query)]


# --- POST /v2/query: its body, of the caller's sites ------------------------------------------------
async def get_v2_query(request: Request) -> FilterQuery:
    """The parsed body of POST /v2/query (read scope; a key limited to sites queries those only)."""
    caller = await _reader_of(request)
    settings = _services(request).settings
    body = await request.body()
    if len(body) > settings.api_max_body_bytes:
        raise InvalidBody(
            "body", f"larger than {settings.api_max_body_bytes} bytes (LAMBDA_API_MAX_BODY_BYTES)"
        )
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InvalidBody("body", "not a JSON object") from None
    try:
        q = parse_query(decoded, utc.now().date(), settings.api_max_range_days, normalize_site)
    except InvalidQuery as exc:
        raise InvalidBody(exc.param, exc.problem) from None
    require_site(caller, q.site)
    return q


class InvalidBody(InvalidQuery):
    """An invalid parameter of a request's body (its 422 says ``["body", param]``)."""

    location = "body"


@cache
def query_v2_openapi() -> dict[str, Any]:
    """POST /v2/query's ``openapi_extra``: its body (parsed by hand) and the key schemes of
    ``ReaderDep``."""
    schema = QueryV2Request.model_json_schema(ref_template="#/components/schemas/{model}")
    return {
        "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
        "security": openapi_operation(ReaderDep)["security"],
    }


QueryV2Dep = Annotated[FilterQuery, Depends(get_v2_query)]
