"""The MongoDB clients, made in one place from the settings: the jobs' (synchronous) and the API's
(asynchronous)."""

from __future__ import annotations

from typing import Any

from pymongo import AsyncMongoClient, MongoClient

from config.settings import Settings

SERVER_SELECTION_TIMEOUT_MS = 5000
"""A job whose MongoDB is not there fails within this, rather than waiting pymongo's 30 s."""


def connect(settings: Settings, timeout_ms: int = SERVER_SELECTION_TIMEOUT_MS) -> MongoClient[dict[str, Any]]:
    """A synchronous client of the settings' MongoDB (the batch and speed jobs', the status' repair)."""
    return MongoClient(settings.mongo_url, serverSelectionTimeoutMS=timeout_ms)


def connect_async(
    settings: Settings, read_timeout_s: float | None = None
) -> AsyncMongoClient[dict[str, Any]]:
    """An asynchronous client of the settings' MongoDB that fails within the API's timeout when
    the server is not there; with ``read_timeout_s``, connecting is bounded by that timeout too and
    every read by ``read_timeout_s`` (the API's; without: the keys command's)."""
    timeout_ms = settings.api_mongo_timeout_ms
    if read_timeout_s is None:
        return AsyncMongoClient(settings.mongo_url, serverSelectionTimeoutMS=timeout_ms)
    return AsyncMongoClient(
        settings.mongo_url,
        serverSelectionTimeoutMS=timeout_ms,
        connectTimeoutMS=timeout_ms,
        socketTimeoutMS=int(read_timeout_s * 1000),
    )
