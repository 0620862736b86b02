"""Fixtures of the serving tests: platforms with a served generation, on the real services.

- ``served``: one Spark batch generation over generated traffic, plus realtime views of the
  traffic that came after its cut (written like the speed layer writes them). Session-scoped:
  a batch run costs seconds, and these tests only read.
- ``bare``: a served generation without any batch views (opened and published through the
  registry, no Spark), for API tests that write events and read them back from realtime views.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from pymongo import MongoClient

from batch_layer.job import BatchJob
from config.settings import Settings
from contract import TimeBounds, decode
from generations.registry import Generation, GenerationRegistry
from ingest.topics import log_end_offsets
from speed_layer.job import SpeedJob
from tests.integration.conftest import isolated_platform, produce, traffic
from tests.integration.test_ingest_kafka import consume_all
from tests.serving_support import Logged

WIDE = TimeBounds(max_future=timedelta(days=1), max_past=timedelta(days=3650))


def read_log(settings: Settings) -> list[Logged]:
    """Every event of the platform's topic with its partition and offset."""
    return [
        Logged(m.partition(), m.offset(), decode(m.value(), WIDE))
        for m in consume_all(settings, settings.events_topic)
    ]


def redis_of(settings: Settings) -> redis.Redis:
    return redis.Redis(host=settings.redis_host, port=settings.redis_port, db=settings.redis_db)


@dataclass
class Served:
    settings: Settings
    generation: Generation
    logged: list[Logged]
    """Every valid event in the log, with its position."""

    @property
    def cut(self) -> dict[int, int]:
        return self.generation.cut

    @property
    def below_cut(self) -> list[Any]:
        return [x.event for x in self.logged if x.offset < self.cut.get(x.partition, 0)]

    @property
    def events(self) -> list[Any]:
        return [x.event for x in self.logged]


@pytest.fixture(scope="session")
def served(stack: Settings, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with isolated_platform(stack, tmp_path_factory.mktemp("served"), redis_db=5) as settings:
        produce(settings, traffic(seed=11, total=4_000, span_hours=30))
        job = BatchJob(settings, spark)
        try:
            job.run()
            generation = job.registry.served()
        finally:
            job.close()
        assert generation is not None
        # Traffic after the cut: late and duplicate events included, counted by the speed layer.
        produce(settings, traffic(seed=12, total=1_200, span_hours=3, late_fraction=0.1))
        SpeedJob(settings, spark).run(available_now=True)
        yield Served(settings, generation, read_log(settings))


def publish_empty_generation(settings: Settings) -> Generation:
    """A served generation with no batch views (cut at the current log end), without Spark."""
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_url)
    r = redis_of(settings)
    try:
        registry = GenerationRegistry(client[settings.mongo_db], r, lambda: log_end_offsets(settings))
        gen = registry.open("full")
        gen.day_map = {"page": {}, "site": {}}
        gen.finished_at = datetime.now(UTC)
        registry.publish(gen)
        return gen
    finally:
        client.close()
        r.close()


@pytest.fixture(scope="module")
def bare(stack: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with isolated_platform(stack, tmp_path_factory.mktemp("bare"), redis_db=6) as settings:
        publish_empty_generation(settings)
        yield settings
