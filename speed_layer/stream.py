"""The speed layer's query: Kafka `events`, parsed with the contract.

Spark reads the next offset range of `events` (at most ``speed_max_offsets_per_trigger`` records:
backpressure) and parses it with the contract; each micro-batch then goes to ``foreachBatch``
(:meth:`speed_layer.job.SpeedJob.process`), which marks duplicates in the same scan
(:mod:`speed_layer.dedup`, the rule of :mod:`contract.duplicates`): no stateful operator, no
checkpointed state store. Nothing between the Kafka scan and the mark reorders rows, so each
partition's rows reach it in offset order.

Why duplicates straddling a cut count once: a producer keys a visitor's events to one partition,
so an event and its re-sends share a partition, and the rule marks every copy after the first
within the window. If the first copy is below a generation's cut, the batch views of that
generation count it and the filter on the cut (:func:`at_or_past`) keeps it out of the realtime
views; the copies at or past the cut are marked because the dedup state at the stream's start is
rebuilt from the window of log before it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from config.settings import Settings
from contract.codec import bounds_from
from contract.log_window import read_log
from contract.spark_schema import INVALID_COLUMN, parse_kafka_records
from generations.model import Offsets
from generations.registry import GenerationRegistry
from ingest.topics import offsets_for_time

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

QUERY_NAME = "speed-layer"
LOG_COLUMNS = ("kafka_partition", "kafka_offset")


def read_events(
    spark: SparkSession, settings: Settings, start: Offsets | None, columns: Sequence[str]
) -> DataFrame:
    """Parsed records of `events` with their partition, offset and log-append time, keeping only
    ``columns`` (what the views read) and what the dedup and the dead-letter path need."""
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
    return _selected(parse_kafka_records(reader.load(), bounds_from(s)), columns)


def read_range(
    spark: SparkSession, settings: Settings, ranges: dict[int, tuple[int, int]], columns: Sequence[str]
) -> DataFrame:
    """What :func:`read_events` gives, for the offsets ``ranges`` (partition -> [start, end)) of
    `events` read as a batch: a range of the log read again (speed_layer.visit_rebuild)."""
    return _selected(read_log(spark, settings, ranges), columns)


def _selected(parsed: DataFrame, columns: Sequence[str]) -> DataFrame:
    from pyspark.sql import functions as F

    valid = F.col(INVALID_COLUMN).isNull()
    return parsed.select(
        *columns,
        *LOG_COLUMNS,
        "log_time",
        INVALID_COLUMN,
        F.when(valid, F.lit(None)).otherwise(F.col("_raw")).alias("_raw"),
    )


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
    and one dedup window earlier still, so that the records just below a cut go through the stream
    too (their dead letters included); re-sends of them at or past the cut are recognised by the
    dedup state, which is rebuilt from the window of log before the stream's first offsets.

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


def batch_offsets(spark: SparkSession, checkpoint_uri: str, topic: str, batch_id: int) -> Offsets:
    """End offsets of ``batch_id`` from a query's checkpoint (its offset log, written before the
    batch runs, so it is there for the batch being processed and every earlier one still kept)."""
    text = _read_text(spark, f"{checkpoint_uri.rstrip('/')}/offsets/{batch_id}")
    sources = json.loads(text.strip().splitlines()[-1])
    return {int(p): int(o) for p, o in sources[topic].items()}


def initial_offsets(spark: SparkSession, checkpoint_uri: str, topic: str) -> Offsets:
    """Where a query's first batch starts: the Kafka source's initial offsets, which it records in
    the checkpoint before that batch runs."""
    text = _read_text(spark, f"{checkpoint_uri.rstrip('/')}/sources/0/0").replace("\x00", "")
    sources = json.loads(text.strip().splitlines()[-1])
    return {int(p): int(o) for p, o in sources[topic].items()}


def _read_text(spark: SparkSession, uri: str) -> str:
    """A small file through Hadoop's FileSystem, so the checkpoint may live on any supported store."""
    from config.spark import hadoop_path

    fs, path = hadoop_path(spark, uri)
    stream = fs.open(path)
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()
