"""Both layers drop exactly the duplicates of the one rule (contract.duplicates), on real Kafka.

A short window (3 s) lets the test put re-sends on both sides of it. The log holds: originals;
re-sends in their original's partition with other fields (another URL, an event time a day
earlier); re-sends of the same bytes to another partition; a rejected record carrying the id of a
later valid one; and, after the window has passed, re-sends in the original's partition. The
speed layer (generation 0, from the log start) and the batch layer (its first generation) must
each equal the recount of the records the rule's reference keeps.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from batch_layer.job import BatchJob
from config.settings import Settings
from contract import PageView, encode
from speed_layer.job import SpeedJob
from tests.integration.conftest import (
    assert_matches_oracle,
    assert_realtime_matches,
    isolated_platform,
    realtime_documents,
    served_documents,
)
from tests.oracle import first_copies, read_log, recount

WINDOW_S = 3


def event(i: int, **changes: Any) -> PageView:
    fields: dict[str, Any] = {
        "event_id": f"ev-{i}",
        "ts": datetime.now(UTC) - timedelta(minutes=5),
        "url": f"https://shop.example.com/p/{i % 5}",
        "visitor_id": f"v{i % 7}",
        "referrer": None,
        "user_agent": "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)",
        "country": "DE",
    }
    return PageView(**{**fields, **changes})


def send(settings: Settings, records: list[tuple[bytes, int]]) -> None:
    """Records straight to `events`, each to the partition given."""
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap})
    for payload, partition in records:
        producer.produce(settings.events_topic, payload, partition=partition)
    assert producer.flush(30) == 0


def test_the_batch_and_the_speed_layer_drop_exactly_the_duplicates_of_the_rule(
    stack: Settings, tmp_path: Path, spark: Any
) -> None:
    with isolated_platform(stack, tmp_path, redis_db=1, speed_dedup_window_s=WINDOW_S) as platform:
        parts = platform.topic_partitions
        originals = [event(i) for i in range(40)]
        send(platform, [(encode(e), i % parts) for i, e in enumerate(originals)])
        yesterday = datetime.now(UTC) - timedelta(days=1)
        send(
            platform,
            # In the original's partition, other fields: duplicates (the first copy counts).
            [
                (encode(event(i, url="https://shop.example.com/other", ts=yesterday)), i % parts)
                for i in range(10)
            ]
            # The same bytes in another partition: a new event to both layers.
            + [(encode(originals[i]), (i + 1) % parts) for i in range(10, 15)]
            # A rejected record with the id of a valid one that follows: the valid one counts.
            + [(b'{"event_id":"ev-new","visitor_id":"v1"}', 0), (encode(event(99, event_id="ev-new")), 0)],
        )
        time.sleep(WINDOW_S + 1.0)
        # Past the window, in the original's partition: counted again.
        send(platform, [(encode(originals[i]), i % parts) for i in range(20, 25)])

        log = read_log(platform.kafka_bootstrap, platform.events_topic)
        kept = first_copies(log, window_s=WINDOW_S)
        assert len(kept) == 40 + 5 + 1 + 5
        expected = recount((r.event for r in kept if r.event), deduplicate=False)

        SpeedJob(platform, spark).run(available_now=True)
        assert_realtime_matches(realtime_documents(platform, 0), expected)
        assert_no_exchange_before_the_mark(platform, spark)

        job = BatchJob(platform, spark)
        try:
            job.run()
        finally:
            job.close()
        assert_matches_oracle(served_documents(platform), expected)


def assert_no_exchange_before_the_mark(settings: Settings, spark: Any) -> None:
    """The speed layer's micro-batch plan (the Kafka scan, the contract, the mark) has no exchange:
    each partition's rows reach the dedup in the order the scan reads them."""
    from contract.codec import bounds_from
    from contract.spark_schema import parse_kafka_records
    from ingest.topics import log_end_offsets
    from speed_layer.dedup import ScanDedup

    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("subscribe", settings.events_topic)
        .load()
    )
    ends = log_end_offsets(settings)
    marked, _ = ScanDedup(spark, settings).mark(
        parse_kafka_records(records, bounds_from(settings)), dict.fromkeys(ends, 0), ends
    )
    plan = marked._jdf.queryExecution().executedPlan().toString()
    assert "lambda_dedup_mark" in plan and "Exchange" not in plan, plan
