"""The streaming job: Kafka `events` -> the registered views per active generation -> Redis.

One module per concern:

- :mod:`speed_layer.stream`: the query: reading `events`, the contract parse, where a fresh
  checkpoint starts.
- :mod:`speed_layer.dedup`: the dedup in the scan (the rule of :mod:`contract.duplicates`) and the
  rebuild of its state from the log.
- :mod:`speed_layer.visits`: the visits in the scan, a state per Kafka partition, and
  :mod:`speed_layer.visit_rebuild`, its rebuild from the master dataset and the log.
- this module: the job's clients and one micro-batch (:meth:`SpeedJob.process`); the composition
  root of the job: it builds the stores it writes and the :class:`~speed_layer.context.SpeedContext`
  the modules below it work with (none of them sees the job).
- :mod:`speed_layer.micro_batch`: a micro-batch's Spark work and its guarantees (the dedup's
  marks, the counts, the dead letters, the generations' tags).
- :mod:`speed_layer.outputs`: what the counted events become, the realtime rows (the views, the
  visits, the current visitors, the filter table's rows).
- :mod:`speed_layer.writes`: those rows as the stores' writes.
- :mod:`speed_layer.commit`: the exactly-once commit of a micro-batch to Redis.
- :mod:`speed_layer.progress`: what a micro-batch reports (the live line, the lag, the stats).

One micro-batch, end to end:

1. Spark reads the next offset range of `events` and parses it with the contract
   (:mod:`speed_layer.stream`).
2. ``foreachBatch`` (:meth:`SpeedJob.process`) skips a batch Redis already has (a replay after a
   crash), then reads the active generations and runs the micro-batch's Spark work
   (:class:`~speed_layer.micro_batch.MicroBatch`): duplicates marked in the scan, each counted
   event tagged with every generation whose cut it is at or past, and the realtime rows
   (:func:`speed_layer.outputs.rows`: the shared pass of every view grouped by generation too, the
   visits with their retractions, the current visitors, the filter table's rows), the counts and
   the dead letters gathered as the rows pass. The dead letters go out, then all writes
   (:mod:`speed_layer.writes`), the batch id and the end offsets are committed in one Redis
   transaction (:mod:`speed_layer.commit`), which computes the rows again if a generation opened
   meanwhile.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

from py4j.protocol import Py4JError  # type: ignore[import-untyped]

from config.settings import Settings
from config.spark import hadoop_path, spark_session
from generations.model import Offsets
from generations.registry import GenerationRegistry
from ingest.producer import EventProducer
from ingest.topics import log_end_offsets
from speed_layer import filter_rows
from speed_layer.commit import Committer, already_committed, redis_call
from speed_layer.context import SpeedContext
from speed_layer.dedup import ScanDedup
from speed_layer.micro_batch import DLQ_SOURCE, MicroBatch
from speed_layer.progress import BatchReport, lag_of
from speed_layer.rebuild import reset
from speed_layer.stream import batch_offsets, initial_offsets, start_query, starting_offsets
from speed_layer.visit_rebuild import fresh_start
from speed_layer.visits import ScanVisits, dimensions_mark
from stores.mongo import client as mongo_client
from stores.mongo.codec import stored_layout
from stores.mongo.generations import MongoGenerationStore
from stores.mongo.manifest import MongoManifest
from stores.parquet.master import MasterReader
from stores.redis import client as redis_client
from stores.redis import visit_state
from stores.redis.current_visitors import CurrentVisitorsSink
from stores.redis.handshake import RedisHotCopy, RedisSpeedCommits, speed_commit
from views import all_views, filter_table, fingerprint, input_columns, sessions, view_mark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

__all__ = ["DLQ_SOURCE", "SpeedJob"]


class SpeedJob:
    """Holds the clients of the streaming job; :meth:`run` runs the query until stopped."""

    def __init__(self, settings: Settings, spark: SparkSession | None = None) -> None:
        self.settings = settings
        self.spark = spark or spark_session(settings, "lambda-speed", settings.speed_java_options)
        self.mongo = mongo_client.connect(settings)
        self.redis = redis_client.connect(settings)
        self.registry = GenerationRegistry(
            MongoGenerationStore(self.mongo[settings.mongo_db]),
            RedisHotCopy(self.redis),
            lambda: log_end_offsets(settings),
        )
        self.dlq = EventProducer(settings)
        # The views are fixed for the life of the job: a view declared later is counted from the
        # first generation opened after a restart (the API says "not ready" until then).
        self.views = all_views()
        self.dimensions = list(self.views)
        self.filter_table = filter_rows.counted(self.dimensions, settings.filter_table)
        """Whether each micro-batch also makes the filter table's rows (speed_layer.filter_rows)."""
        layout = stored_layout()  # the batch views' (views.registry.pass_fingerprint)
        marks = [view_mark(v.name, fingerprint(v, layout)) for v in self.views]
        self.view_marks = sorted([*marks, filter_table.mark(layout)] if self.filter_table else marks)
        self.input_columns = input_columns(self.views, self.spark)
        self.dedup = ScanDedup(self.spark, settings)
        self.visits = ScanVisits(self.spark, self.dedup.namespace)
        self.context = SpeedContext(
            settings,
            self.spark,
            self.redis,
            self.dimensions,
            self.input_columns,
            self.filter_table,
            self.dedup,
            self.visits,
            self.dlq,
            MasterReader(
                settings.master_uri,
                settings.speed_dedup_window_s,
                MongoManifest(self.mongo[settings.mongo_db]),
            ),
        )
        """What a micro-batch and the state rebuilds work with (they see no more of the job)."""
        self.last: BatchReport | None = None
        self._lag: dict[int, int] = {}
        self._stop = threading.Event()
        self.committer = Committer(
            RedisSpeedCommits(self.redis),
            self.registry,
            self.view_marks,
            lambda: self._lag,
            lambda: CurrentVisitorsSink(
                self.redis, settings.current_visitors_exact_limit, settings.current_visitors_max_minutes
            ),
        )

    def rebuild(self) -> None:
        """Rebuild the realtime views from the log after Redis lost them (speed_layer.rebuild):
        forget what is left of them, then run from the cuts until caught up."""
        reset(self.registry, self.context)
        self.run(available_now=True)

    def close(self) -> None:
        self.dlq.flush()
        self.mongo.close()
        self.redis.close()

    # --- the query ---------------------------------------------------------------------------------
    def start(self, available_now: bool = False) -> StreamingQuery:
        """Start the query for the active generations (creating generation 0 before any batch run)."""
        active = self.registry.ensure_hot_copy()
        start = starting_offsets(self.settings, self.registry, active)
        log.info("active generations %s; a fresh checkpoint starts at %s", active, start or "the log start")
        if sessions.counts_visits(self.dimensions):
            fresh = not self._checkpoint_exists()
            if not fresh and visit_state.read_meta(self.redis).dims != dimensions_mark(self.dimensions):
                # A state of other dimensions (or none: an upgrade) cannot be continued.
                log.warning(
                    "the visit state does not match the declared views: rebuilding the realtime views"
                )
                reset(self.registry, self.context)
                fresh = True
            if fresh:
                fresh_start(self.context, start)
        # States this JVM holds for the query are from before this start: rebuilt from the log.
        self.dedup.forget()
        self.visits.forget()
        return start_query(self.spark, self.settings, start, self.input_columns, self.process, available_now)

    def run(self, available_now: bool = False, on_progress: Any = None) -> None:
        """Run until stopped (SIGTERM/SIGINT) or, with ``available_now``, until caught up."""
        query = self.start(available_now)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self._stop.set())
        shown: BatchReport | None = None
        try:
            while query.isActive and not self._stop.is_set():
                query.awaitTermination(1)
                progress = query.lastProgress
                if progress:
                    self._lag = lag_of(progress)
                if on_progress is not None and self.last is not None and self.last is not shown:
                    on_progress(self.last, self._lag)
                    shown = self.last
            if query.isActive:
                # Stop between triggers: stopping inside foreachBatch can log a StackOverflowError
                # in Spark (SPARK-39218) and always wastes the batch in flight.
                while query.status.get("isTriggerActive"):
                    time.sleep(0.05)
                query.stop()
            exc = query.exception()
            if exc is not None:
                raise RuntimeError(f"the speed layer query failed: {exc}")
        except Py4JError:
            if not self._stop.is_set():
                raise
            # Ctrl-C reaches the whole process group: the JVM may be gone before the query could
            # stop. Nothing is lost, the uncommitted batch is replayed on the next start.
            log.warning("Spark went away while stopping; the batch in flight is replayed on restart")
        finally:
            self.close()

    # --- one micro-batch ---------------------------------------------------------------------------------
    def process(self, df: DataFrame, batch_id: int) -> None:
        """foreachBatch: count the batch into every active generation, exactly once."""
        report = BatchReport(batch_id)
        end_offsets = self._batch_offsets(batch_id)
        prev_offsets = self._batch_offsets(batch_id - 1) if batch_id > 0 else None
        stored = redis_call(lambda: speed_commit(self.redis))
        if already_committed(stored, batch_id, prev_offsets):
            report.skipped = True
            log.info("batch %d was committed before a restart: skipped", batch_id)
            self.last = report
            return
        starts = prev_offsets if prev_offsets is not None else self._initial_offsets()
        batch = MicroBatch(self.context, df, starts, end_offsets, self.visit_meta(), report)
        # The micro-batch's one Spark job, for the generations active now (the commit computes the
        # rows again only if that set changes before it): its dead letters go out here.
        active = redis_call(self.registry.active_cuts)
        if active:
            batch.rows_for(active)
        report.keys_written, report.generations = self._commit(batch, batch_id, prev_offsets, end_offsets)
        report.seconds = time.monotonic() - report.started
        self.last = report
        log.info(
            "batch %d: %d rows (%d invalid, %d duplicates), %d realtime keys for generations %s in "
            "%.2f s (%s)",
            batch_id,
            report.rows,
            report.invalid,
            report.duplicates,
            report.keys_written,
            report.generations,
            report.seconds,
            ", ".join(f"{k} {v:.2f} s" for k, v in report.phases.items()),
        )

    def _commit(
        self, batch: MicroBatch, batch_id: int, prev_offsets: Offsets | None, end_offsets: Offsets
    ) -> tuple[int, list[int]]:
        """Commit the micro-batch with its batch id (:meth:`Committer.commit`)."""
        return self.committer.commit(batch_id, prev_offsets, end_offsets, batch.report, batch.rows_for)

    def visit_meta(self) -> visit_state.Meta:
        """The visit state's watermark and cut-off as committed (speed_layer.visits.Horizon)."""
        return redis_call(lambda: visit_state.read_meta(self.redis))

    # --- plumbing ------------------------------------------------------------------------------------
    def _checkpoint_exists(self) -> bool:
        fs, path = hadoop_path(self.spark, f"{self.settings.speed_checkpoint_uri.rstrip('/')}/offsets")
        return bool(fs.exists(path))

    def _batch_offsets(self, batch_id: int) -> Offsets:
        return batch_offsets(
            self.spark, self.settings.speed_checkpoint_uri, self.settings.events_topic, batch_id
        )

    def _initial_offsets(self) -> Offsets:
        return initial_offsets(self.spark, self.settings.speed_checkpoint_uri, self.settings.events_topic)
