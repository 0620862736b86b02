"""The window of log before given offsets, read back through the contract: what the dedup rule
(:mod:`contract.duplicates`) needs to know at an offset, for the batch layer's absorb (the records
before the absorbed range) and the speed layer's rebuild of its state (the records before a
micro-batch).

For each partition, the window starts at the first record appended at or after the log-append time
of the record at the given offset, less the dedup window and :data:`~contract.duplicates.GRACE_MS`
(Kafka's time index, ``offsets_for_times``), and ends before the offset. Every record in it is
judged by the contract exactly as the layers judge it (:func:`parse_kafka_records`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from config.settings import Settings
from contract.codec import bounds_from
from contract.duplicates import GRACE_MS
from contract.spark_schema import INVALID_COLUMN, parse_kafka_records

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


class WindowLost(RuntimeError):
    """Retention deleted records the window needs: no dedup decision could be proven exact."""


@dataclass(frozen=True)
class LogWindow:
    ends: dict[int, int]
    """Per partition, the offset the window ends before (the offset asked about)."""
    begins: dict[int, int]
    """Per partition, the window's first offset."""
    floors_ms: dict[int, int]
    """Per partition, the log-append time from which the window holds every record."""

    def read(self, spark: SparkSession, settings: Settings) -> DataFrame | None:
        """The window's records the contract accepts (``kafka_partition``, ``kafka_offset``,
        ``log_time``, ``event_id``), None if every partition's window is empty."""
        from pyspark.sql import functions as F

        ranges = {p: (a, self.ends[p]) for p, a in self.begins.items() if a < self.ends[p]}
        if not ranges:
            return None
        return read_log(spark, settings, ranges).select(
            "kafka_partition",
            "kafka_offset",
            "log_time",
            F.when(F.col(INVALID_COLUMN).isNull(), F.col("event_id")).alias("event_id"),
        )


def read_log(spark: SparkSession, settings: Settings, ranges: dict[int, tuple[int, int]]) -> DataFrame:
    """The records of `events` in ``ranges`` (partition -> [start, end)), read as a batch and
    parsed by the contract (:func:`parse_kafka_records`); retention having deleted any of them
    fails the read."""
    topic = settings.events_topic
    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("assign", json.dumps({topic: sorted(ranges)}))
        .option("startingOffsets", json.dumps({topic: {str(p): a for p, (a, _) in ranges.items()}}))
        .option("endingOffsets", json.dumps({topic: {str(p): b for p, (_, b) in ranges.items()}}))
        .option("failOnDataLoss", "true")
        .load()
    )
    return parse_kafka_records(records, bounds_from(settings))


def window_before(settings: Settings, offsets: dict[int, int], window_ms: int) -> LogWindow:
    """The window before ``offsets`` (partition -> offset with a record at or after it)."""
    from confluent_kafka import Consumer, TopicPartition

    topic = settings.events_topic
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": "lambda-dedup-window",
            "enable.auto.commit": False,
        }
    )
    try:
        first = _first_times(consumer, topic, offsets)
        floors = {p: t - window_ms - GRACE_MS for p, t in first.items()}
        asked = [TopicPartition(topic, p, floors[p]) for p in sorted(floors)]
        found = {tp.partition: tp.offset for tp in consumer.offsets_for_times(asked, timeout=10.0)}
        begins: dict[int, int] = {}
        for p, at in sorted(offsets.items()):
            if p not in first:
                begins[p] = at
                continue
            low, _ = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10.0)
            begin = min(found[p] if found[p] >= 0 else at, at)
            if begin <= low and low > 0 and at > low:
                raise WindowLost(
                    f"partition {p}: the dedup window before offset {at} starts before offset {low}, "
                    "the oldest the log still holds: raise the topic's retention"
                )
            begins[p] = begin
        return LogWindow(ends=dict(offsets), begins=begins, floors_ms={p: floors.get(p, 0) for p in offsets})
    finally:
        consumer.close()


def _first_times(consumer: object, topic: str, offsets: dict[int, int]) -> dict[int, int]:
    """Log-append time of the record at each offset (partitions with none yet are left out)."""
    from confluent_kafka import Consumer, TopicPartition

    assert isinstance(consumer, Consumer)
    wanted = {}
    for p, at in offsets.items():
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10.0)
        if at < high:
            wanted[p] = at
    if not wanted:
        return {}
    consumer.assign([TopicPartition(topic, p, at) for p, at in wanted.items()])
    times: dict[int, int] = {}
    for _ in range(60):
        for msg in consumer.consume(len(wanted), timeout=1.0):
            part = msg.partition()
            if msg.error() is not None or part is None or part in times:
                continue
            times[part] = msg.timestamp()[1]
            consumer.pause([TopicPartition(topic, part)])
        if len(times) == len(wanted):
            return times
    raise RuntimeError(f"could not read the records at {wanted} of {topic}")
