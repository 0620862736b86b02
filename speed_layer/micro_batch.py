"""One micro-batch's Spark work: duplicates marked in the scan, the realtime rows of every active
generation (speed_layer.outputs), the dead letters and the counts.

The micro-batch's rows are marked by the dedup (:mod:`speed_layer.dedup`) in the Kafka scan's task;
an observation on the marked rows counts them (records, invalid, duplicates, the newest log-append
time) and gathers the invalid ones for the dead-letter topic as the rows pass; the accepted, counted
rows are tagged with every active generation whose cut they are at or past, go through the visit
state of their partition in the same scan (:mod:`speed_layer.visits`) and become the realtime rows
(:func:`speed_layer.outputs.rows`: the views, the visits with their retractions, the current
visitors, the filter table's rows), collected in one job over what the jobs before it kept in
memory (``localCheckpoint``: the keyed events, and the visits' changes summed per task).

A task that finds its partition's dedup state or visit state elsewhere than at the range's start
fails the job; the states are rebuilt (speed_layer.dedup, speed_layer.visit_rebuild) and the job
runs again: nothing was written before.

A micro-batch larger than ``speed_single_partition_rows`` first materialises its marked rows: the
jobs that build the broadcast tables of ``once_per_value`` dimensions (views.shared_pass) would
otherwise read the scan again. (Were the scan read twice, the dedup would answer the second reading
with the verdicts of the first: a range's verdicts are kept.)
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from contract.codec import reason_field
from contract.spark_schema import INVALID_COLUMN
from generations.model import Offsets
from ingest.producer import dlq_key
from speed_layer import outputs, visit_rebuild, visits
from speed_layer.context import SpeedContext
from speed_layer.dedup import DUPLICATE_COLUMN, REBUILDS, counted
from speed_layer.outputs import Materialised, Outputs, RealtimeRows
from speed_layer.progress import BatchReport
from speed_layer.visits import Horizon, Marker, VisitProgress
from stores.redis.visit_state import Meta
from views import sessions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

INNER_PHASES = ("read",)
"""Steps timed inside the micro-batch's Spark work (speed_layer.outputs), reported beside it."""

DLQ_SOURCE = "speed-layer"


