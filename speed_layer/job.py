"""The streaming job: Kafka `events` -> the registered views per active generation -> Redis.

One module per concern:

- :mod:`speed_layer.stream`: the query: reading `events`, the contract parse, the dedup by
  log-append time, where a fresh checkpoint starts.
- this module: the job's clients and one micro-batch (:meth:`SpeedJob.process`).
- :mod:`speed_layer.commit`: the exactly-once commit of a micro-batch to Redis.
- :mod:`speed_layer.progress`: what a micro-batch reports (the live line, the lag, the stats).

One micro-batch, end to end:

1. Spark reads the next offset range of `events`, parses it with the contract and drops
   duplicates (:mod:`speed_layer.stream`).
2. ``foreachBatch`` (:meth:`SpeedJob.process`) skips a batch Redis already has (a replay after a
   crash), sends the batch's dead letters, then reads the active generations, tags each event with
   every generation whose cut it is at or past, runs the shared pass of every view
   (:func:`views.compute`, grouped by generation too: one shuffle for all views and generations),
   and commits all writes, the batch id and the end offsets in one Redis transaction
   (:mod:`speed_layer.commit`), which computes the rows again if a generation opened meanwhile.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

import redis
from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pymongo import MongoClient

from config.settings import Settings
from config.spark import hadoop_path, spark_session
from contract.codec import reason_field
from contract.spark_schema import INVALID_COLUMN
from generations.model import Offsets
from generations.registry import GenerationRegistry
from ingest.producer import EventProducer, dlq_key
from ingest.topics import log_end_offsets
from speed_layer.commit import Committer, already_committed, redis_call
from speed_layer.progress import BatchReport, lag_of
from speed_layer.stream import at_or_past, start_query, starting_offsets
from stores.redis import keys
from views import all_views, compute, fingerprint, input_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

DLQ_SOURCE = "speed-layer"


class SpeedJob:
    """Holds the clients of the streaming job; :meth:`run` runs the query until stopped."""

    def __init__(self, settings: Settings, spark: SparkSession | None = None) -> None:
        self.settings = settings
        self.spark = spark or spark_session(settings, "lambda-speed")
        self.mongo: MongoClient[dict[str, Any]] = MongoClient(
            settings.mongo_url, serverSelectionTimeoutMS=5000
        )
        self.redis = redis.Redis.from_url(settings.redis_url, socket_timeout=10)
        self.registry = GenerationRegistry(
            self.mongo[settings.mongo_db], self.redis, lambda: log_end_offsets(settings)
        )
        self.dlq = EventProducer(settings)
        # The views are fixed for the life of the job: a view declared later is counted from the
        # first generation opened after a restart (the API says "not ready" until then).
        self.views = all_views()
        self.view_marks = sorted(keys.view_mark(v.name, fingerprint(v)) for v in self.views)
        self.input_columns = input_columns(self.views, self.spark)
        self.last: BatchReport | None = None
        self._lag: dict[int, int] = {}
        self._stop = threading.Event()
        self.committer = Committer(
            self.redis, self.registry, self.view_marks, settings.realtime_ttl_s, lambda: self._lag
        )

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

    # --- one micro-batch ---------------------------------------------------------------------------
    def process(self, df: DataFrame, batch_id: int) -> None:
        """foreachBatch: count the batch into every active generation, exactly once."""
        from pyspark.sql import functions as F

        report = BatchReport(batch_id)
        end_offsets = self._batch_offsets(batch_id)
        prev_offsets = self._batch_offsets(batch_id - 1) if batch_id > 0 else None
        stored = keys.decode_commit(redis_call(lambda: self.redis.get(keys.SPEED_COMMIT)))
        if already_committed(stored, batch_id, prev_offsets):
            report.skipped = True
            log.info("batch %d was committed before a restart: skipped", batch_id)
            self.last = report
            return
        # Materialised once, lineage cut: every later job of this batch reads these blocks and never
        # runs the Kafka read and the stateful dedup again (re-running it reloads the state store).
        df = df.localCheckpoint(eager=True)
        try:
            counts = df.agg(F.count(F.lit(1)), F.count(INVALID_COLUMN)).first()
            assert counts is not None
            report.rows, report.invalid = int(counts[0]), int(counts[1])
            report.phases["read"] = time.monotonic() - report.started
            invalid = df.where(F.col(INVALID_COLUMN).isNotNull())
            if report.invalid:
                topic = self.settings.events_topic
                for r in invalid.select("_raw", INVALID_COLUMN, "kafka_partition", "kafka_offset").collect():
                    reason = r[INVALID_COLUMN]
                    name = reason_field(reason)
                    report.invalid_reasons[name] = report.invalid_reasons.get(name, 0) + 1
                    key = dlq_key(DLQ_SOURCE, topic, r["kafka_partition"], r["kafka_offset"])
                    self.dlq.dead_letter(bytes(r["_raw"]), reason, DLQ_SOURCE, key)
                # Dead letters go out before the commit: a crash in between re-sends them (at least
                # once, under the same key) rather than losing them.
                self.dlq.flush()
            valid = df.where(F.col(INVALID_COLUMN).isNull()) if report.rows else None
            report.keys_written, report.generations = self._commit(
                valid, batch_id, prev_offsets, end_offsets, report
            )
        finally:
            df.unpersist()
        report.seconds = time.monotonic() - report.started
        self.last = report
        log.info(
            "batch %d: %d rows (%d invalid), %d realtime keys for generations %s in %.2f s (%s)",
            batch_id,
            report.rows,
            report.invalid,
            report.keys_written,
            report.generations,
            report.seconds,
            ", ".join(f"{k} {v:.2f} s" for k, v in report.phases.items()),
        )

    def _commit(
        self,
        valid: DataFrame | None,
        batch_id: int,
        prev_offsets: Offsets | None,
        end_offsets: Offsets,
        report: BatchReport,
    ) -> tuple[int, list[int]]:
        """Commit the batch's ``valid`` rows with its batch id (:meth:`Committer.commit`), computing
        the view rows with Spark for whichever generations are active at the commit."""

        def rows_for(active: dict[int, Offsets]) -> list[Any]:
            return self._rows(valid, report.rows, active) if valid is not None else []

        return self.committer.commit(batch_id, prev_offsets, end_offsets, report, rows_for)

    def _rows(self, valid: DataFrame, rows: int, active: dict[int, Offsets]) -> list[Any]:
        """One collect for every (generation, view): the view rows of this micro-batch of ``rows``.

        Each event is tagged with every active generation whose cut it is at or past (at most two),
        then the shared pass groups by generation too: one shuffle for all generations and views,
        none at all for a small micro-batch (``speed_single_partition_rows``).
        """
        from pyspark.sql import functions as F

        tags = F.array(*[F.when(at_or_past(cut), F.lit(gen)) for gen, cut in sorted(active.items())])
        tagged = valid.select("*", F.explode(tags).alias("gen")).where(F.col("gen").isNotNull())
        single = rows <= self.settings.speed_single_partition_rows
        return compute(tagged, self.views, self.settings.hll_lg_k, ["gen"], single).collect()

    # --- plumbing ------------------------------------------------------------------------------------
    def _batch_offsets(self, batch_id: int) -> Offsets:
        """End offsets of ``batch_id`` from the checkpoint's offset log (written before the batch
        runs, so it is there for the batch being processed and every earlier one still kept)."""
        text = _read_text(self.spark, f"{self.settings.speed_checkpoint_uri.rstrip('/')}/offsets/{batch_id}")
        sources = json.loads(text.strip().splitlines()[-1])
        return {int(p): int(o) for p, o in sources[self.settings.events_topic].items()}


def _read_text(spark: SparkSession, uri: str) -> str:
    """A small file through Hadoop's FileSystem, so the checkpoint may live on any supported store."""
    fs, path = hadoop_path(spark, uri)
    stream = fs.open(path)
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()
