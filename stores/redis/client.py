"""The jobs' Redis client, made in one place from the settings (the API's asynchronous client:
stores.redis.reader.connect)."""

from __future__ import annotations

import redis

from config.settings import Settings

SOCKET_TIMEOUT_S = 10.0
"""A command that has not been answered within this fails (the callers retry or report it)."""


def connect(settings: Settings, timeout_s: float = SOCKET_TIMEOUT_S) -> redis.Redis:
    """A synchronous client of the settings' Redis (the batch and speed jobs', the status' repair)."""
    return redis.Redis.from_url(settings.redis_url, socket_timeout=timeout_s)
