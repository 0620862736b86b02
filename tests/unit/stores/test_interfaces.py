"""Every backend implements the store interfaces it claims, both halves: checked by mypy (strict)
on these assignments, and at run time by the suite that each backend runs (tests/serving_suite.py)."""

from __future__ import annotations

from typing import Any

from generations.storage import GenerationStore, HotCopy
from stores.batch_views import BatchReader, BatchViewWriter
from stores.lease import LeaseStore
from stores.manifest import ManifestReader, ManifestStore
from stores.memory import (
    MemoryBatchStore,
    MemoryLeaseStore,
    MemoryRealtimeSink,
    MemoryRealtimeStore,
    MemoryTransaction,
)
from stores.mongo.generations import MongoGenerationStore
from stores.mongo.lease import MongoLeaseStore
from stores.mongo.manifest import MongoManifest, MongoManifestReader
from stores.mongo.reader import MongoBatchReader
from stores.mongo.writer import MongoBatchWriter
from stores.realtime_views import RealtimeReader, RealtimeSink
from stores.redis.handshake import RedisHotCopy
from stores.redis.reader import RedisRealtimeReader
from stores.redis.sink import RedisRealtimeSink


def _mongo_and_redis(
    writer: MongoBatchWriter,
    reader: MongoBatchReader,
    generations: MongoGenerationStore,
    manifest: MongoManifest,
    sink: RedisRealtimeSink,
    realtime: RedisRealtimeReader,
) -> tuple[Any, ...]:
    """Never called: its assignments are the check."""
    checked: tuple[
        BatchViewWriter, BatchReader, GenerationStore, ManifestStore, RealtimeSink[Any], RealtimeReader
    ] = (writer, reader, generations, manifest, sink, realtime)
    return checked


def test_the_memory_twin_implements_both_halves() -> None:
    batch, realtime = MemoryBatchStore(), MemoryRealtimeStore()
    writer: BatchViewWriter = batch
    reader: BatchReader = batch
    sink: RealtimeSink[MemoryTransaction] = realtime.sink()
    realtime_reader: RealtimeReader = realtime
    assert isinstance(sink, MemoryRealtimeSink)
    assert (writer, reader, realtime_reader) == (batch, batch, realtime)


def _more_mongo_and_redis(
    leases: MongoLeaseStore, manifest: MongoManifestReader, hot: RedisHotCopy
) -> tuple[Any, ...]:
    """Never called: its assignments are the check."""
    checked: tuple[LeaseStore, ManifestReader, HotCopy] = (leases, manifest, hot)
    return checked


def test_the_memory_lease_store_is_a_lease_store() -> None:
    store: LeaseStore = MemoryLeaseStore()
    assert store.read() is None
