"""POST /api/event: page views from web pages, sent by the official Plausible tracker.

Public by nature (a browser on any visitor's machine posts it, with no key): what restricts it is
the configured sites and their origins (api.collect.collector). The answer carries CORS headers
for an allowed origin, so the tracker's callback sees the status.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from api import render
from api.collect import COLLECT_PATH
from api.collect.payload import CollectAnswer, TrackerEvent
from api.deps import CollectorDep
from api.events import read_body
from api.schemas import ErrorResponse, ValidationErrorResponse

router = APIRouter(tags=["collect"])
REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "The tracker sends it as `text/plain` (a request that needs no CORS preflight); "
        "the body is read as JSON whatever its declared type.",
        "content": {"application/json": {"schema": TrackerEvent.model_json_schema()}},
    }
}


def _cors(origin: str | None) -> dict[str, str]:
    if origin is None:
        return {}
    return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}


@router.post(
    COLLECT_PATH,
    status_code=202,
    response_model=CollectAnswer,
    responses={
        403: {"model": ErrorResponse, "description": "A site or an origin that is not collected here."},
        413: {"model": ErrorResponse, "description": "Body above LAMBDA_COLLECT_MAX_BODY_BYTES."},
        422: {
            "model": ValidationErrorResponse,
            "description": "Not the tracker's payload; nothing produced.",
        },
        503: {"model": ErrorResponse, "description": "Kafka or the salt store did not answer in time."},
    },
    openapi_extra=REQUEST_BODY,
    summary="Collect a page view from a web page (Plausible tracker)",
)
async def collect_event(request: Request, collector: CollectorDep) -> render.JsonBytes:
    """A page view becomes a contract event (id, receive time, visitor id, country) and is produced
    to the events topic; any other event is dead-lettered with its reason. 202 once Kafka has it."""
    origin = request.headers.get("origin")
    body = await read_body(request, collector.settings.collect_max_body_bytes)
    answer = await collector.collect(
        body,
        request.client.host if request.client else None,
        request.headers.get("x-forwarded-for"),
        request.headers.get("user-agent"),
        origin,
    )
    return render.json_response(answer.model_dump(), 202, _cors(origin))


@router.options(COLLECT_PATH, include_in_schema=False)
async def collect_preflight(request: Request, collector: CollectorDep) -> Response:
    """A page's own code may post JSON (a CORS preflight first); the tracker posts text/plain."""
    origin = request.headers.get("origin")
    if origin is None or not collector.origin_allowed(origin):
        return Response(status_code=403)
    headers = {
        **_cors(origin),
        "Access-Control-Allow-Methods": "POST",
        "Access-Control-Allow-Headers": "Content-Type",
        "Access-Control-Max-Age": "600",
    }
    return Response(status_code=204, headers=headers)
