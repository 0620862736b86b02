"""The master dataset: every event of the log, immutable, in Parquet, absorbed by offset range.

Layout (stores.parquet.master, which reads it): ``<master>/segments/segment=<id>/event_date=
YYYY-MM-DD/part-*.parquet``. One absorb writes
one segment covering an exact offset range per partition, then commits it in the manifest
(stores.mongo.manifest). Readers only ever read committed segments, so a crash mid-absorb leaves
nothing visible: the half-written directory is ignored and deleted by the next
run, which absorbs the same range again. Nothing rewrites or deletes a committed segment.

Records that do not parse go to ``event_date=invalid`` of their segment with their original bytes,
and to the dead-letter topic: they are part of the log, so they are kept, but no view reads them.

The absorb judges records in two passes. The first recognises in Spark the records in the
canonical form ingest writes (every record ingest produced) and writes every other one, raw, to
``event_date=unjudged``; the second reads only those back, judges them with the contract's own
Python code and appends them to their days (or ``invalid``). Recognised records thus never cross to
a Python worker: one pass with the judging UDF in the plan costs every row the crossing, about a
third of the absorb's parse. A crash between the passes leaves an uncommitted segment, deleted and
absorbed again by the next run.

Duplicates (the rule of :mod:`contract.duplicates`) are found when a segment is absorbed, since
whether a record is one depends only on the records before it in its partition: the segment's
accepted records and those of the window of log before its ranges (read back from Kafka through the
contract, :mod:`contract.log_window`) go through :func:`~contract.duplicates.previous_gap`, and
every record with an earlier copy within the window is written to the segment's ``duplicates``
directory with its gap. Readers drop them (stores.parquet.master.MasterReader.read), so an
incremental run and a full recompute drop the same records whichever days or segments hold their originals.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from config.settings import Settings
from config.spark import hadoop_path
from contract import utc
from contract.codec import bounds_from, reason_field
from contract.duplicates import GAP_COLUMN, is_duplicate, previous_gap
from contract.events import PageView
from contract.log_window import window_before
from contract.spark_schema import INVALID_COLUMN, UNJUDGED, kafka_rows_of, parse_kafka_records
from ingest.topics import record_times
from stores.manifest import Segment, invalid_reasons_total
from stores.parquet.master import DUPLICATES, DUPLICATES_SCHEMA, MasterReader, segment_path, segments_root

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation, SparkSession

    from contract.events import TimeBounds
    from stores.manifest import ManifestStore

log = logging.getLogger(__name__)

INVALID_PARTITION = "invalid"
UNJUDGED_PARTITION = "unjudged"
"""Between the absorb's two passes only: the records the first did not recognise, for the second."""
EVENT_COLUMNS = tuple(name for name in PageView.model_fields if name != "schema_version")
"""The contract's fields as a segment row holds them: the event's own, then ``schema_version``."""


def segment_rows(parsed: DataFrame) -> DataFrame:
    """A segment's rows from the parsed log (``parse_kafka_records``): the events with their log
    position, partitioned by event date; invalid records in the ``invalid`` partition with their
    raw bytes and reason, for the dead-letter topic."""
    from pyspark.sql import functions as F

    valid = F.col(INVALID_COLUMN).isNull()
    return parsed.select(
        *EVENT_COLUMNS,
        "schema_version",
        "kafka_partition",
        "kafka_offset",
        "log_time",
        F.when(valid, F.lit(None)).otherwise(F.col("_raw")).alias("raw"),
        INVALID_COLUMN,
        F.when(valid, F.date_format("ts", "yyyy-MM-dd"))
        .when(F.col(INVALID_COLUMN) == F.lit(UNJUDGED), F.lit(UNJUDGED_PARTITION))
        .otherwise(F.lit(INVALID_PARTITION))
        .alias("event_date"),
    )


class AbsorbError(RuntimeError):
    pass


