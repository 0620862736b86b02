"""Topic administration: the `events` log and its dead-letter topic.

`events` uses LogAppendTime so that the record timestamp is the broker's arrival time: the speed
layer deduplicates within a window of arrival time, which producers cannot skew (docs/design.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from config.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str]


def topic_specs(settings: Settings) -> list[TopicSpec]:
    return [
        TopicSpec(
            settings.events_topic,
            settings.topic_partitions,
            {
                "message.timestamp.type": "LogAppendTime",
                "retention.ms": str(settings.topic_retention_ms),
                "cleanup.policy": "delete",
            },
        ),
        TopicSpec(
            settings.dlq_topic,
            1,
            {
                "message.timestamp.type": "LogAppendTime",
                "retention.ms": str(settings.dlq_retention_ms),
                "cleanup.policy": "delete",
            },
        ),
    ]


def admin_client(settings: Settings) -> AdminClient:
    return AdminClient({"bootstrap.servers": settings.kafka_bootstrap})


def ensure_topics(settings: Settings, timeout: float = 30.0) -> dict[str, str]:
    """Create the platform's topics where missing; returns ``{topic: "created" | "exists"}``.

    An existing topic with another partition count is reported, not changed: repartitioning the
    log would move visitors between partitions and invalidate every generation's cut.
    """
    admin = admin_client(settings)
    existing = admin.list_topics(timeout=timeout).topics
    result: dict[str, str] = {}
    missing = []
    for spec in topic_specs(settings):
        if spec.name in existing:
            have = len(existing[spec.name].partitions)
            if have != spec.partitions:
                log.warning("topic %s has %d partitions, settings say %d", spec.name, have, spec.partitions)
            result[spec.name] = "exists"
        else:
            missing.append(NewTopic(spec.name, spec.partitions, 1, config=spec.config))
    if missing:
        for name, future in admin.create_topics(missing, operation_timeout=timeout).items():
            future.result(timeout)
            result[name] = "created"
            log.info("created topic %s", name)
    return result


def delete_topics(settings: Settings, names: list[str], timeout: float = 30.0) -> None:
    """Delete topics (tests use their own topic names and clean up after themselves)."""
    admin = admin_client(settings)
    existing = admin.list_topics(timeout=timeout).topics
    names = [n for n in names if n in existing]
    if names:
        for future in admin.delete_topics(names, operation_timeout=timeout).values():
            future.result(timeout)


def watermarks(settings: Settings, timeout: float, topic: str | None = None) -> dict[int, tuple[int, int]]:
    """Per partition of ``topic`` (default `events`): (oldest offset still held, next offset)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "lambda-offsets-probe"})
    try:
        topic = topic or settings.events_topic
        meta = consumer.list_topics(topic, timeout=timeout).topics[topic]
        if meta.error is not None:
            raise RuntimeError(f"topic {topic}: {meta.error}")
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            for p in sorted(meta.partitions)
        }
    finally:
        consumer.close()


def log_end_offsets(settings: Settings, timeout: float = 10.0) -> dict[int, int]:
    """Per partition of `events`, the offset the next record will get (the high watermark)."""
    return {p: high for p, (_, high) in watermarks(settings, timeout).items()}


def log_start_offsets(settings: Settings, timeout: float = 10.0) -> dict[int, int]:
    """Per partition of `events`, the oldest offset still in the log (retention moves it)."""
    return {p: low for p, (low, _) in watermarks(settings, timeout).items()}


def offsets_for_time(settings: Settings, timestamp_ms: int, timeout: float = 10.0) -> dict[int, int]:
    """Per partition of `events`, the first offset appended at or after ``timestamp_ms`` (the log
    end where none is)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "lambda-offsets-probe"})
    try:
        topic = settings.events_topic
        partitions = sorted(consumer.list_topics(topic, timeout=timeout).topics[topic].partitions)
        found = consumer.offsets_for_times(
            [TopicPartition(topic, p, timestamp_ms) for p in partitions], timeout=timeout
        )
        ends = log_end_offsets(settings, timeout)
        return {tp.partition: tp.offset if tp.offset >= 0 else ends[tp.partition] for tp in found}
    finally:
        consumer.close()
