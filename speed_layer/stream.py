"""The speed layer's query: Kafka `events`, parsed with the contract, each event once.

Spark reads the next offset range of `events` (at most ``speed_max_offsets_per_trigger`` records:
backpressure), parses it with the contract and drops duplicates by ``event_id`` within a window of
**log-append time** (``withWatermark`` on the Kafka timestamp, then
``dropDuplicatesWithinWatermark``). Event time plays no part in the stateful operator, so a late
event (old event time, new arrival) is never dropped; it counts in its own event-time bucket.
Each micro-batch then goes to ``foreachBatch`` (:meth:`speed_layer.job.SpeedJob.process`).

Why duplicates straddling a cut count once: Kafka hands Spark each partition in offset order and
the dedup shuffle keeps each map task's order, so the copy that survives is the earliest one; a
producer keys a visitor's events to one partition, so an event and its re-sends share a partition.
If the earliest copy is below a generation's cut, the batch views of that generation count it
and the filter on the cut (:func:`at_or_past`) keeps it out of the realtime views.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from config.settings import Settings
from contract.codec import bounds_from
from contract.spark_schema import INVALID_COLUMN, parse_kafka_records
from generations.model import Offsets
from generations.registry import GenerationRegistry
from ingest.topics import offsets_for_time

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

QUERY_NAME = "speed-layer"
DEDUP_COLUMN = "_dedup"
LOG_COLUMNS = ("kafka_partition", "kafka_offset")


def read_events(
    spark: SparkSession, settings: Settings, start: Offsets | None, columns: Sequence[str]
) -> DataFrame:
    """Parsed, deduplicated events of `events`, with their partition and offset."""
    s = settings
    topic = s.events_topic
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", s.kafka_bootstrap)
        .option("subscribe", topic)
        .option(
            "startingOffsets",
            "earliest" if start is None else json.dumps({topic: {str(p): o for p, o in start.items()}}),
        )
    )
    if s.speed_max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(s.speed_max_offsets_per_trigger))
    parsed = parse_kafka_records(reader.load(), bounds_from(s))
    return deduplicated(parsed, columns, s.speed_dedup_window_s)


STATE_STORE_CONF = {
    # The dedup state holds one key per event of the window: RocksDB keeps it off the JVM heap (a
    # checkpoint's state store provider is fixed when the checkpoint is created).
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    # A micro-batch's state changes go to a changelog file instead of a RocksDB checkpoint each.
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # The total row count is only a progress metric, and RocksDB keeps it by reading every key
    # before writing it. Without it the dedup of a 500K-event micro-batch took 4.2 s instead of
    # 4.9 s (five micro-batches of one backlog, medians; docs/speed-floor.md).
    "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false",
}
"""The state store the dedup runs on (set by :func:`use_state_store`)."""


def use_state_store(spark: SparkSession) -> None:
    """Make ``spark``'s stateful operators use :data:`STATE_STORE_CONF` (the speed layer's query,
    and whatever measures or warms up the same operator)."""
    for key, value in STATE_STORE_CONF.items():
        spark.conf.set(key, value)


def start_query(
    spark: SparkSession,
    settings: Settings,
    start: Offsets | None,
    columns: Sequence[str],
    process: Callable[[DataFrame, int], None],
    available_now: bool = False,
) -> StreamingQuery:
    """Start the query: each micro-batch of :func:`read_events` goes to ``process``, every
    ``speed_trigger_s`` or, with ``available_now``, until the log end is reached.

    ``start`` applies to a fresh checkpoint only; an existing one resumes where it stopped.
    """
    use_state_store(spark)
    writer = (
        read_events(spark, settings, start, columns)
        .writeStream.queryName(QUERY_NAME)
        .foreachBatch(process)
        .option("checkpointLocation", settings.speed_checkpoint_uri)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{settings.speed_trigger_s} seconds")
    return writer.start()


def at_or_past(cut: Offsets) -> Column:
    """Rows whose offset is at or past ``cut`` (a partition absent from the cut starts at 0)."""
    from pyspark.sql import functions as F

    if not cut:
        return F.lit(True)
    threshold = F.lit(0)
    for partition, offset in sorted(cut.items()):
        threshold = F.when(F.col("kafka_partition") == partition, F.lit(offset)).otherwise(threshold)
    return F.col("kafka_offset") >= threshold


def starting_offsets(
    settings: Settings, registry: GenerationRegistry, active: dict[int, Offsets]
) -> Offsets | None:
    """Where a fresh stream starts: early enough to count every active generation from its cut,
    and one dedup window earlier still, so re-sends of events just below a cut are recognised.

    None means the start of the log (generation 0 counts everything).
    """
    starts: list[Offsets] = []
    for gen, cut in active.items():
        g = registry.get(gen)
        if gen == 0 or g is None or not cut:
            return None
        since_ms = int(g.started_at.timestamp() * 1000) - settings.speed_dedup_window_s * 1000
        seeded = offsets_for_time(settings, since_ms)
        starts.append({p: min(o, seeded.get(p, o)) for p, o in cut.items()})
    if not starts:
        return None
    return {p: min(s.get(p, 0) for s in starts) for p in set().union(*starts)}


def deduplicated(parsed: DataFrame, columns: Sequence[str], window_s: int) -> DataFrame:
    """The parsed stream with each event once within ``window_s`` of log-append time, keeping only
    ``columns`` (what the views read) and what the dead-letter path needs."""
    from pyspark.sql import functions as F

    valid = F.col(INVALID_COLUMN).isNull()
    # An invalid record has no trustworthy event_id: it gets a key of its own and is never
    # taken for a duplicate.
    dedup_key = F.when(valid, F.col("event_id")).otherwise(
        F.concat(F.lit("invalid:"), F.col("kafka_partition"), F.lit(":"), F.col("kafka_offset"))
    )
    # Only what the views and the dead-letter path need crosses the dedup shuffle.
    return (
        parsed.select(
            *columns,
            *LOG_COLUMNS,
            "log_time",
            INVALID_COLUMN,
            F.when(valid, F.lit(None)).otherwise(F.col("_raw")).alias("_raw"),
            dedup_key.alias(DEDUP_COLUMN),
        )
        .withWatermark("log_time", f"{window_s} seconds")
        .dropDuplicatesWithinWatermark([DEDUP_COLUMN])
    )
