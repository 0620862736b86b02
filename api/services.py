"""What the app holds for its lifetime: the settings, the query engine and the clients it shares.

Built once per process in :mod:`api.app`'s lifespan and kept on ``app.state``; the dependencies of
:mod:`api.deps` hand its parts to the routes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from redis.asyncio import Redis

from api.answer_cache import AnswerCache
from api.auth import Authenticator
from api.collect.collector import Collector
from api.events import EventIngest
from api.kafka import KafkaProbe
from api.metrics import ApiMetrics
from api.ratelimit import RateLimiter
from config.settings import Settings
from serving_layer import QueryEngine
from serving_layer.filters import FilterService
from stores.manifest import ManifestReader


@dataclass
class Services:
    """Everything the app holds for its lifetime (built in api.app's lifespan)."""

    settings: Settings
    engine: QueryEngine
    answers: AnswerCache
    """The series queries' rendered answers, reused while their realtime state is current."""
    ingest: EventIngest
    kafka: KafkaProbe
    metrics: ApiMetrics
    manifest: ManifestReader
    """The master dataset's manifest, for the status."""
    redis: Redis
    """The realtime reader's client, for the status' reads beside the engine's snapshot."""
    auth: Authenticator
    rate: RateLimiter
    close_stores: Callable[[], Awaitable[None]]
    """Close the stores' clients (at the end of the app's lifespan)."""
    collect: Collector
    """POST /api/event's work: the tracker's payload to an acknowledged record."""
    filters: FilterService | None = None
    """POST /v2/query's work: combined filters over the filter table, or today's views."""
