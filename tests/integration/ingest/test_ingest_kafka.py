"""Ingest into the real Kafka: exactly the valid events on `events`, exactly the rejects on the DLQ."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Message, TopicPartition

from config.settings import Settings
from contract import encode
from contract.codec import bounds_from
from ingest.generator import GeneratorConfig, TrafficGenerator
from ingest.pipeline import ingest
from ingest.producer import DLQ_REASON_HEADER, DLQ_SOURCE_HEADER, EventProducer
from ingest.testing import InMemorySink
from ingest.topics import (
    admin_client,
    delete_topics,
    ensure_topics,
    log_end_offsets,
    log_start_offsets,
    offsets_for_time,
    watermarks,
)
from tests.conftest import ROOT


@pytest.fixture
def topics(stack: Settings, unique: str) -> Iterator[Settings]:
    settings = stack.model_copy(update={"events_topic": f"t.events.{unique}", "dlq_topic": f"t.dlq.{unique}"})
    ensure_topics(settings)
    yield settings
    delete_topics(settings, [settings.events_topic, settings.dlq_topic])


def consume_all(settings: Settings, topic: str) -> list[Message]:
    """Every record of a topic, read up to the high watermark of each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": f"test-{topic}",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = log_end_offsets(settings, topic=topic)
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        out: list[Message] = []
        remaining = {p for p, end in ends.items() if end > 0}
        while remaining:
            msg = consumer.poll(10)
            assert msg is not None, f"timed out reading {topic}; still waiting on partitions {remaining}"
            assert msg.error() is None, msg.error()
            out.append(msg)
            partition = msg.partition() or 0
            if (msg.offset() or 0) + 1 >= ends[partition]:
                remaining.discard(partition)
        return out
    finally:
        consumer.close()


def test_topics_are_created_with_log_append_time(topics: Settings) -> None:
    from confluent_kafka.admin import ConfigResource

    admin = admin_client(topics)
    meta = admin.list_topics(timeout=10).topics
    assert len(meta[topics.events_topic].partitions) == topics.topic_partitions
    resource = ConfigResource(ConfigResource.Type.TOPIC, topics.events_topic)
    config = admin.describe_configs([resource])[resource].result(10)
    assert config["message.timestamp.type"].value == "LogAppendTime"
    assert config["retention.ms"].value == str(topics.topic_retention_ms)
    assert ensure_topics(topics) == {topics.events_topic: "exists", topics.dlq_topic: "exists"}


def test_generated_events_land_exactly_once_and_rejects_in_the_dlq(topics: Settings) -> None:
    now = datetime.now(UTC)
    config = GeneratorConfig(total=30_000, seed=42, now=now, duplicate_fraction=0.05, malformed_fraction=0.01)
    bounds = bounds_from(topics)

    # The oracle: the same records through the in-memory sink.
    expected = InMemorySink()
    ingest(TrafficGenerator(config), expected, source="oracle", bounds=bounds)

    generator = TrafficGenerator(config)
    stats = ingest(generator, EventProducer(topics), source="generate", bounds=bounds)
    n_valid, n_bad = generator.stats.valid, generator.stats.malformed
    assert (stats.sent, stats.rejected, stats.failed) == (n_valid, n_bad, 0)
    assert generator.stats.duplicates > 1000 and n_bad > 200

    events = consume_all(topics, topics.events_topic)
    assert len(events) == n_valid
    assert Counter(m.value() for m in events) == Counter(encode(e) for e in expected.events)
    # keyed by visitor: all of one visitor's events sit on one partition, in order
    partitions_of: dict[bytes, set[int]] = {}
    for m in events:
        assert m.key() == orjson.loads(m.value())["visitor_id"].encode()
        assert m.timestamp()[0] == TIMESTAMP_LOG_APPEND_TIME
        partitions_of.setdefault(m.key(), set()).add(m.partition())
    assert all(len(p) == 1 for p in partitions_of.values())

    rejects = consume_all(topics, topics.dlq_topic)
    assert len(rejects) == n_bad
    got = Counter((m.value(), dict(m.headers())[DLQ_REASON_HEADER].decode()) for m in rejects)
    assert got == Counter((d.payload, d.reason) for d in expected.dead_letters)
    assert all(dict(m.headers())[DLQ_SOURCE_HEADER] == b"generate" for m in rejects)


def test_replay_cli_produces_valid_lines_and_dead_letters_the_rest(topics: Settings, tmp_path: Path) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        orjson.dumps(
            {"event_id": f"r{i}", "ts": now, "visitor_id": f"v{i % 7}", "url": f"https://r.example/{i}"}
        )
        for i in range(500)
    ]
    lines += [
        b"{not json",
        b'{"event_id":"x","ts":"' + now.encode() + b'","visitor_id":"v","url":"gopher://x"}',
    ]
    path = tmp_path / "replay.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")

    env = {"LAMBDA_EVENTS_TOPIC": topics.events_topic, "LAMBDA_DLQ_TOPIC": topics.dlq_topic}
    result = subprocess.run(
        [sys.executable, "-m", "ingest", "replay", str(path)],
        cwd=ROOT,
        env={**__import__("os").environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "500" in result.stdout

    assert sorted(
        orjson.loads(m.value())["event_id"] for m in consume_all(topics, topics.events_topic)
    ) == sorted(f"r{i}" for i in range(500))
    rejects = consume_all(topics, topics.dlq_topic)
    assert [m.value() for m in rejects] == lines[500:]
    reasons = [dict(m.headers())[DLQ_REASON_HEADER].decode() for m in rejects]
    assert reasons[0].startswith("event: Invalid JSON") and reasons[1].startswith("url: scheme")


def test_offsets_from_the_admin_client_mean_what_the_consumer_said(topics: Settings) -> None:
    """log_start/log_end/offsets_for_time (AdminClient.list_offsets) against the consumer's own
    answers: the watermarks, and offsets_for_times (first record at or after a time, else none)."""

    def burst(seed: int) -> int:
        generated = TrafficGenerator(GeneratorConfig(total=400, seed=seed, malformed_fraction=0.0))
        return ingest(generated, EventProducer(topics), source="test", bounds=bounds_from(topics)).sent

    first = burst(3)
    time.sleep(0.05)
    between_ms = int(time.time() * 1000)
    time.sleep(0.05)
    second = burst(4)

    ends = log_end_offsets(topics)
    assert sum(ends.values()) == first + second and set(ends) == set(range(topics.topic_partitions))
    assert log_start_offsets(topics) == dict.fromkeys(ends, 0)
    assert watermarks(topics, 10) == {p: (0, end) for p, end in ends.items()}

    consumer = Consumer({"bootstrap.servers": topics.kafka_bootstrap, "group.id": "offsets-oracle"})
    try:
        for ts in (0, between_ms, between_ms + 3_600_000):
            asked = [TopicPartition(topics.events_topic, p, ts) for p in ends]
            said = {int(tp.partition or 0): tp.offset for tp in consumer.offsets_for_times(asked, timeout=10)}
            expected = {p: o if o >= 0 else ends[p] for p, o in said.items()}
            assert offsets_for_time(topics, ts) == expected, ts
    finally:
        consumer.close()
    assert sum(offsets_for_time(topics, between_ms).values()) == first
    assert offsets_for_time(topics, between_ms + 3_600_000) == ends
