"""The rate limit per API key: ``LAMBDA_API_RATE_LIMIT`` requests per key and worker, counted by
the ``limits`` library (a sliding window counter in the worker's memory: two counters per key).

Counted per worker: with N uvicorn workers a key may make up to N times the limit. Requests
without a key (open mode, loopback only) are not limited.
"""

from __future__ import annotations

import math
import time

from fastapi import HTTPException
from limits import parse
from limits.storage import MemoryStorage
from limits.strategies import SlidingWindowCounterRateLimiter


class RateLimited(HTTPException):
    def __init__(self, limit: str, retry_after: int) -> None:
        super().__init__(
            429,
            f"over the rate limit of {limit} per API key (LAMBDA_API_RATE_LIMIT); retry in {retry_after} s",
            headers={"Retry-After": str(retry_after)},
        )


class RateLimiter:
    def __init__(self, limit: str) -> None:
        self.text = limit
        self.item = parse(limit)
        self._limiter = SlidingWindowCounterRateLimiter(MemoryStorage())

    def hit(self, key: str) -> None:
        """Counts one request of ``key``; 429 with Retry-After once the key is over its limit."""
        if not self._limiter.hit(self.item, key):
            reset = self._limiter.get_window_stats(self.item, key).reset_time
            raise RateLimited(self.text, max(1, math.ceil(reset - time.time())))
