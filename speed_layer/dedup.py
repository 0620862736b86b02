"""The speed layer's dedup: the rule of :mod:`contract.duplicates`, applied in the Kafka scan.

Each micro-batch's rows go through a JVM function (``lambda_platform.dedup.DuplicateMarker``,
toolchain/contract-udf) in the scan's own task, where Kafka hands them over in offset order per
partition: no exchange, no stateful operator. The state of a partition (per event id, the log-append
time of its last accepted record, in time buckets evicted a bucket at a time) lives in the JVM of
the executor that reads the partition; it is registered nondeterministic, so Spark neither moves
it past a filter nor evaluates it twice in a plan.

A state is a pure function of the log: the accepted records of the window before the micro-batch's
first offset. A task that finds its partition's state elsewhere than at the micro-batch's start (a
fresh JVM after a crash, a replayed micro-batch, a partition read by another executor than before)
throws ``DedupStateMissing``; the job then rebuilds the states (:meth:`ScanDedup.rebuild`: the window
read back through the contract, fed in offset order to ``WindowFeed`` in the executors that read
those partitions) and runs the micro-batch again. Nothing reached Redis before, so the retry is
safe, and the verdicts of a range already applied are kept, so a range evaluated twice gets the same
ones (docs/contract.md).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from config.settings import Settings
from contract.duplicates import GRACE_MS
from contract.log_window import window_before
from contract.spark_schema import INVALID_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

DUPLICATE_COLUMN = "_duplicate"
MISSING = "DedupStateMissing"
"""What the error of a task whose partition's state is not at its range's start says."""
REBUILDS = 3
"""Rebuilds a micro-batch may need before the job gives up (a partition read each time by another
executor than the one its state was rebuilt in)."""

T = TypeVar("T")


def counted() -> Column:
    """Whether a marked record (:meth:`ScanDedup.mark`) is a counted page view: accepted by the
    contract and not a duplicate."""
    from pyspark.sql import functions as F

    return F.col(INVALID_COLUMN).isNull() & ~F.coalesce(F.col(DUPLICATE_COLUMN), F.lit(False))


def _spec(triples: dict[int, tuple[int, int]]) -> str:
    return ",".join(f"{p}:{a}:{b}" for p, (a, b) in sorted(triples.items()))


class ScanDedup:
    """The dedup of one streaming query (its checkpoint and topic name its states)."""

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark = spark
        self.settings = settings
        self.window_ms = settings.speed_dedup_window_s * 1000
        self.namespace = f"{settings.speed_checkpoint_uri}|{settings.events_topic}"
        self.rebuild_seconds: list[float] = []

    def _jvm(self) -> Any:
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        return jvm

    def forget(self) -> None:
        """Drop this JVM's states of the query (a new query must not trust an old one's)."""
        self._jvm().lambda_platform.dedup.DedupStates.forget(self.namespace)

    def held(self) -> tuple[int, int]:
        """(fingerprints, bytes of heap) of the query's states in this JVM (local mode: all)."""
        states = self._jvm().lambda_platform.dedup.DedupStates
        return int(states.entries(self.namespace)), int(states.bytes(self.namespace))

    def _udf(self, spark: SparkSession, name: str, function: Any, columns: list[Column]) -> Column:
        """``function`` (a Java UDF4 -> boolean) as a nondeterministic column over ``columns``,
        registered as ``name`` (each registration replaces the last: a column is bound to its
        function when its DataFrame is analysed, so earlier DataFrames keep theirs)."""
        from pyspark.sql import functions as F

        jvm = self._jvm()
        judf = jvm.org.apache.spark.sql.functions.udf(
            function, jvm.org.apache.spark.sql.types.DataTypes.BooleanType
        ).asNondeterministic()
        spark._jsparkSession.udf().register(name, judf)
        return F.call_function(name, *columns)

    @staticmethod
    def _arguments() -> list[Column]:
        from pyspark.sql import functions as F

        accepted = F.col(INVALID_COLUMN).isNull()
        return [
            F.col("kafka_partition"),
            F.col("kafka_offset"),
            F.unix_millis(F.col("log_time")),
            F.when(accepted, F.col("event_id")),
        ]

    def mark(self, batch: DataFrame, starts: dict[int, int], ends: dict[int, int]) -> tuple[DataFrame, Any]:
        """``batch`` (the micro-batch's parsed rows, in the scan's order) with
        :data:`DUPLICATE_COLUMN`, and the marker (for :meth:`rebuild`)."""
        ranges = {p: (starts.get(p, 0), end) for p, end in ends.items()}
        marker = self._jvm().lambda_platform.dedup.DuplicateMarker(
            self.namespace, self.window_ms, GRACE_MS, _spec(ranges)
        )
        column = self._udf(batch.sparkSession, "lambda_dedup_mark", marker, self._arguments())
        return batch.select("*", column.alias(DUPLICATE_COLUMN)), marker

    def rebuild(self, marker: Any, starts: dict[int, int], ends: dict[int, int]) -> None:
        """Rebuild the states of the micro-batch's partitions at ``starts`` from the log."""
        t0 = time.monotonic()
        busy = {p: starts.get(p, 0) for p, end in ends.items() if end > starts.get(p, 0)}
        window = window_before(self.settings, busy, self.window_ms)
        floors = {p: (busy[p], window.floors_ms[p]) for p in busy}
        fed = {p for p in busy if window.begins[p] < busy[p]}
        self.feed(marker, window.read(self.spark, self.settings), floors, fed)
        seconds = time.monotonic() - t0
        self.rebuild_seconds.append(seconds)
        log.info(
            "dedup state rebuilt for partitions %s from %d records of log in %.1f s",
            sorted(busy),
            sum(busy[p] - window.begins[p] for p in busy),
            seconds,
        )

    def feed(
        self, marker: Any, rows: DataFrame | None, floors: dict[int, tuple[int, int]], fed: set[int]
    ) -> None:
        """New states for the partitions of ``floors`` (partition -> (start offset, floor ms)):
        ``rows`` (the window before the starts, in offset order per partition; ``event_id`` null
        for a rejected record) fed to the partitions of ``fed``, the others start empty."""
        from pyspark.sql import functions as F

        if rows is not None and fed:
            spec = _spec({p: floors[p] for p in fed})
            feed = self._jvm().lambda_platform.dedup.WindowFeed(
                self.namespace, self.window_ms, GRACE_MS, spec
            )
            column = self._udf(
                rows.sparkSession, "lambda_dedup_feed", feed, [*self._arguments()[:3], F.col("event_id")]
            )
            rows.select(column).write.format("noop").mode("overwrite").save()
        marker.startEmpty(_spec({p: floors[p] for p in floors if p not in fed}))

    def run(self, marker: Any, starts: dict[int, int], ends: dict[int, int], job: Callable[[], T]) -> T:
        """``job()`` (the micro-batch's Spark job), after rebuilding the states it finds missing."""
        for attempt in itertools.count():
            try:
                return job()
            except Exception as exc:
                if MISSING not in str(exc) or attempt >= REBUILDS:
                    raise
                log.info("dedup state not at the micro-batch's start (%s): rebuilding", _first_line(exc))
                self.rebuild(marker, starts, ends)
        raise AssertionError("unreachable")


def _first_line(exc: Exception) -> str:
    for line in str(exc).splitlines():
        if MISSING in line:
            return line.strip()
    return str(exc).splitlines()[0] if str(exc) else repr(exc)
