"""Fixtures for tests on the real services: an isolated platform per test, one Spark session."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from datasketches import hll_sketch
from pymongo import MongoClient

from batch_layer.store import BatchViewStore
from config.settings import Settings
from contract import PageView
from contract.codec import bounds_from
from ingest.pipeline import RawRecord, ingest
from ingest.producer import EventProducer
from ingest.testing import InMemorySink
from ingest.topics import delete_topics, ensure_topics
from tests.oracle import Recount


@pytest.fixture
def platform(stack: Settings, unique: str, tmp_path: Path) -> Iterator[Settings]:
    """Settings of a fresh, isolated platform: own topics, database, master dataset, Redis db."""
    settings = stack.model_copy(
        update={
            "events_topic": f"t.events.{unique}",
            "dlq_topic": f"t.dlq.{unique}",
            "mongo_db": f"t_{unique}",
            "master_path": (tmp_path / "master").as_uri(),
            "redis_db": 1,
            "retire_grace_s": 0.0,
        }
    )
    r = redis.Redis(host=settings.redis_host, port=settings.redis_port, db=settings.redis_db)
    r.flushdb()
    r.close()
    ensure_topics(settings)
    yield settings
    delete_topics(settings, [settings.events_topic, settings.dlq_topic])
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_url)
    client.drop_database(settings.mongo_db)
    client.close()


def platform_env(settings: Settings) -> dict[str, str]:
    """Environment that makes a subprocess (a CLI under test) use this platform."""
    return {
        **os.environ,
        "LAMBDA_EVENTS_TOPIC": settings.events_topic,
        "LAMBDA_DLQ_TOPIC": settings.dlq_topic,
        "LAMBDA_MONGO_DB": settings.mongo_db,
        "LAMBDA_MASTER_PATH": settings.master_path or "",
        "LAMBDA_REDIS_DB": str(settings.redis_db),
        "LAMBDA_RETIRE_GRACE_S": str(settings.retire_grace_s),
    }


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

    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_url)
    try:
        db = client[settings.mongo_db]
        r = redis.Redis(host=settings.redis_host, port=settings.redis_port, db=settings.redis_db)
        served = GenerationRegistry(db, r, lambda: {}).served()
        assert served is not None, "no generation is served"
        store = BatchViewStore(db, settings.mongo_url)
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


# The serving tests' fixtures (platforms with a served generation) live in their own module,
# imported last because it uses the helpers above.
from tests.integration.serving_fixtures import bare, served  # noqa: E402, F401
