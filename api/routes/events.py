"""POST /v1/events."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from api import render
from api.deps import ServicesDep, WriterDep
from api.events import parse_events, read_body, require_json
from api.routes.responses import GUARD_ERRORS
from api.schemas import ErrorResponse, EventsAccepted, ValidationErrorResponse
from contract import PageView

router = APIRouter(prefix="/v1", tags=["events"])

_EVENT_SCHEMA = PageView.model_json_schema()
_EVENT_EXAMPLE = {
    "event_id": "e-42",
    "ts": "2026-11-21T06:10:00Z",
    "visitor_id": "v-7",
    "url": "https://shop.example.com/cart",
    "country": "DE",
}
REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "anyOf": [
                        {"$ref": "#/components/schemas/PageView"},
                        {"type": "array", "items": {"$ref": "#/components/schemas/PageView"}, "minItems": 1},
                    ]
                },
                "examples": {
                    "one": {"summary": "one event", "value": _EVENT_EXAMPLE},
                    "batch": {
                        "summary": "a batch",
                        "value": [_EVENT_EXAMPLE, {**_EVENT_EXAMPLE, "event_id": "e-43"}],
                    },
                },
            }
        },
    }
}


@router.post(
    "/events",
    status_code=202,
    response_model=EventsAccepted,
    responses={
        **GUARD_ERRORS,
        413: {"model": ErrorResponse, "description": "Body or event count above the limits."},
        415: {"model": ErrorResponse, "description": "The body is not declared `application/json`."},
        422: {"model": ValidationErrorResponse, "description": "Invalid events; nothing was produced."},
        503: {
            "model": ErrorResponse,
            "description": "Kafka did not acknowledge (resending is safe), or the worker is serving its "
            "limit of requests.",
        },
    },
    openapi_extra=REQUEST_BODY,
    summary="Ingest one page view or a batch",
)
async def post_events(request: Request, services: ServicesDep, _: WriterDep) -> render.JsonBytes:
    """Validated with the event contract and produced to Kafka (idempotent producer, acks=all).
    All or nothing: one invalid event rejects the request with every broken field listed. Events
    are deduplicated by `event_id` downstream, so resending after an error is safe."""
    require_json(request)
    body = await read_body(request, services.settings.api_max_body_bytes)
    accepted = await services.ingest.produce(parse_events(body, services.settings))
    return render.json_response(render.accepted(accepted), status_code=202)
