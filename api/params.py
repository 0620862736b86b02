"""The query parameters of the API's queries, declared as pydantic models.

A route's dependency validates its model from the request's query string itself
(:func:`parsed`), one pydantic validation per request: declared as FastAPI query-parameter models
(``Annotated[Model, Query()]``) they cost more than the rest of a query's work, FastAPI inspecting
every field's annotation again on every request. The OpenAPI document still describes them exactly
as FastAPI would (:func:`openapi_parameters`), and an invalid parameter is still FastAPI's own 422.
Checks that need more than a type (a URL that must normalise, a range of whole hours, an offsets
token) are made where the parameters become a query (:mod:`api.requests`).
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Annotated, Any, Literal, TypeVar

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field, ValidationError
from starlette.datastructures import QueryParams

from config.memo import memo
from serving_layer import Granularity
from serving_layer.comparison import Compare

GRANULARITY_DESCRIPTION = (
    "Series bucket size: `hour`, `day` (UTC), `week` (ISO, Monday to Monday) or `month` (calendar); "
    "the first and last buckets are cut to the range."
)


class FormatParams(BaseModel):
    """The answer's format, which every query route takes (api.export)."""

    format: Literal["json", "csv"] | None = Field(
        None,
        description="`csv`: the answer as CSV (`text/csv`), as `Accept: text/csv` asks; `json` "
        "whatever `Accept` says. Default: by `Accept`, JSON unless it prefers `text/csv`.",
    )


class RangeParams(FormatParams):
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
    granularity: Granularity = Field(Granularity.HOUR, description=GRANULARITY_DESCRIPTION)
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


METRICS_FIELD_DESCRIPTION = (
    "Comma-separated metrics (the names and meanings of Plausible's Stats API): `visitors`, "
    "`visits`, `pageviews`, `views_per_visit`, `bounce_rate` (percent), `visit_duration` (seconds). "
    "Default: `visitors,pageviews`; `visits` for dimensions that count visits only (`entry_page`, "
    "`exit_page`). GET /v1/dimensions lists each dimension's metrics; a figure not asked for is null."
)


def metrics_field() -> str | None:
    return Field(
        None,
        max_length=200,
        description=METRICS_FIELD_DESCRIPTION,
        examples=["visitors,visits,pageviews,views_per_visit,bounce_rate,visit_duration"],
    )


def compare_field() -> Any:
    return Field(
        None,
        description="Also answer the comparison range beside the range, with the totals' change in "
        "percent: `previous_period` (the same length just before), `year_over_year` (a year earlier).",
    )


class TimeseriesParams(RangeParams):
    granularity: Granularity = Field(Granularity.HOUR, description=GRANULARITY_DESCRIPTION)
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
    metrics: str | None = metrics_field()
    compare: Compare | None = compare_field()


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
    metrics: str | None = metrics_field()
    compare: Compare | None = compare_field()


class TopParams(RangeParams):
    limit: int = Field(10, ge=1, description="How many URLs (at most LAMBDA_API_MAX_TOP).")
    site: str | None = Field(None, max_length=300, description="Only URLs of this site.")


class CurrentVisitorsParams(FormatParams):
    site: str = Field(
        max_length=300, description="The site (host, or origin).", examples=["shop.example.com"]
    )
    page: str | None = Field(
        None,
        max_length=4096,
        description="One page of the site (a URL, normalised like ingested events) instead of the "
        "whole site.",
        examples=["https://shop.example.com/pricing"],
    )
    minutes: int | None = Field(
        None,
        ge=1,
        description="The whole minutes before the current one the window holds (default "
        "LAMBDA_CURRENT_VISITORS_MINUTES, at most LAMBDA_CURRENT_VISITORS_MAX_MINUTES).",
        examples=[5],
    )


P = TypeVar("P", bound=BaseModel)


def parsed(model: type[P], request: Request) -> P:
    """``model`` validated from the request's query string (the last value of a repeated name, as
    FastAPI takes it); a RequestValidationError, FastAPI's 422, naming each parameter at fault.

    The parameters of a query string are validated once and kept (:func:`_parsed`, bounded by
    ``LAMBDA_API_PARAMS_CACHE_BYTES``): a dashboard asks the same few queries again and again, and
    their parsing costs more than a cached answer. A kept model is shared: nothing may change it."""
    return _parsed(model, request.scope["query_string"])


@memo("api_params_cache_bytes")
def _parsed(model: type[P], query_string: bytes) -> P:
    try:
        return model.model_validate(dict(QueryParams(query_string)))
    except ValidationError as exc:
        errors = [{**e, "loc": ("query", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def openapi_operation(annotation: Any) -> dict[str, Any]:
    """The OpenAPI operation FastAPI writes for a GET route taking one argument annotated
    ``annotation`` (a parameter model, a dependency), from the document of a throwaway app with that
    one route: how a route that declares less can still describe it exactly."""
    app = FastAPI()

    async def route(arg: Any) -> None:
        return None

    route.__annotations__ = {"arg": annotation, "return": None}  # the object, not a string
    app.get("/")(route)
    operation: dict[str, Any] = get_openapi(title="", version="", routes=app.routes)["paths"]["/"]["get"]
    return operation


@cache
def openapi_parameters(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI parameters of ``model`` as FastAPI writes them for a query-parameter model, for a
    route's ``openapi_extra``."""
    return {"parameters": openapi_operation(Annotated[model, Query()])["parameters"]}
