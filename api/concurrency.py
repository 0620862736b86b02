"""The concurrency limit per worker: at most ``LAMBDA_API_MAX_CONCURRENCY`` requests in flight; one
more is answered at once with 503 and Retry-After instead of queueing work the worker cannot do.

A pure ASGI middleware (no thread, no per-request task): a counter, since a worker is one event
loop. The liveness probe is never refused. A path whose requests mostly wait rather than work (the
collection endpoint awaits Kafka's acknowledgement) has a limit of its own, in a second instance
that counts only ``paths`` while the first one leaves them out (``exempt``).
"""

from __future__ import annotations

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

EXEMPT = frozenset({"/healthz"})


class ConcurrencyLimit:
    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        retry_after_s: int,
        setting: str = "LAMBDA_API_MAX_CONCURRENCY",
        exempt: frozenset[str] = EXEMPT,
        paths: frozenset[str] | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.exempt = exempt
        self.paths = paths
        """Only these paths are counted (None: every path not exempt)."""
        self.in_flight = 0
        self.refused = 0
        self._body = orjson.dumps(
            {"detail": f"this worker is serving its limit of {limit} requests ({setting})"}
        )
        self._headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self._body)).encode()),
            (b"retry-after", str(retry_after_s).encode()),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] != "http"
            or path in self.exempt
            or (self.paths is not None and path not in self.paths)
        ):
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            self.refused += 1
            await send({"type": "http.response.start", "status": 503, "headers": self._headers})
            await send({"type": "http.response.body", "body": self._body})
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