@dataclass(frozen=True)
class Written:
    """What :func:`write_segment` wrote: records per kind, counted while they were written."""

    records: int
    invalid: int
    days: list[str]


def _counted(rows: DataFrame) -> tuple[DataFrame, Observation]:
    """``rows`` (:func:`segment_rows`) with an observation counting them by kind as they are
    written: the counts come with the write itself, not from reading the segment back."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation()
    kind = F.col("event_date")
    observed = rows.observe(
        observation,
        F.count(F.lit(1)).alias("records"),
        F.count(F.when(kind == INVALID_PARTITION, 1)).alias("invalid"),
        F.count(F.when(kind == UNJUDGED_PARTITION, 1)).alias("unjudged"),
    )
    return observed, observation


def write_segment(spark: SparkSession, records: DataFrame, path: str, window: TimeBounds) -> Written:
    """Judge the Kafka rows ``records`` and write them as a new segment at ``path``, in the two
    passes of the module's docstring: recognised records straight to their days, then the rest,
    read back and judged by the whole contract (usually nothing: ingest wrote every record it
    produced in the canonical form). Returns the records written, counted as they were written."""
    rows, first = _counted(segment_rows(parse_kafka_records(records, window, judge=False)))
    rows.write.partitionBy("event_date").mode("errorifexists").parquet(path)
    counts = first.get
    records_written, invalid = int(counts["records"]), int(counts["invalid"])
    if counts["unjudged"]:
        unjudged = f"{path}/event_date={UNJUDGED_PARTITION}"
        stored = kafka_rows_of(spark.read.parquet(unjudged).withColumnRenamed("raw", "_raw"))
        judged, second = _counted(segment_rows(parse_kafka_records(stored, window)))
        judged.write.partitionBy("event_date").mode("append").parquet(path)
        verdicts = second.get
        if verdicts["records"] != counts["unjudged"]:
            raise AbsorbError(f"{unjudged}: judged {verdicts['records']} of {counts['unjudged']} records")
        invalid += int(verdicts["invalid"])
        fs, directory = hadoop_path(spark, unjudged)
        if not fs.delete(directory, True):
            raise AbsorbError(f"could not delete {unjudged} after judging its records")
    fs, directory = hadoop_path(spark, path)
    days = sorted(
        name.removeprefix("event_date=")
        for status in fs.listStatus(directory)
        if (name := status.getPath().getName()).startswith("event_date=")
        and name.removeprefix("event_date=") not in (INVALID_PARTITION, UNJUDGED_PARTITION)
    )
    return Written(records_written, invalid, days)


def absorb_ranges(
    cut: dict[int, int], absorbed: dict[int, int], log_start: dict[int, int]
) -> dict[int, tuple[int, int]]:
    """The [from, to) offsets of each partition the next segment must hold: from where the master
    dataset ends (or the log starts, for a partition never absorbed) up to the cut.

    Raises AbsorbError if retention deleted offsets that were never absorbed: the master dataset
    would silently miss events, so no view computed from it could be exact.
    """
    lost = lost_ranges(absorbed, log_start)
    if lost:
        spans = ", ".join(f"partition {p}: offsets {a}..{b}" for p, (a, b) in sorted(lost.items()))
        raise AbsorbError(
            f"{spans} were deleted by retention before they were absorbed; raise the topic's retention "
            "or run the batch layer more often. To go on without them (they are lost for good, and "
            "answers covering them will say so): python -m batch_layer accept-gap"
        )
    ranges: dict[int, tuple[int, int]] = {}
    for p, to in sorted(cut.items()):
        start = absorbed.get(p, log_start.get(p, 0))
        if absorbed.get(p) is None and log_start.get(p, 0) > 0:
            log.warning(
                "partition %d starts at offset %d: older events were deleted before any absorb",
                p,
                log_start[p],
            )
        if to > start:
            ranges[p] = (start, to)
    return ranges


def lost_ranges(absorbed: dict[int, int], log_start: dict[int, int]) -> dict[int, tuple[int, int]]:
    """Per partition the absorb has started on, the [from, to) offsets retention deleted before
    they were absorbed."""
    return {p: (absorbed[p], log_start[p]) for p in sorted(absorbed) if log_start.get(p, 0) > absorbed[p]}


class MasterDataset(MasterReader):
    """The manifest (a stores.manifest.ManifestStore) and the files (any Hadoop-compatible file
    system): the read half (stores.parquet.master.MasterReader) with the absorb."""

    def __init__(self, settings: Settings, manifest: ManifestStore) -> None:
        super().__init__(settings.master_uri, settings.speed_dedup_window_s, manifest)
        self.settings = settings

    def invalid_reasons(self) -> dict[str, int]:
        """Invalid records of the whole master dataset per field of their reason: what the batch
        layer has dead-lettered, each record once whatever crashes repeated."""
        return invalid_reasons_total(s.invalid_reasons for s in self.segments())

    # --- absorb ------------------------------------------------------------------------------------
    def absorb(
        self,
        spark: SparkSession,
        gen: int,
        cut: dict[int, int],
        log_start: dict[int, int],
        dead_letter: Callable[[bytes, str, int, int], None],
    ) -> Segment | None:
        """Absorb [absorbed_until, cut) of every partition as one segment; None if nothing is new.

        ``dead_letter(payload, reason, partition, offset)`` receives each record that breaks the
        contract, with the reason ingest would have given; it is called before the segment is
        committed, so a crash in between calls it again for the same records on the next run.
        """
        ranges = absorb_ranges(cut, self.absorbed_until(), log_start)
        if not ranges:
            return None

        segment_id = f"g{gen:06d}-{uuid.uuid4().hex[:8]}"
        path = segment_path(self.root, segment_id)
        topic = self.settings.events_topic
        records = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", self.settings.kafka_bootstrap)
            .option("assign", json.dumps({topic: sorted(ranges)}))
            .option("startingOffsets", json.dumps({topic: {str(p): a for p, (a, _) in ranges.items()}}))
            .option("endingOffsets", json.dumps({topic: {str(p): b for p, (_, b) in ranges.items()}}))
            .option("failOnDataLoss", "true")
            .load()
        )
        written = write_segment(spark, records, path, bounds_from(self.settings))
        reasons: dict[str, int] = {}
        if written.invalid:
            for r in (
                spark.read.parquet(f"{path}/event_date={INVALID_PARTITION}")
                .select("raw", INVALID_COLUMN, "kafka_partition", "kafka_offset")
                .orderBy("kafka_partition", "kafka_offset")
                .collect()
            ):
                reason = r[INVALID_COLUMN]
                reasons[reason_field(reason)] = reasons.get(reason_field(reason), 0) + 1
                dead_letter(bytes(r["raw"]), reason, r["kafka_partition"], r["kafka_offset"])
        expected = sum(b - a for a, b in ranges.values())
        if written.records != expected:
            raise AbsorbError(
                f"segment {segment_id}: read {written.records} records, the offset ranges hold {expected}"
            )
        window_ms = self.settings.speed_dedup_window_s * 1000
        write_duplicates(spark, self.settings, path, written.days, ranges, window_ms)
        return Segment(
            segment_id=segment_id,
            gen=gen,
            path=path,
            ranges=ranges,
            events=written.records - written.invalid,
            invalid=written.invalid,
            days=written.days,
            committed_at=datetime.now(UTC),
            invalid_reasons=reasons,
            dedup_window_ms=window_ms,
        )

    def accept_gap(self, gen: int, log_start: dict[int, int], accepted_by: str) -> Segment | None:
        """Record the offsets retention deleted before they were absorbed as a gap in the manifest,
        so that the next absorb starts after them; None when nothing is lost. The operator's
        explicit decision (``python -m batch_layer accept-gap``): those events are gone for good."""
        lost = lost_ranges(self.absorbed_until(), log_start)
        if not lost:
            return None
        survivors = record_times(self.settings, log_start)
        segment = Segment(
            segment_id=f"gap-{uuid.uuid4().hex[:8]}",
            gen=gen,
            path="",
            ranges=lost,
            events=0,
            invalid=0,
            days=[],
            committed_at=datetime.now(UTC),
            gap={
                "accepted_by": accepted_by,
                "reason": "deleted by the topic's retention before the batch layer absorbed them",
                "records_survive_from": {str(p): t for p, t in survivors.items() if p in lost},
            },
        )
        self.commit(segment)
        log.warning("accepted a gap in the master dataset: %s (by %s)", lost, accepted_by)
        return segment

    def gaps(self) -> list[Segment]:
        return [s for s in self.segments() if s.gap is not None]

    def lost_to_retention(self) -> list[dict[str, Any]]:
        """The accepted gaps as a generation records them for the answers: the lost offsets, who
        accepted them and when, and ``events_before``: the lost records were appended before the
        first one that survives, so their events lie before that plus the contract's future margin
        (the accepting moment stands in for a partition where nothing survived)."""
        margin = timedelta(seconds=self.settings.max_future_seconds)
        lost = []
        for gap in self.gaps():
            assert gap.gap is not None
            survive = [utc.as_utc(t) for t in (gap.gap.get("records_survive_from") or {}).values()]
            appended_before = max([t for t in survive if t is not None], default=utc.as_utc(gap.committed_at))
            lost.append(
                {
                    "offsets": {str(p): [a, b] for p, (a, b) in gap.ranges.items()},
                    "accepted_by": gap.gap.get("accepted_by"),
                    "accepted_at": gap.committed_at,
                    "events_before": appended_before + margin,
                }
            )
        return lost

    def commit(self, segment: Segment) -> None:
        """Make a written segment part of the master dataset (one document insert: atomic)."""
        self.manifest.commit(segment)

    def remove_orphans(self, spark: SparkSession) -> list[str]:
        """Delete segment directories no manifest entry names (left by a crashed absorb)."""
        fs, base = hadoop_path(spark, segments_root(self.root))
        if not fs.exists(base):
            return []
        committed = {s.segment_id for s in self.segments()}
        removed = []
        for status in fs.listStatus(base):
            name = status.getPath().getName()
            if name.removeprefix("segment=") not in committed:
                fs.delete(status.getPath(), True)
                removed.append(name)
        return removed


def write_duplicates(
    spark: SparkSession,
    settings: Settings,
    path: str,
    days: list[str],
    ranges: dict[int, tuple[int, int]],
    window_ms: int,
) -> None:
    """Write the duplicates among the segment at ``path`` (its valid ``days``, absorbed from
    ``ranges``) to its ``duplicates`` directory: records whose last earlier accepted copy in their
    partition, in the segment or the window of log before it, is at most ``window_ms`` older."""
    from pyspark.sql import functions as F

    columns = ["kafka_partition", "kafka_offset", "log_time", "event_id"]
    target = f"{path}/{DUPLICATES}"
    if not days:
        spark.createDataFrame([], DUPLICATES_SCHEMA).write.mode("errorifexists").parquet(target)
        return
    absorbed = spark.read.option("basePath", path).parquet(*[f"{path}/event_date={d}" for d in days])
    rows = absorbed.select(*columns, "event_date")
    window = window_before(settings, {p: a for p, (a, _) in ranges.items()}, window_ms).read(spark, settings)
    if window is not None:
        before = window.where(F.col("event_id").isNotNull())
        rows = rows.unionByName(before.select(*columns, F.lit(None).cast("string").alias("event_date")))
    found = previous_gap(rows).where(
        F.col("event_date").isNotNull() & is_duplicate(F.col(GAP_COLUMN), window_ms)
    )
    found.select("kafka_partition", "kafka_offset", "event_date", GAP_COLUMN).coalesce(1).write.mode(
        "errorifexists"
    ).parquet(target)
