"""The routes' dependencies: the app's services and the parsed request of each query, as
``Annotated`` types a route declares as parameters (``engine: EngineDep``).

Every dependency is ``async def`` although most do not await: FastAPI runs plain ``def``
dependencies in a thread pool, and a thread hop per dependency costs more than the query itself.
For the same reason a query route takes two flat dependencies (the engine and the parsed
request), each reading the app's services from the request.

A parameter that does not make a query raises InvalidQuery naming it (:mod:`api.requests`); the
app turns that into a 422 of the same shape as FastAPI's own validation errors.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from api import cost, scoping
from api.auth import Caller, require_scope
from api.params import BreakdownParams, SeriesParams, TimeseriesParams, TopParams
from api.requests import (
    SeriesRequest,
    TimeseriesRequest,
    TopRequest,
    breakdown_request,
    series_request,
    timeseries_request,
    top_request,
)
from api.services import Services
from config.settings import Settings
from serving_layer import QueryEngine
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


ServicesDep = Annotated[Services, Depends(get_services)]
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


# --- the parsed request of each query: within the caller's sites and the cost limit ---------------
async def get_series_request(
    request: Request, caller: ReaderDep, params: Annotated[SeriesParams, Query()]
) -> SeriesRequest:
    services = _services(request)
    r = await series_request(services, params)
    scoping.check_series(caller, r.query)
    cost.check(cost.series_cost(r.query), services.settings.api_max_cost, "to")
    return r


async def get_top_request(
    request: Request, caller: ReaderDep, params: Annotated[TopParams, Query()]
) -> TopRequest:
    services = _services(request)
    r = scoping.scope_top(caller, await top_request(services, params))
    cost.check(scoping.top_cost(r), services.settings.api_max_cost, "to")
    return r


async def get_timeseries_request(
    request: Request, caller: ReaderDep, params: Annotated[TimeseriesParams, Query()]
) -> TimeseriesRequest:
    services = _services(request)
    r = await timeseries_request(services, params)
    scoping.check_timeseries(caller, r)
    cost.check(cost.series_cost(r.query), services.settings.api_max_cost, "to")
    return r


async def get_breakdown_request(
    request: Request, caller: ReaderDep, params: Annotated[BreakdownParams, Query()]
) -> TopRequest:
    services = _services(request)
    r = scoping.scope_top(caller, await breakdown_request(services, params))
    cost.check(scoping.top_cost(r), services.settings.api_max_cost, "limit")
    return r


SeriesRequestDep = Annotated[SeriesRequest, Depends(get_series_request)]
TopRequestDep = Annotated[TopRequest, Depends(get_top_request)]
TimeseriesRequestDep = Annotated[TimeseriesRequest, Depends(get_timeseries_request)]
BreakdownRequestDep = Annotated[TopRequest, Depends(get_breakdown_request)]
