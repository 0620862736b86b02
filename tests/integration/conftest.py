"""Fixtures for tests on the real services: an isolated platform per test, one Spark session."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from confluent_kafka import KafkaException
from datasketches import hll_sketch
from pymongo import MongoClient
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from config.settings import Settings
from contract import PageView
from contract.codec import bounds_from
from generations.model import Offsets
from ingest.generator import GeneratorConfig, TrafficGenerator
from ingest.pipeline import RawRecord, ingest
from ingest.producer import EventProducer
from ingest.testing import InMemorySink
from ingest.topics import delete_topics, ensure_topics, log_end_offsets
from stores.mongo.writer import MongoBatchWriter
from tests.oracle import Recount


class LogEnd:
    """The events topic's end offsets as a generation registry reads them, moved by the test."""

    def __init__(self) -> None:
        self.end: Offsets = {0: 0, 1: 0}

    def __call__(self) -> Offsets:
        return dict(self.end)


@contextlib.contextmanager
def empty_redis_db(settings: Settings, db: int) -> Iterator[redis.Redis]:
    """A client of Redis database ``db`` of the test stack, emptied before and after."""
    client = redis.Redis(host=settings.redis_host, port=settings.redis_port, db=db)
    client.flushdb()
    try:
        yield client
    finally:
        client.flushdb()
        client.close()


@contextlib.contextmanager
def isolated_platform(stack: Settings, root: Path, redis_db: int, **overrides: Any) -> Iterator[Settings]:
    """Own topics, database, master dataset and Redis db; removed afterwards."""
    unique = uuid.uuid4().hex[:10]
    settings = stack.model_copy(
        update={
            "events_topic": f"t.events.{unique}",
            "dlq_topic": f"t.dlq.{unique}",
            "mongo_db": f"t_{unique}",
            "master_path": (root / "master").as_uri(),
            "filter_table_path": (root / "filters").as_uri(),
            "redis_db": redis_db,
            "retire_grace_s": 0.0,
            "speed_checkpoint_path": (root / "speed-checkpoint").as_uri(),
            **overrides,
        }
    )
    r = redis.Redis(host=settings.redis_host, port=settings.redis_port, db=redis_db)
    r.flushdb()
    ensure_topics(settings)
    _wait_for_leaders(settings)
    try:
        yield settings
    finally:
        delete_topics(settings, [settings.events_topic, settings.dlq_topic])
        client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_url)
        client.drop_database(settings.mongo_db)
        client.close()
        with contextlib.suppress(redis.RedisError):
            r.flushdb()
        r.close()


def _wait_for_leaders(settings: Settings, timeout: float = 30.0) -> None:
    """A new topic answers offset requests only once its partitions have leaders (on a loaded
    machine its metadata may first say it is unknown: ingest.topics raises a RuntimeError)."""
    Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(0.2),
        retry=retry_if_exception_type((KafkaException, RuntimeError)),
        reraise=True,
    )(log_end_offsets, settings)


@pytest.fixture
def platform(stack: Settings, tmp_path: Path) -> Iterator[Settings]:
    """Settings of a fresh, isolated platform, with a speed layer tuned to short micro-batches."""
    with isolated_platform(
        stack, tmp_path, redis_db=1, speed_trigger_s=0.5, speed_max_offsets_per_trigger=4000
    ) as settings:
        yield settings


def traffic(seed: int, total: int, span_hours: float = 50.0, **overrides: Any) -> TrafficGenerator:
    """Generated traffic with every irregularity turned up: duplicates, late and out-of-order
    events, malformed records."""
    options: dict[str, Any] = {
        "urls": 300,
        "visitors": 5_000,
        "duplicate_fraction": 0.05,
        "late_fraction": 0.03,
        "out_of_order_fraction": 0.1,
        "malformed_fraction": 0.005,
        **overrides,
    }
    return TrafficGenerator(
        GeneratorConfig(total=total, seed=seed, now=datetime.now(UTC), span_hours=span_hours, **options)
    )


def platform_env(settings: Settings) -> dict[str, str]:
    """Environment that makes a subprocess (a CLI under test) use exactly this platform's settings."""
    return {**os.environ, **settings.to_env()}


