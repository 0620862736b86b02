"""The answers every guarded route may give besides its own: no or a wrong key, a key without the
scope or the site, over the key's rate, the worker over its concurrency limit."""

from __future__ import annotations

from typing import Any

from api.schemas import ErrorResponse

GUARD_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "An API key is required, and missing, unknown or revoked."},
    403: {
        "model": ErrorResponse,
        "description": "The key lacks the route's scope, or may not read the site.",
    },
    429: {"model": ErrorResponse, "description": "The key is over its rate limit; see Retry-After."},
    503: {
        "model": ErrorResponse,
        "description": "The worker is serving its limit of requests, or a store is down; see Retry-After.",
    },
}
