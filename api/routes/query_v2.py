"""POST /v2/query: combined filters, in the shape of Plausible's Stats API v2 (docs/query-v2.md)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from api import render
from api.deps import InvalidBody, QueryV2Dep, query_v2_openapi
from api.query_v2 import QueryV2Response, query_v2
from api.routes.responses import GUARD_ERRORS
from api.schemas import ErrorResponse, NotReadyResponse, ValidationErrorResponse
from serving_layer import InvalidQuery
from serving_layer.filters import TooManyRows

router = APIRouter(prefix="/v2", tags=["queries"])

ERRORS: dict[int | str, dict[str, Any]] = {
    **GUARD_ERRORS,
    409: {"model": NotReadyResponse, "description": "The served generation has no filter table yet."},
    422: {
        "model": ValidationErrorResponse,
        "description": "A parameter of the body is invalid (`loc` names it), a visit metric under combined "
        "filters, or the scan would read more than LAMBDA_API_FILTER_MAX_ROWS rows or its realtime rows "
        "take more than LAMBDA_API_FILTER_MAX_REALTIME_MB to read (`ctx`).",
    },
    429: {
        "model": ErrorResponse,
        "description": "Over the key's rate limit, or the worker's scans and their queue are full "
        "(LAMBDA_API_FILTER_CONCURRENCY, LAMBDA_API_FILTER_QUEUE); see Retry-After.",
    },
    504: {"model": ErrorResponse, "description": "The scan ran out of LAMBDA_API_FILTER_TIMEOUT_S."},
}


@router.post(
    "/query",
    response_model=QueryV2Response,
    responses=ERRORS,
    openapi_extra=query_v2_openapi(),
    summary="Page views and visitors under any combination of filters (Plausible Stats API v2)",
)
async def query(request: Request, q: QueryV2Dep) -> Response:
    """Answered by today's views when they can (no filter, or one `is` filter of one value), else by
    a scan of the filter table: page views and visitors, both exact, merged across the batch and the
    realtime parts by the generation's cut. The answer says which (`path`)."""
    services = request.app.state.services
    try:
        answer = await services.filters.answer(q)
    except TooManyRows:
        raise
    except InvalidQuery as exc:  # everything a query names is in its body
        raise InvalidBody(exc.param, exc.problem) from None
    return render.JsonBytes(query_v2(answer))