class MicroBatch:
    """The Spark side of one micro-batch: :meth:`rows_for` is the committer's ``rows_for``.

    ``context``: the job's parts it works with; ``df`` the range ``starts`` to ``ends`` of the
    stream; ``visit_meta`` the visit state as committed before this micro-batch
    (speed_layer.visits.Horizon); ``report`` what it fills in."""

    def __init__(
        self,
        context: SpeedContext,
        df: DataFrame,
        starts: Offsets,
        ends: Offsets,
        visit_meta: Meta,
        report: BatchReport,
    ) -> None:
        self.context = context
        self.starts = starts
        self.ends = ends
        self.report = report
        self.marked, self.marker = context.dedup.mark(df, starts, ends)
        self.records = sum(max(0, end - starts.get(p, 0)) for p, end in ends.items())
        self._dead_lettered = False
        self._rows: tuple[dict[int, Offsets], RealtimeRows] | None = None
        self.visit_meta = visit_meta
        self._visit_seed: Any = None
        """After a rebuild, the states a partition whose own is missing starts from."""

    def rows_for(self, active: dict[int, Offsets]) -> RealtimeRows:
        """The realtime rows for the ``active`` generations (one Spark job, run again only for another
        set); the first run also fills the report and sends the dead letters (before the commit: a
        crash in between sends them again, under the same keys, rather than losing them)."""
        if self._rows is None or self._rows[0] != active:
            self._rows = (dict(active), self._compute(active))
        return self._rows[1]

    def _compute(self, active: dict[int, Offsets]) -> RealtimeRows:
        t0 = time.monotonic()
        phases = self.report.phases
        dedup = self.context.dedup
        rebuilt = len(dedup.rebuild_seconds)
        inner = sum(phases.get(p, 0.0) for p in INNER_PHASES)
        rows, metrics, visit_rebuild_s = self._run(active)
        dedup_rebuild_s = sum(dedup.rebuild_seconds[rebuilt:])
        rebuilds = [dedup_rebuild_s, visit_rebuild_s]
        if dedup_rebuild_s:
            phases["dedup rebuild"] = dedup_rebuild_s
        if visit_rebuild_s:
            phases["visit rebuild"] = visit_rebuild_s
        # The steps timed inside the job are not counted twice: "views" is the rest of it.
        inner = sum(phases.get(p, 0.0) for p in INNER_PHASES) - inner
        phases["views"] = phases.get("views", 0.0) + (time.monotonic() - t0 - sum(rebuilds) - inner)
        if sessions.counts_visits(self.context.dimensions):
            rows.visit_progress = self._visit_progress(metrics["log_time_ms"])
        self.report.rows = int(metrics["rows"])
        self.report.invalid = int(metrics["invalid"])
        self.report.duplicates = int(metrics["duplicates"])
        if not self._dead_lettered:
            self._dead_letter(metrics["dead"])
            self._dead_lettered = True
        return rows

    def _visit_progress(self, newest: Any) -> VisitProgress:
        """Where the commit moves the visit state: its new watermark (the newest log-append time
        of the records committed with this batch) and the cut-off of the visits that leave it."""
        newest_ms = 0 if newest is None else int(newest)
        return VisitProgress(max(self.visit_meta.watermark_ms, newest_ms), self._horizon().drop_before_us)

    def _horizon(self) -> Horizon:
        settings, meta = self.context.settings, self.visit_meta
        return Horizon(
            meta.watermark_ms, meta.dropped_before_us, settings.visit_lateness_s, settings.session_gap_s
        )

    def _run(self, active: dict[int, Offsets]) -> tuple[RealtimeRows, dict[str, Any], float]:
        """The job's rows and metrics, after rebuilding the dedup's states (speed_layer.dedup) and
        the visits' (speed_layer.visit_rebuild) where a task found them missing; and the seconds
        the visits' rebuilds took beside the dedup's."""
        seconds = 0.0
        context = self.context

        def rebuild() -> None:
            nonlocal seconds
            t0, dedup_before = time.monotonic(), sum(context.dedup.rebuild_seconds)
            self._visit_seed = visit_rebuild.rebuild(context, self.starts, self.ends, self._horizon())
            seconds += time.monotonic() - t0 - (sum(context.dedup.rebuild_seconds) - dedup_before)

        scan = context.visits
        if scan.missing and sessions.counts_visits(context.dimensions):
            log.info("visit state: none in this JVM yet: rebuilding")
            rebuild()
        for attempt in itertools.count():
            try:
                rows, metrics = context.dedup.run(
                    self.marker, self.starts, self.ends, lambda: self._job(active)
                )
                scan.missing = False
                return rows, metrics, seconds
            except Exception as exc:
                if visits.MISSING not in str(exc) or attempt >= REBUILDS:
                    raise
                log.info("visit state not at the micro-batch's start: rebuilding")
                rebuild()
        raise AssertionError("unreachable")

    def _visits(self) -> Marker | None:
        """The range's visit function, with the seed of a rebuild (None: no view counts visits)."""
        if not sessions.counts_visits(self.context.dimensions):
            return None
        marker = self.context.visits.marker(self.starts, self.ends, self._horizon())
        if self._visit_seed is not None:
            marker.seed(self._visit_seed)
        return marker

    def _job(self, active: dict[int, Offsets]) -> tuple[RealtimeRows, dict[str, Any]]:
        """The job itself, built anew for each run (a plan that failed keeps its failed broadcast):
        the realtime rows and the observed metrics."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        context = self.context
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
        single = self.records <= context.settings.speed_single_partition_rows
        materialise = Materialised(self.report.phases)
        try:
            if not single:
                # The broadcast tables of once_per_value dimensions would read the scan again.
                observed = materialise(observed)
            made = Outputs(context.settings, context.dimensions, context.filter_table)
            tagged = outputs.tagged(observed.select("*", counted().alias(outputs.COUNTED)), active)
            rows = outputs.rows(made, tagged, self._visits(), single, materialise, active)
            return rows, observation.get
        finally:
            materialise.release()

    def _dead_letter(self, dead: Any) -> None:
        """Send the invalid records (JSON text each, ``dead``: a list or the JVM's sequence)."""
        t0 = time.monotonic()
        topic = self.context.settings.events_topic
        reasons = self.report.invalid_reasons
        texts = list(dead) if isinstance(dead, list) else [dead.apply(i) for i in range(dead.size())]
        for text in texts:
            r = json.loads(text)
            reason = r["reason"]
            reasons[reason_field(reason)] = reasons.get(reason_field(reason), 0) + 1
            key = dlq_key(DLQ_SOURCE, topic, r["partition"], r["offset"])
            self.context.dlq.dead_letter(base64.b64decode(r["raw"]), reason, DLQ_SOURCE, key)
        if texts:
            self.context.dlq.flush()
            self.report.phases["dead letters"] = time.monotonic() - t0
