"""GET /v1/current-visitors: unique visitors of a site or page over the last minutes, from the speed
layer alone (serving_layer.current_visitors)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from api import export, render
from api.deps import CurrentVisitorsQueryDep, query_openapi
from api.params import CurrentVisitorsParams
from api.routes.queries import QUERY_ERRORS
from api.schemas import CurrentVisitorsResponse, ErrorResponse
from api.services import Services
from serving_layer import current_visitors
from stores.redis.current_visitors import read_window

router = APIRouter(prefix="/v1", tags=["queries"])

ERRORS: dict[int | str, dict[str, Any]] = {
    **export.CSV_RESPONSE,
    **{code: QUERY_ERRORS[code] for code in (401, 403, 422, 429)},
    503: {
        "model": ErrorResponse,
        "description": "Redis or Kafka is down (the speed layer's minutes, or whether they cover the "
        "window, cannot be read), or the worker is serving its limit of requests; see Retry-After.",
    },
}


@router.get(
    "/current-visitors",
    response_model=CurrentVisitorsResponse,
    responses=ERRORS,
    openapi_extra=query_openapi(CurrentVisitorsParams),
    summary="Unique visitors of a site or page over the last minutes of event time",
)
async def current_visitors_route(request: Request, q: CurrentVisitorsQueryDep) -> Response:
    """The union of the speed layer's per-minute visitors over the current UTC minute and the
    `minutes` before it: exact while the minutes are small, else an HLL estimate with 95% bounds;
    no number, and `covered: false` with the reason, when the speed layer has not counted the log
    up to a moment ago."""
    services: Services = request.app.state.services
    settings = services.settings
    timeout_s = settings.api_redis_timeout_ms / 1000

    async def read(view: str, key: str, minutes: Any) -> Any:
        return await read_window(services.redis, view, key, minutes, timeout_s)

    answer = await current_visitors.answer(
        q, read, services.kafka.appended_from, settings.current_visitors_lag_s
    )
    return export.respond_record(request, render.current_visitors(answer), "current-visitors", ("visitors",))
