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

import secrets
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Query, Request

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


# --- the parsed request of each query ------------------------------------------------------------
async def get_series_request(request: Request, params: Annotated[SeriesParams, Query()]) -> SeriesRequest:
    return await series_request(_services(request), params)


async def get_top_request(request: Request, params: Annotated[TopParams, Query()]) -> TopRequest:
    return await top_request(_services(request), params)


async def get_timeseries_request(
    request: Request, params: Annotated[TimeseriesParams, Query()]
) -> TimeseriesRequest:
    return await timeseries_request(_services(request), params)


async def get_breakdown_request(request: Request, params: Annotated[BreakdownParams, Query()]) -> TopRequest:
    return await breakdown_request(_services(request), params)


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
