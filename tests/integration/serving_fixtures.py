"""Fixtures of the serving tests: platforms with a served generation, on the real services.

- ``served``: one Spark batch generation over generated traffic, plus realtime views of the
  traffic that came after its cut (written like the speed layer writes them). Session-scoped:
  a batch run costs seconds, and these tests only read.
- ``bare``: a served generation without any batch views (opened and published through the
  registry, no Spark), for API tests that write events and read them back from realtime views.

:class:`StoreBackend` is the serving suite's backend (tests.serving_suite) on MongoDB and Redis:
it writes the oracle's views (tests.serving_support.generation_views) through the stores' write
halves the batch and speed layers use (stores.mongo.writer, stores.redis.sink), and queries them
through their read halves.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from pymongo import AsyncMongoClient, MongoClient

from batch_layer.job import BatchJob
from config.settings import Settings
from contract import TimeBounds, decode
from generations.model import Generation
from generations.registry import GenerationRegistry
from ingest.topics import log_end_offsets
from serving_layer.model import SpeedCommit
from speed_layer.job import SpeedJob
from stores.batch_views import BatchReader, Entry
from stores.mongo.codec import (
    collection_name,
    rank_document_id,
    rank_documents,
    ranking_from_chunks,
)
from stores.mongo.generations import MongoGenerationStore
from stores.mongo.reader import MongoBatchReader
from stores.mongo.writer import MongoBatchWriter
from stores.realtime_views import RealtimeReader
from stores.redis import keys
from stores.redis.handshake import RedisHotCopy
from stores.redis.reader import RedisRealtimeReader, connect
from stores.redis.sink import RedisRealtimeSink
from tests.integration.conftest import isolated_platform, produce, traffic
from tests.integration.ingest.test_ingest_kafka import consume_all
from tests.serving_support import GenerationViews, Logged, ServingBackend, generation_views

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
        registry = GenerationRegistry(
            MongoGenerationStore(client[settings.mongo_db]),
            RedisHotCopy(r),
            lambda: log_end_offsets(settings),
        )
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


def closed_port() -> int:
    """A local port nothing listens on: a store "down" for the readers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextlib.asynccontextmanager
async def store_readers(
    settings: Settings, *, batch_down: bool = False, realtime_down: bool = False
) -> AsyncIterator[tuple[BatchReader, RealtimeReader]]:
    """The API's readers of ``settings``' MongoDB and Redis (either one at a closed port if asked)."""
    dead = f"mongodb://127.0.0.1:{closed_port()}/?serverSelectionTimeoutMS=500&connectTimeoutMS=500"
    redis_settings = settings.model_copy(update={"redis_port": closed_port()}) if realtime_down else settings
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(dead if batch_down else settings.mongo_url)
    redis_client = connect(redis_settings)
    try:
        yield MongoBatchReader(mongo, settings.mongo_db, 64 << 20), RedisRealtimeReader(redis_client)
    finally:
        await redis_client.aclose()
        await mongo.close()


class StoreBackend(ServingBackend):
    """The serving suite's backend on MongoDB (FerretDB) and Redis; every load a new generation."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_url)
        self.db = self.client[settings.mongo_db]
        self.redis = redis_of(settings)
        self.gen = 0

    def __enter__(self) -> StoreBackend:
        return self

    def __exit__(self, *_: object) -> None:
        self.client.close()
        self.redis.close()

    def load(self, cut: dict[int, int], logged: Sequence[Logged]) -> int:
        self.gen += 1
        v = generation_views(self.gen, cut, logged)
        self._write_batch(v)
        self._write_realtime(v)
        return self.gen

    def _write_batch(self, v: GenerationViews) -> None:
        """Through the batch layer's writer. The suite's sketches are small (a few dozen visitors),
        so the keys of odd length keep their hour sketches apart whatever their size: every case
        reads both layouts on the real store."""
        gen = v.info.gen
        apart = [row for row in v.batch_rows if len(row["key"]) % 2]
        inline = [row for row in v.batch_rows if not len(row["key"]) % 2]
        url = self.settings.mongo_url
        entries: dict[str, list[Entry]] = {}
        for writer, rows in (
            (MongoBatchWriter(self.db, url, inline_max=-1), apart),
            (MongoBatchWriter(self.db, url), inline),
        ):
            for view, written in writer.write(gen, rows, v.days).entries.items():
                entries.setdefault(view, []).extend(written)
        rankings = MongoBatchWriter(self.db, url)
        for view, written in entries.items():
            rankings.write_rankings(view, gen, written, v.days[view])
        registry = MongoGenerationStore(self.db)
        registry.insert(v.info)
        assert v.info.served_at is not None
        registry.point_served(gen, v.info.served_at)

    def _write_realtime(self, v: GenerationViews) -> None:
        """Through the speed layer's sink, flushed in the transaction that commits."""
        gen = v.info.gen
        sink = RedisRealtimeSink(self.redis)
        for row in v.realtime_rows:
            sink.add(gen, row["view"], row)
        sink.prepare()
        with self.redis.pipeline(transaction=True) as pipe:
            sink.flush(pipe)
            pipe.sadd(keys.realtime_views_key(gen), keys.VIEWS_SENTINEL, *v.counted)
            pipe.set(keys.SERVED, keys.encode_served(keys.Served(gen, v.info.cut)))
            pipe.set(keys.SPEED_COMMIT, keys.encode_commit(v.commit))
            pipe.execute()

    def readers(
        self, *, batch_down: bool, realtime_down: bool
    ) -> AbstractAsyncContextManager[tuple[BatchReader, RealtimeReader]]:
        return store_readers(self.settings, batch_down=batch_down, realtime_down=realtime_down)

    def commit(self) -> SpeedCommit:
        return keys.decode_commit(self.redis.get(keys.SPEED_COMMIT))

    def set_commit(self, commit: SpeedCommit) -> None:
        self.redis.set(keys.SPEED_COMMIT, keys.encode_commit(commit))

    def forget_counted_view(self, gen: int, view: str | None) -> None:
        name = keys.realtime_views_key(gen)
        if view is None:
            self.redis.delete(name)
        else:
            marks = [m for m in self.redis.smembers(name) if m.decode().startswith(f"{view}@")]
            self.redis.srem(name, *marks)

    def forget_batch_view(self, gen: int, view: str) -> None:
        self.db["generations"].update_one({"_id": gen}, {"$unset": {f"day_map.{view}": ""}})

    def add_to_ranking(self, view: str, gen: int, day: str, key: str, pageviews: int) -> None:
        target = self.db[collection_name(view, gen)]
        first = target.find_one({"_id": rank_document_id(day)})
        assert first is not None
        ids = [rank_document_id(day, i) for i in range(first["chunks"])]
        ranking = ranking_from_chunks([target.find_one({"_id": i}) for i in ids])
        assert ranking is not None
        target.delete_many({"_id": {"$in": ids}})
        target.insert_many(rank_documents(day, [*ranking, (key, pageviews)]))
