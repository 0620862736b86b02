"""The jobs' MongoDB client, made in one place from the settings."""

from __future__ import annotations

from typing import Any

from pymongo import MongoClient

from config.settings import Settings

SERVER_SELECTION_TIMEOUT_MS = 5000
"""A job whose MongoDB is not there fails within this, rather than waiting pymongo's 30 s."""


def connect(settings: Settings) -> MongoClient[dict[str, Any]]:
    """A synchronous client of the settings' MongoDB (the batch and speed jobs')."""
    return MongoClient(settings.mongo_url, serverSelectionTimeoutMS=SERVER_SELECTION_TIMEOUT_MS)