def produce(settings: Settings, records: Iterable[RawRecord]) -> list[PageView]:
    """Produce records through the real ingest path; returns the valid events (the oracle's input)."""
    materialized = list(records)
    bounds = bounds_from(settings)
    expected = InMemorySink()
    ingest(materialized, expected, source="oracle", bounds=bounds)
    stats = ingest(materialized, EventProducer(settings), source="test", bounds=bounds)
    assert stats.failed == 0 and stats.sent == len(expected.events)
    return expected.events


def served_documents(settings: Settings) -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
    """view -> (key, day) -> document, as the served generation sees them."""
    from generations.registry import GenerationRegistry
    from stores.mongo.generations import MongoGenerationStore
    from stores.redis.handshake import RedisHotCopy

    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_url)
    try:
        db = client[settings.mongo_db]
        r = redis.Redis(host=settings.redis_host, port=settings.redis_port, db=settings.redis_db)
        served = GenerationRegistry(MongoGenerationStore(db), RedisHotCopy(r), lambda: {}).served()
        assert served is not None, "no generation is served"
        store = MongoBatchWriter(db, settings.mongo_url)
        return {
            view: {(d["key"], d["day"]): d for d in store.read_all(view, days)}
            for view, days in served.day_map.items()
        }
    finally:
        client.close()


def assert_matches_oracle(
    documents: dict[str, dict[tuple[str, str], dict[str, Any]]], expected: Recount
) -> None:
    """Every stored value equals the recount: counts exactly, sketches within 3 standard errors."""
    for view, buckets in expected.items():
        docs = documents[view]
        assert set(docs) == set(buckets), f"{view}: keys differ: {set(docs) ^ set(buckets)}"
        for ident, b in buckets.items():
            d = docs[ident]
            assert (d["pv"], d["uv"]) == (b.pv, len(b.visitors)), (view, ident)
            assert d["h_pv"] == b.hours_pv, (view, ident)
            assert d["h_uv"] == [len(v) for v in b.hours_visitors], (view, ident)
            assert_sketch_covers(d["sk"], len(b.visitors))
            for hour, visitors in enumerate(b.hours_visitors):
                if visitors:
                    assert_sketch_covers(d["h_sk"][hour], len(visitors))
                else:
                    assert d["h_sk"][hour] is None


def assert_sketch_covers(raw: bytes, exact: int) -> None:
    sketch = hll_sketch.deserialize(bytes(raw))
    assert sketch.get_lower_bound(3) <= exact <= sketch.get_upper_bound(3), (
        sketch.get_lower_bound(3),
        exact,
        sketch.get_upper_bound(3),
    )


def realtime_documents(settings: Settings, gen: int) -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
    """view -> (key, day) -> {pv, h_pv, sk, h_sk} of one generation's realtime hashes."""
    from stores.redis import keys

    r = redis.Redis(host=settings.redis_host, port=settings.redis_port, db=settings.redis_db)
    out: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    try:
        for raw_key in r.scan_iter(match=keys.realtime_pattern(gen), count=1000):
            name = raw_key.decode()
            suffix = name.removeprefix(keys.generation_prefix(gen))
            if "#" in name or suffix.startswith(keys.FILTERS_SUFFIX):  # sets, rankings, filter rows
                continue
            view, _, rest = suffix.partition(":")
            day, _, key = rest.partition("|")
            h = {k.decode(): v for k, v in r.hgetall(raw_key).items()}
            out.setdefault(view, {})[(key, day)] = {
                "pv": int(h.get(keys.PV, 0)),
                "h_pv": [int(h.get(keys.hour_field(keys.PV, i), 0)) for i in range(24)],
                "sk": h.get(keys.SKETCH),
                "h_sk": [h.get(keys.hour_field(keys.SKETCH, i)) for i in range(24)],
                **{m: int(h.get(m, 0)) for m in keys.VISIT_FIELDS},
                "h_visits": [
                    tuple(int(h.get(keys.hour_field(m, i), 0)) for m in keys.VISIT_FIELDS) for i in range(24)
                ],
            }
    finally:
        r.close()
    return out


