"""Topic administration: the `events` log and its dead-letter topic.

`events` uses LogAppendTime so that the record timestamp is the broker's arrival time: the speed
layer deduplicates within a window of arrival time, which producers cannot skew (docs/design.md).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # OffsetSpec: re-exported, untyped
    AdminClient,
    ConfigResource,
    OffsetSpec,
)
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


# OffsetSpec's factories have no type hints; these are the offsets the platform asks for.
EARLIEST: OffsetSpec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
"""The oldest offset a partition still holds (retention moves it)."""
LATEST: OffsetSpec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
"""The offset the next record of a partition will get (the high watermark)."""


def partition_offsets(admin: AdminClient, topic: str, spec: OffsetSpec, timeout: float) -> dict[int, int]:
    """Per partition of ``topic``, the offset ``spec`` names: EARLIEST, LATEST, or
    ``OffsetSpec.for_timestamp(ms)``: the first record whose timestamp is at or after ms (-1 where
    there is none), as a consumer's ``offsets_for_times`` says. One request, no consumer."""
    meta = admin.list_topics(topic, timeout=timeout).topics[topic]
    if meta.error is not None:
        raise RuntimeError(f"topic {topic}: {meta.error}")
    request = {TopicPartition(topic, p): spec for p in sorted(meta.partitions)}
    futures = admin.list_offsets(request, request_timeout=timeout)
    return {tp.partition: int(future.result(timeout).offset) for tp, future in futures.items()}


def watermarks(settings: Settings, timeout: float, topic: str | None = None) -> dict[int, tuple[int, int]]:
    """Per partition of ``topic`` (default `events`): (oldest offset still held, next offset)."""
    topic = topic or settings.events_topic
    admin = admin_client(settings)
    low = partition_offsets(admin, topic, EARLIEST, timeout)
    high = partition_offsets(admin, topic, LATEST, timeout)
    return {p: (low[p], high[p]) for p in sorted(high)}


def log_end_offsets(settings: Settings, timeout: float = 10.0, topic: str | None = None) -> dict[int, int]:
    """Per partition of ``topic`` (default `events`), the offset the next record will get."""
    return partition_offsets(admin_client(settings), topic or settings.events_topic, LATEST, timeout)


def log_start_offsets(settings: Settings, timeout: float = 10.0) -> dict[int, int]:
    """Per partition of `events`, the oldest offset still in the log (retention moves it)."""
    return partition_offsets(admin_client(settings), settings.events_topic, EARLIEST, timeout)


def offsets_for_time(settings: Settings, timestamp_ms: int, timeout: float = 10.0) -> dict[int, int]:
    """Per partition of `events`, the first offset appended at or after ``timestamp_ms`` (the log
    end where none is)."""
    admin = admin_client(settings)
    topic = settings.events_topic
    found = partition_offsets(admin, topic, OffsetSpec.for_timestamp(timestamp_ms), timeout)
    if all(offset >= 0 for offset in found.values()):
        return found
    ends = partition_offsets(admin, topic, LATEST, timeout)
    return {p: offset if offset >= 0 else ends[p] for p, offset in found.items()}


def record_times(settings: Settings, offsets: dict[int, int], timeout: float = 10.0) -> dict[int, datetime]:
    """The log-append time of the record at each ``partition -> offset`` of `events` (or of the first
    one after it, if retention deleted it meanwhile); partitions with no record to read within
    ``timeout`` are left out."""
    if not offsets:
        return {}
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": "lambda-record-times",
            "enable.auto.commit": False,
        }
    )
    found: dict[int, datetime] = {}
    try:
        consumer.assign([TopicPartition(settings.events_topic, p, o) for p, o in offsets.items()])
        deadline = time.monotonic() + timeout
        while len(found) < len(offsets) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            partition = message.partition()
            if (
                partition is not None
                and partition not in found
                and message.offset() == offsets.get(partition)
            ):
                found[partition] = datetime.fromtimestamp(message.timestamp()[1] / 1000, UTC)
                consumer.pause([TopicPartition(settings.events_topic, partition)])
    finally:
        consumer.close()
    return found


def retention_ms(settings: Settings, timeout: float = 10.0) -> int:
    """The `events` topic's retention.ms as the broker applies it (-1: forever)."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, settings.events_topic)
    admin = admin_client(settings)  # held until the answer is in: a dropped client cancels it
    configs = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
    return int(configs["retention.ms"].value)
