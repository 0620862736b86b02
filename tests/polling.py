"""Waiting in tests for something another process does: poll until a probe gives a value."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], timeout: float = 20.0, every: float = 0.05) -> T:
    """The first value of ``probe`` that is not None within ``timeout`` seconds (else RetryError)."""
    value: T | None = Retrying(
        stop=stop_after_delay(timeout), wait=wait_fixed(every), retry=retry_if_result(lambda v: v is None)
    )(probe)
    assert value is not None
    return value
