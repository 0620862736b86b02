"""One micro-batch's Spark work: duplicates marked in the scan, the view rows and the visits of
every active generation, the dead letters and the counts.

The micro-batch's rows are marked by the dedup (:mod:`speed_layer.dedup`) in the Kafka scan's task;
an observation on the marked rows counts them (records, invalid, duplicates, the newest log-append
time) and gathers the invalid ones for the dead-letter topic as the rows pass; the accepted, counted
rows are tagged with every active generation whose cut they are at or past and keyed by every
dimension (views.shared_pass.keyed_events).

Three jobs, each over what the one before kept in memory (``localCheckpoint``): the keyed events
(the scan, the contract, the dedup and the keys, once); the visits of the visitor-days they touch,
merged with the visit state (:mod:`speed_layer.visits`); and the shared pass's page views and
sketches per generation summed with the visits' deltas, collected with the visit state's new
values, and beside them the current visitors' rows (speed_layer.current_visitors: each event's
site and page per UTC minute of event time, of every counted record whatever its generation) and,
with ``filter_table`` on, the filter table's rows per generation (speed_layer.filter_rows), which
are split out of the collected Arrow table as a table.
Without visits, a micro-batch of up to ``speed_single_partition_rows`` records is two jobs (the
keyed events, then the shared pass and the current visitors' rows in one task each). A larger one
first materialises the marked rows: the jobs that build the broadcast tables of ``once_per_value``
dimensions (views.shared_pass) would otherwise read the scan again. (Were the scan read twice,
the dedup would answer the second reading with the verdicts of the first: a range's verdicts are
kept.)
"""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from contract.codec import reason_field
from contract.spark_schema import INVALID_COLUMN
from generations.model import Offsets
from ingest.producer import dlq_key
from speed_layer import current_visitors, filter_rows
from speed_layer.dedup import DUPLICATE_COLUMN
from speed_layer.progress import BatchReport
from speed_layer.stream import at_or_past
from speed_layer.visits import Horizon, collected_table, meta_row, signed, visit_rows
from views import sessions
from views.shared_pass import assemble, count_events, keyed_events

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from speed_layer.job import SpeedJob

log = logging.getLogger(__name__)

DLQ_SOURCE = "speed-layer"
TAGS = "_tags"
"""The active generations whose cut a record is at or past."""


