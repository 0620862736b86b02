"""What the app holds for its lifetime: the settings, the query engine and the clients it shares.

Built once per process in :mod:`api.app`'s lifespan and kept on ``app.state``; the dependencies of
:mod:`api.deps` hand its parts to the routes.
"""

from __future__ import annotations

from dataclasses import dataclass

from pymongo import AsyncMongoClient
from redis.asyncio import Redis

from api.auth import Authenticator
from api.events import EventIngest
from api.kafka import KafkaProbe
from api.metrics import ApiMetrics
from api.ratelimit import RateLimiter
from config.settings import Settings
from serving_layer import QueryEngine


@dataclass
class Services:
    """Everything the app holds for its lifetime (built in api.app's lifespan)."""

    settings: Settings
    engine: QueryEngine
    ingest: EventIngest
    kafka: KafkaProbe
    metrics: ApiMetrics
    mongo: AsyncMongoClient[dict[str, object]]
    redis: Redis
    auth: Authenticator
    rate: RateLimiter