def assert_realtime_matches(
    documents: dict[str, dict[tuple[str, str], dict[str, Any]]], expected: Recount
) -> None:
    """Realtime values equal the recount of the events past the cut: counts exactly, sketches within
    their bounds."""
    for view, buckets in expected.items():
        docs = documents.get(view, {})
        assert set(docs) == set(buckets), f"{view}: keys differ: {sorted(set(docs) ^ set(buckets))[:10]}"
        for ident, b in buckets.items():
            d = docs[ident]
            assert d["pv"] == b.pv and d["h_pv"] == b.hours_pv, (view, ident, d["pv"], b.pv)
            assert_sketch_covers(d["sk"], len(b.visitors))
            for hour, visitors in enumerate(b.hours_visitors):
                assert (d["h_sk"][hour] is not None) == bool(visitors), (view, ident, hour)


def assert_merged_matches(settings: Settings, expected: Recount) -> None:
    """The served generation's batch views plus its realtime views equal the recount of every event:
    counts exactly, the union of the two sketches within its bounds."""
    from stores.redis import keys
    from views.sketches import union_bytes

    r = redis.Redis(host=settings.redis_host, port=settings.redis_port, db=settings.redis_db)
    pointer = keys.decode_served(r.get(keys.SERVED))
    r.close()
    batch = served_documents(settings) if pointer.gen > 0 else {}
    realtime = realtime_documents(settings, pointer.gen)
    for view, buckets in expected.items():
        b_docs, r_docs = batch.get(view, {}), realtime.get(view, {})
        assert set(b_docs) | set(r_docs) == set(buckets), f"{view}: keys differ"
        for ident, b in buckets.items():
            bd, rd = b_docs.get(ident), r_docs.get(ident)
            pv = (bd["pv"] if bd else 0) + (rd["pv"] if rd else 0)
            h_pv = [(bd["h_pv"][h] if bd else 0) + (rd["h_pv"][h] if rd else 0) for h in range(24)]
            assert (pv, h_pv) == (b.pv, b.hours_pv), (view, ident, pv, b.pv, pointer.gen)
            merged = union_bytes([bd["sk"] if bd else None, rd["sk"] if rd else None])
            assert merged is not None
            assert_sketch_covers(merged, len(b.visitors))


def assert_merged_visits_match(settings: Settings, events: Iterable[PageView]) -> None:
    """The served generation's batch visits plus its realtime visits (deltas, retractions included)
    equal the reference sessioniser's visits of ``events`` (first copies), bucket for bucket and
    hour for hour, and no bucket of the served generation is flagged."""
    from stores.redis import keys
    from stores.redis.visit_state import flags_key
    from tests.oracle_visits import combine, compare_recounts, sum_rows, visit_recount

    r = redis.Redis(host=settings.redis_host, port=settings.redis_port, db=settings.redis_db)
    pointer = keys.decode_served(r.get(keys.SERVED))
    flags = r.smembers(flags_key(pointer.gen))
    r.close()
    assert not flags, f"generation {pointer.gen} flags {sorted(flags)}"
    batch = served_documents(settings) if pointer.gen > 0 else {}
    realtime = realtime_documents(settings, pointer.gen)

    def rows(docs: dict[str, dict[tuple[str, str], dict[str, Any]]]) -> Iterator[dict[str, Any]]:
        for view, by_ident in docs.items():
            for (key, day), d in by_ident.items():
                hours = [
                    {"hour": hour, **dict(zip(keys.VISIT_FIELDS, values, strict=True))}
                    for hour, values in enumerate(d.get("h_visits") or ())
                ]
                yield {
                    "view": view,
                    "key": key,
                    "day": day,
                    **{m: d.get(m) for m in keys.VISIT_FIELDS},
                    "hours": hours,
                }

    got = combine(sum_rows(rows(batch)), sum_rows(rows(realtime)))
    problems = compare_recounts(visit_recount(events, settings.session_gap_s), got)
    assert not problems, f"generation {pointer.gen}: " + "\n".join(problems[:30])


# The serving tests' fixtures (platforms with a served generation) live in their own module,
# imported last because it uses the helpers above.
from tests.integration.serving_fixtures import bare, served  # noqa: E402, F401