class MicroBatch:
    """The Spark side of one micro-batch: :meth:`rows_for` is the committer's ``rows_for``."""

    def __init__(
        self, job: SpeedJob, df: DataFrame, starts: Offsets, ends: Offsets, report: BatchReport
    ) -> None:
        self.job = job
        self.starts = starts
        self.ends = ends
        self.report = report
        self.marked, self.marker = job.dedup.mark(df, starts, ends)
        self.records = sum(max(0, end - starts.get(p, 0)) for p, end in ends.items())
        self._dead_lettered = False
        self._rows: tuple[dict[int, Offsets], list[Any]] | None = None
        self._materialised: list[DataFrame] = []
        self.visit_meta = job.visit_meta()
        """The visit state as committed before this micro-batch (speed_layer.visits.Horizon)."""

    def rows_for(self, active: dict[int, Offsets]) -> list[Any]:
        """The view rows for the ``active`` generations (one Spark job, run again only for another
        set); the first run also fills the report and sends the dead letters (before the commit: a
        crash in between sends them again, under the same keys, rather than losing them)."""
        if self._rows is None or self._rows[0] != active:
            self._rows = (dict(active), self._compute(active))
        return self._rows[1]

    def _compute(self, active: dict[int, Offsets]) -> list[Any]:
        t0 = time.monotonic()
        rebuilt = len(self.job.dedup.rebuild_seconds)
        rows, metrics = self.job.dedup.run(self.marker, self.starts, self.ends, lambda: self._job(active))
        rebuilds = self.job.dedup.rebuild_seconds[rebuilt:]
        if rebuilds:
            self.report.phases["dedup rebuild"] = sum(rebuilds)
        self.report.phases["views"] = self.report.phases.get("views", 0.0) + (
            time.monotonic() - t0 - sum(rebuilds)
        )
        if sessions.counts_visits(self.job.dimensions):
            rows = [*rows, self._visit_meta(metrics["log_time_ms"])]
        self.report.rows = int(metrics["rows"])
        self.report.invalid = int(metrics["invalid"])
        self.report.duplicates = int(metrics["duplicates"])
        if not self._dead_lettered:
            self._dead_letter(metrics["dead"])
            self._dead_lettered = True
        return rows

    def _visit_meta(self, newest: Any) -> dict[str, Any]:
        """The row that tells the commit the visit state's new watermark (the newest log-append
        time of the records committed with this batch) and which visits left it."""
        newest_ms = 0 if newest is None else int(newest)
        return meta_row(max(self.visit_meta.watermark_ms, newest_ms), self._horizon().drop_before_us)

    def _horizon(self) -> Horizon:
        settings, meta = self.job.settings, self.visit_meta
        return Horizon(
            meta.watermark_ms, meta.dropped_before_us, settings.visit_lateness_s, settings.session_gap_s
        )

    def _job(self, active: dict[int, Offsets]) -> tuple[list[Any], dict[str, Any]]:
        """The job itself, built anew for each run (a plan that failed keeps its failed broadcast):
        the view rows and the observed metrics."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        settings = self.job.settings
        invalid = F.col(INVALID_COLUMN).isNotNull()
        observation = Observation()
        observed = self.marked.observe(
            observation,
            F.count(F.lit(1)).alias("rows"),
            F.count(INVALID_COLUMN).alias("invalid"),
            F.count_if(F.coalesce(F.col(DUPLICATE_COLUMN), F.lit(False))).alias("duplicates"),
            # JSON text: an observation hands a list of structs back as a JVM object.
            F.max(F.unix_millis("log_time")).alias("log_time_ms"),
            F.collect_list(
                F.when(
                    invalid,
                    F.to_json(
                        F.struct(
                            F.base64("_raw").alias("raw"),
                            F.col(INVALID_COLUMN).alias("reason"),
                            F.col("kafka_partition").alias("partition"),
                            F.col("kafka_offset").alias("offset"),
                        )
                    ),
                )
            ).alias("dead"),
        )
        single = self.records <= settings.speed_single_partition_rows
        if not single:
            # The broadcast tables of once_per_value dimensions would read the scan again.
            observed = self._materialise(observed)
        try:
            counted = observed.where(~invalid & ~F.col(DUPLICATE_COLUMN))
            tags = F.array(*[F.when(at_or_past(cut), F.lit(gen)) for gen, cut in sorted(active.items())])
            tagged = counted.withColumn(TAGS, F.filter(tags, lambda g: g.isNotNull())).withColumn(
                current_visitors.MINUTE, current_visitors.minute_column()
            )
            keyed = keyed_events(
                tagged, self.job.dimensions, [TAGS, "kafka_partition", current_visitors.MINUTE], single
            )
            dims = self.job.dimensions
            if sessions.counts_visits(dims) or (single and current_visitors.counted(dims)):
                # The visits' job, the views' rows and the current visitors' all read the keyed
                # events: the scan, the contract, the dedup and the keys run once. (A larger
                # micro-batch's marked rows are materialised already.)
                keyed = self._materialise(keyed)
            view_rows, visits = self._view_rows(tagged, keyed, active, single)
            minutes = current_visitors.minute_rows(keyed, dims, settings, single)
            if minutes is not None:
                view_rows = view_rows.unionByName(minutes, allowMissingColumns=True)
            if self.job.filter_table:
                signed_visits = None if visits is None else signed(visits, sorted(active))
                filters = filter_rows.rows(by_generation(keyed), dims, single, signed_visits)
                view_rows = view_rows.unionByName(filters, allowMissingColumns=True)
            table, rows = filter_rows.split_table(view_rows.toArrow())
            rows = collected_table(rows)
            if table is not None:
                rows.append(filter_rows.block(table))
            return rows, observation.get
        finally:
            while self._materialised:
                self._materialised.pop().unpersist()

    def _materialise(self, frame: DataFrame) -> DataFrame:
        """``frame`` computed once, in a job of its own, and kept until the micro-batch's job ends
        (the time goes to the report's ``read`` phase)."""
        t0 = time.monotonic()
        kept = frame.localCheckpoint(eager=True)
        self._materialised.append(kept)
        self.report.phases["read"] = self.report.phases.get("read", 0.0) + time.monotonic() - t0
        return kept

    def _view_rows(
        self, tagged: DataFrame, keyed: DataFrame, active: dict[int, Offsets], single: bool
    ) -> tuple[DataFrame, DataFrame | None]:
        """The realtime view rows of the tagged events (page views and sketches, no exact visitor
        count: the sink keeps none), with the visits' deltas and the visit state's rows
        (speed_layer.visits): the shared pass's stages on the keyed events, grouped by generation.
        And the micro-batch's closing visits of every variant (None without visits)."""
        settings, dims = self.job.settings, self.job.dimensions
        by_gen = by_generation(keyed)
        deltas, extra, visits = None, None, None
        if sessions.counts_visits(dims):
            t0 = time.monotonic()
            deltas, extra, visits = visit_rows(
                keyed, dims, active, self._horizon(), settings.redis_url, single
            )
            self._materialised.append(visits)
            self.report.phases["visits"] = self.report.phases.get("visits", 0.0) + time.monotonic() - t0
        levels = count_events(by_gen, dims, ["gen"], settings.hll_lg_k, single, deltas)
        rows = assemble(levels, dims, ["gen"])
        return (rows if extra is None else rows.unionByName(extra, allowMissingColumns=True)), visits

    def _dead_letter(self, dead: Any) -> None:
        """Send the invalid records (JSON text each, ``dead``: a list or the JVM's sequence)."""
        t0 = time.monotonic()
        topic = self.job.settings.events_topic
        reasons = self.report.invalid_reasons
        texts = list(dead) if isinstance(dead, list) else [dead.apply(i) for i in range(dead.size())]
        for text in texts:
            r = json.loads(text)
            reason = r["reason"]
            reasons[reason_field(reason)] = reasons.get(reason_field(reason), 0) + 1
            key = dlq_key(DLQ_SOURCE, topic, r["partition"], r["offset"])
            self.job.dlq.dead_letter(base64.b64decode(r["raw"]), reason, DLQ_SOURCE, key)
        if texts:
            self.job.dlq.flush()
            self.report.phases["dead letters"] = time.monotonic() - t0


def by_generation(keyed: DataFrame) -> DataFrame:
    """The keyed events once per generation they are tagged with (:data:`TAGS`), as ``gen``."""
    from pyspark.sql import functions as F

    return keyed.select(F.explode(TAGS).alias("gen"), *[c for c in keyed.columns if c != TAGS])
