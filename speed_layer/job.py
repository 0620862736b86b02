"""The streaming job: Kafka `events` -> the registered views per active generation -> Redis.

One micro-batch, end to end:

1. Spark reads the next offset range of `events` (at most ``speed_max_offsets_per_trigger``
   records: backpressure), parses it with the contract and drops duplicates by ``event_id`` within
   a window of **log-append time** (``withWatermark`` on the Kafka timestamp, then
   ``dropDuplicatesWithinWatermark``). Event time plays no part in the stateful operator, so a late
   event (old event time, new arrival) is never dropped; it counts in its own event-time bucket.
2. ``foreachBatch`` (:meth:`SpeedJob.process`) reads the active generations, tags each event with
   every generation whose cut it is at or past, runs the shared pass of every view
   (:func:`views.compute`, grouped by generation too: one shuffle for all views and generations),
   and commits all writes, the batch id and the end offsets in one Redis transaction guarded by
   ``WATCH`` of the generation registry and the commit record. The same transaction records, per
   generation, the views (and their fingerprints) the job counted it with, so the API serves a
   view only where the realtime part counted it from the generation's cut.

Exactly-once: Spark replays an uncommitted batch with the same id and the same offsets after a
crash. A batch id at or below the committed one is skipped; a batch id that does not follow the
committed one means Redis lost writes (flushed, or restarted from an old file) and the job stops
with an error instead of counting on top of a hole: ``make rebuild-realtime`` then rebuilds the
views from the log.

Why duplicates straddling a cut count once: Kafka hands Spark each partition in offset order and
the dedup shuffle keeps each map task's order, so the copy that survives is the earliest one; a
producer keys a visitor's events to one partition, so an event and its re-sends share a partition.
If the earliest copy is below a generation's cut, the batch views of that generation count it
and the filter on the cut keeps it out of the realtime views.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import redis
from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pymongo import MongoClient
from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_fixed,
)

from config.settings import Settings
from config.spark import hadoop_path, spark_session
from contract.codec import bounds_from, reason_field
from contract.spark_schema import INVALID_COLUMN, parse_kafka_records
from generations import keys
from generations.keys import Offsets
from generations.registry import GenerationRegistry
from ingest.producer import EventProducer, dlq_key
from ingest.topics import log_end_offsets, offsets_for_time
from speed_layer.sink import RealtimeSink
from views import all_views, compute, fingerprint, input_columns

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

QUERY_NAME = "speed-layer"
DLQ_SOURCE = "speed-layer"
DEDUP_COLUMN = "_dedup"
LOG_COLUMNS = ("kafka_partition", "kafka_offset")
REDIS_RETRY_S = 120.0
"""How long a micro-batch keeps retrying while Redis is unreachable (a restart) before failing."""
REDIS_RETRY_WAIT_S = 1.0
"""The pause between two tries while Redis is unreachable."""

T = TypeVar("T")


class RealtimeStateLost(RuntimeError):
    """Redis no longer holds the commits the checkpoint says were made: rebuild the views."""


@dataclass
class BatchReport:
    batch_id: int
    rows: int = 0
    invalid: int = 0
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    """Records dead-lettered in this batch, per field of their reason."""
    keys_written: int = 0
    generations: list[int] = field(default_factory=list)
    seconds: float = 0.0
    skipped: bool = False
    started: float = field(default_factory=time.monotonic)
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds per step: read (Kafka, parse, dedup), views (Spark), commit (Redis)."""


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

    def close(self) -> None:
        self.dlq.flush()
        self.mongo.close()
        self.redis.close()

    # --- the query ---------------------------------------------------------------------------------
    def stream(self, start: Offsets | None) -> DataFrame:
        """Parsed, deduplicated events of `events`, with their partition and offset."""

        s = self.settings
        topic = s.events_topic
        reader = (
            self.spark.readStream.format("kafka")
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
        return deduplicated(parsed, self.input_columns, s.speed_dedup_window_s)

    def start(self, available_now: bool = False) -> StreamingQuery:
        # The dedup state holds one key per event of the window: RocksDB keeps it off the JVM heap
        # (a checkpoint's state store provider is fixed when the checkpoint is created).
        self.spark.conf.set(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        self.spark.conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        active = self.registry.ensure_hot_copy()
        start = starting_offsets(self.settings, self.registry, active)
        log.info("active generations %s; a fresh checkpoint starts at %s", active, start or "the log start")
        writer = (
            self.stream(start)
            .writeStream.queryName(QUERY_NAME)
            .foreachBatch(self.process)
            .option("checkpointLocation", self.settings.speed_checkpoint_uri)
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.settings.speed_trigger_s} seconds")
        return writer.start()

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
        """Compute the rows for the active generations and commit them with the batch id.

        The transaction WATCHes the generation registry: if a batch run opens a generation while
        the rows are computed, EXEC fails and the rows are computed again for the new set, so the
        new cut (at or after everything committed) and this batch never disagree.
        """
        pending = _PendingCommit(valid, batch_id, prev_offsets, end_offsets, report)

        def attempt() -> tuple[int, list[int]]:
            return self._commit_once(pending)

        def recomputing(state: RetryCallState) -> None:
            if state.outcome is not None and isinstance(state.outcome.exception(), redis.WatchError):
                log.info("batch %d: the active generations changed during the batch; recomputing", batch_id)

        # Each attempt waits through a Redis outage of its own (a WatchError means Redis answered).
        result: tuple[int, list[int]] = Retrying(
            retry=retry_if_exception_type((redis.WatchError, _NoActiveGeneration)), before_sleep=recomputing
        )(redis_call, attempt)
        return result

    def _commit_once(self, pending: _PendingCommit) -> tuple[int, list[int]]:
        """One WATCH/MULTI/EXEC attempt of :meth:`_commit`; raises WatchError when the registry
        changed under it, :class:`_NoActiveGeneration` after creating the first generation."""
        batch_id, prev_offsets, report = pending.batch_id, pending.prev_offsets, pending.report
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.watch(keys.ACTIVE, keys.SPEED_COMMIT)  # type: ignore[no-untyped-call]
            # Checked again under WATCH: Redis may have been flushed since the first look.
            if already_committed(keys.decode_commit(pipe.get(keys.SPEED_COMMIT)), batch_id, prev_offsets):
                return 0, []
            active = keys.decode_active(pipe.get(keys.ACTIVE))
            if not active:
                pipe.unwatch()
                self.registry.ensure_hot_copy()
                raise _NoActiveGeneration
            if active != pending.computed_for:
                t0 = time.monotonic()
                valid = pending.valid
                pending.rows = self._rows(valid, report.rows, active) if valid is not None else []
                pending.computed_for = active
                report.phases["views"] = time.monotonic() - t0
            t0 = time.monotonic()
            sink = RealtimeSink(self.settings.realtime_ttl_s)
            for row in pending.rows:
                sink.add(row["gen"], row["view"], row)
            sink.read_sketches(self.redis)
            previous = json.loads(pipe.get(keys.SPEED_STATS) or "{}")
            counted = {g: self._counted_views(pipe, g) for g in active}
            reasons_total = dict(previous.get("invalid_reasons_total") or {})
            for name, n in report.invalid_reasons.items():
                reasons_total[name] = int(reasons_total.get(name, 0)) + n
            pipe.multi()
            written = sink.flush(pipe)
            for g, marks in counted.items():
                self._record_views(pipe, g, marks)
            pipe.set(keys.SPEED_COMMIT, keys.encode_commit(keys.SpeedCommit(batch_id, pending.end_offsets)))
            pipe.set(
                keys.SPEED_STATS,
                json.dumps(
                    {
                        "batch_id": batch_id,
                        "at": datetime.now(UTC).isoformat(),
                        "rows": report.rows,
                        "seconds": round(time.monotonic() - report.started, 3),
                        "lag": {str(p): n for p, n in self._lag.items()},
                        "invalid_total": int(previous.get("invalid_total", 0)) + report.invalid,
                        "invalid_reasons": report.invalid_reasons,
                        "invalid_reasons_total": reasons_total,
                        "generations": sorted(active),
                    }
                ),
            )
            pipe.execute()
            report.phases["commit"] = time.monotonic() - t0
            return written, sorted(active)

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

    def _counted_views(self, pipe: redis.client.Pipeline, gen: int) -> list[str]:
        """The views realtime ``gen`` will have been counted with after this batch: this job's own
        if the generation is new to the realtime views, else those it had that this job counts too
        (a view missing from one micro-batch is missing for the rest of the generation)."""
        raw: Any = pipe.smembers(keys.realtime_views_key(gen))
        stored = {m.decode() if isinstance(m, bytes) else str(m) for m in raw}
        if not stored:
            return self.view_marks
        return sorted((stored & set(self.view_marks)) | {keys.VIEWS_SENTINEL})

    def _record_views(self, pipe: redis.client.Pipeline, gen: int, marks: list[str]) -> None:
        key = keys.realtime_views_key(gen)
        pipe.delete(key)
        pipe.sadd(key, keys.VIEWS_SENTINEL, *marks)
        pipe.expire(key, self.settings.realtime_ttl_s)

    # --- plumbing ------------------------------------------------------------------------------------
    def _batch_offsets(self, batch_id: int) -> Offsets:
        """End offsets of ``batch_id`` from the checkpoint's offset log (written before the batch
        runs, so it is there for the batch being processed and every earlier one still kept)."""
        text = _read_text(self.spark, f"{self.settings.speed_checkpoint_uri.rstrip('/')}/offsets/{batch_id}")
        sources = json.loads(text.strip().splitlines()[-1])
        return {int(p): int(o) for p, o in sources[self.settings.events_topic].items()}


def redis_call(fn: Callable[[], T]) -> T:
    """``fn()``, waiting through a Redis restart: retried every REDIS_RETRY_WAIT_S while Redis is
    unreachable, given up when this call has lasted REDIS_RETRY_S. Every call has a clock of its
    own, so an outage is never charged with the time of an earlier one."""
    try:
        return Retrying(
            retry=retry_if_exception_type(redis.ConnectionError),
            stop=stop_after_delay(REDIS_RETRY_S),
            wait=wait_fixed(REDIS_RETRY_WAIT_S),
            before_sleep=_log_redis_unreachable,
        )(fn)
    except RetryError as exc:
        last = exc.last_attempt.exception()
        raise RuntimeError(f"Redis unreachable for {REDIS_RETRY_S:.0f} s: {last}") from last


@dataclass
class _PendingCommit:
    """One micro-batch on its way to Redis: what every commit attempt shares, and the rows computed
    so far with the generations they are for (an attempt recomputes them only when those changed)."""

    valid: DataFrame | None
    batch_id: int
    prev_offsets: Offsets | None
    end_offsets: Offsets
    report: BatchReport
    computed_for: dict[int, Offsets] | None = None
    rows: list[Any] = field(default_factory=list)


class _NoActiveGeneration(Exception):
    """The registry had no active generation: the job created generation 0; try again."""


def _log_redis_unreachable(state: RetryCallState) -> None:
    log.warning("Redis unreachable (%s); retrying", state.outcome.exception() if state.outcome else "?")


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


def already_committed(commit: keys.SpeedCommit, batch_id: int, prev_offsets: Offsets | None) -> bool:
    """Whether ``batch_id`` is in Redis already (a replay after a crash: skip it).

    Raises :class:`RealtimeStateLost` when Redis' commit is not the batch right before this one:
    Redis was flushed or restarted from an old file, and counting on would leave a hole.
    """
    if commit.batch_id >= batch_id:
        return True
    if batch_id > 0 and (commit.batch_id != batch_id - 1 or commit.offsets != prev_offsets):
        raise RealtimeStateLost(
            f"Redis holds the speed layer's commit of batch {commit.batch_id} (offsets "
            f"{commit.offsets}) but the checkpoint is at batch {batch_id - 1} (offsets "
            f"{prev_offsets}): realtime views lost writes. Run `make rebuild-realtime`."
        )
    return False


def lag_of(progress: dict[str, Any]) -> dict[int, int]:
    """Records behind the log end per partition, from a query progress report."""
    lag: dict[int, int] = {}
    for source in progress.get("sources", []):
        latest, end = source.get("latestOffset"), source.get("endOffset")
        if not latest or not end:
            continue
        latest_d, end_d = _offsets_json(latest), _offsets_json(end)
        for topic, parts in latest_d.items():
            for p, o in parts.items():
                lag[int(p)] = int(o) - int(end_d.get(topic, {}).get(p, 0))
    return lag


def _offsets_json(value: Any) -> dict[str, dict[str, int]]:
    """Offsets in a progress report: a JSON string, a dict, or empty before the first batch."""
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) and value else {}
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


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


def print_progress(report: BatchReport, lag: dict[int, int]) -> None:
    """The live line of `make speed`."""
    rate = report.rows / report.seconds if report.seconds else 0.0
    line = (
        f"batch {report.batch_id}: {report.rows:,} rows in {report.seconds:.2f} s ({rate:,.0f} rows/s), "
        f"lag {sum(lag.values()):,} records"
    )
    if sys.stdout.isatty():
        print(f"\r{line:<100}", end="", flush=True)
    else:
        print(line, flush=True)
