"""One batch run = one generation: open, absorb, compute the views, write, publish, retire.

The served generation changes only in the last step, a single pointer write; a run that fails or
is killed anywhere before it leaves the served generation as it was, and the next run cleans up
(orphan segment directories, the half-written collections of the abandoned generation) once the
dead run's lease has expired (batch_layer.lease). Every step that drops, writes or publishes first
checks that this run still holds its lease.

Incremental runs (the default) recompute only the days that newly absorbed events fall on, from
those days' master-dataset partitions, and reuse every other day's documents from the served
generation without copying them. A full recompute (``make recompute``) rebuilds every day of every
view from the whole master dataset. A view whose definition changed since the served generation
is recomputed in full even by an incremental run: its stored documents were made by other code.

Every view is computed by the one shared pass (views.shared_pass) over the days the run needs:
one shuffle however many views there are, and one Spark job writes every view's documents straight
from it (each view to its own collection); the day rankings follow from what that job wrote.

The filter table (views.filter_table, docs/filters.md) is declared like a view: a fingerprint, a
day map entry ``filters``, days planned by :func:`plan_days`. Its rows come from the same shuffled
events as the views (no shuffle of its own), kept between the two writes (:func:`_write_all`), and
go to Parquet (stores.parquet.filter_table) unless ``settings.filter_table`` is off.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException

from batch_layer import faults
from batch_layer.lease import BatchLease, Held, LeaseLost
from batch_layer.master import MasterDataset
from config.settings import Settings
from config.spark import SparkProgress, spark_session
from contract import utc
from generations import retention
from generations.model import Generation
from generations.registry import GenerationRegistry
from ingest import log_retention
from ingest.producer import EventProducer, dlq_key
from ingest.topics import log_end_offsets, log_start_offsets
from stack.waiting import wait_for_services
from stores.batch_views import BatchViewWriter
from stores.filter_table import FilterTableWriter
from stores.manifest import Segment
from stores.mongo.client import connect
from stores.mongo.codec import collection_name, stored_layout
from stores.mongo.generations import MongoGenerationStore
from stores.mongo.lease import MongoLeaseStore
from stores.mongo.manifest import MongoManifest
from stores.mongo.writer import MongoBatchWriter
from stores.parquet.filter_table import ParquetFilterTableWriter
from stores.redis import client as redis_client
from stores.redis.handshake import RedisHotCopy
from stores.redis.teardown import drop_generations, realtime_generations
from views import all_views, describe, filter_table, fingerprint, input_columns, shared_pass

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from views import View

log = logging.getLogger(__name__)

DLQ_SOURCE = "batch-absorb"


@dataclass
class RunSummary:
    gen: int
    kind: str
    events_absorbed: int = 0
    invalid_records: int = 0
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    """Records this run dead-lettered (source ``batch-absorb``), per field of their reason."""
    dead_letters_total: dict[str, int] = field(default_factory=dict)
    """Every record the batch layer has dead-lettered (the whole master dataset), per field."""
    view_days_recomputed: dict[str, int] = field(default_factory=dict)
    documents_written: dict[str, int] = field(default_factory=dict)
    """Per view, its (key, day) documents."""
    hour_sketch_documents: int = 0
    """Documents of hour sketches stored apart from their (key, day) document (stores.mongo.codec)."""
    insert_seconds: float = 0.0
    """From the first document insert's start to the last one's end: the write rate's time."""
    seconds: dict[str, float] = field(default_factory=dict)
    retention: dict[str, Any] = field(default_factory=dict)
    """How close the unabsorbed records were to the topic's retention at the start
    (ingest.log_retention)."""
    filter_table: dict[str, Any] = field(default_factory=dict)
    """The filter table's days recomputed, the files and bytes this run wrote of it, and the
    seconds of its write (part of ``seconds["views"]``); empty when it wrote none."""
    retired: list[int] = field(default_factory=list)
    dropped_collections: list[str] = field(default_factory=list)
    dropped_filter_table: list[str] = field(default_factory=list)
    """The filter table's generation directories garbage collection deleted."""

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())

    @property
    def documents_per_s(self) -> float:
        """Documents inserted (hour sketches stored apart included) per second while they were
        being inserted."""
        inserted = sum(self.documents_written.values()) + self.hour_sketch_documents
        return inserted / self.insert_seconds if self.insert_seconds else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "total_seconds": round(self.total_seconds, 3),
            "documents_per_s": round(self.documents_per_s),
        }


def plan_days(
    fingerprints: dict[str, str],
    full: bool,
    served: Generation | None,
    segments: list[Segment],
    all_days: list[str],
) -> dict[str, list[str]]:
    """Which days each view (name -> fingerprint) must recompute in this run: the new days, or
    every day for a view the served generation lacks or computed with other code. The filter
    table (views.filter_table.NAME) is planned the same way."""
    if full or served is None:
        return {name: list(all_days) for name in fingerprints}
    new_days = sorted({d for s in segments if s.gen > served.gen for d in s.days})
    plan = {}
    for name, fp in fingerprints.items():
        changed = served.fingerprints.get(name) != fp or name not in served.day_map
        plan[name] = list(all_days) if changed else new_days
    return plan


def pass_partitions(segments: list[Segment], days: list[str]) -> int:
    """The shared pass's partitions for reading ``days`` (views.shared_pass.partitions_for), from
    the segments' counts of events (every segment with one of the days: an upper bound)."""
    wanted = set(days)
    return shared_pass.partitions_for(sum(s.events for s in segments if wanted.intersection(s.days)))


MOVED_STORAGE: str | None = "MEMORY_AND_DISK"
"""How the events moved by visitor are kept for the filter table's write once the views' write has
computed them (a pyspark.StorageLevel name; None: not kept, the table's write runs the shuffle
again). docs/filters.md has the measured choice."""


def kept(moved: DataFrame, storage: str) -> DataFrame:
    """``moved``, kept at ``storage`` (a StorageLevel name) by the first job that computes it, for
    the jobs after it: a local checkpoint, not eager, planned without adaptive execution.

    Not eager, so nothing runs now: the views' write computes the moved events (its one shuffle)
    and stores them as it goes, and the filter table's write reads them back. Planned without
    adaptive execution, so the checkpoint keeps the shuffle's hash partitioning by visitor (an
    adaptive plan reports none before it has run): the queries over it group by visitor with no
    exchange of their own. A ``persist()`` would have the same problem until it is filled, and
    filling it first is one more job over every event (docs/filters.md has both measured)."""
    from pyspark import StorageLevel

    spark = moved.sparkSession
    adaptive = str(spark.conf.get("spark.sql.adaptive.enabled"))
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        # A new Dataset (select): one planned before keeps its adaptive plan.
        return moved.select("*").localCheckpoint(eager=False, storageLevel=getattr(StorageLevel, storage))
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)


def released(checkpoint: DataFrame) -> None:
    """Drop the blocks of a DataFrame :func:`kept` made."""
    checkpoint._jdf.queryExecution().logical().rdd().unpersist(False)


def _on_days(moved: DataFrame, days: list[str], all_days: list[str]) -> DataFrame:
    """``moved`` restricted to ``days`` (all of them when they are every day read): a filter,
    which keeps the partitioning, so what follows needs no exchange either."""
    from datetime import date

    from pyspark.sql import functions as F

    if days == all_days:
        return moved
    return moved.where(F.col("day").isin([date.fromisoformat(d) for d in days]))


def table_rows(moved: DataFrame, dimensions: list[View], days: list[str], all_days: list[str]) -> DataFrame:
    """The filter table's rows of ``days`` (page-view rows and visit rows) from the events moved by
    visitor (keyed over ``dimensions``, read for ``all_days``), grouped with ``visitor_id`` too
    (the same groups: the visitor column is its hash) so that the moved events' partitioning
    satisfies the grouping and the aggregation adds no exchange.

    The table's visit rows are per visit and visitor, so its events are given their visits by
    window functions (views.shared_pass.with_visits), in the table's own job; the views count
    theirs in the scan (views.visit_scan)."""
    visits = shared_pass.with_visits(_on_days(moved, days, all_days), dimensions, ())
    return filter_table.table_rows(visits, dimensions, by=("visitor_id",)).drop("visitor_id")


class BatchJob:
    """Holds the clients one run needs; ``run()`` performs one generation."""

    def __init__(self, settings: Settings, spark: SparkSession | None = None) -> None:
        self.settings = settings
        self.spark = spark or spark_session(settings, "lambda-batch", settings.batch_java_options)
        self.mongo = connect(settings)
        self.db = self.mongo[settings.mongo_db]
        self.redis = redis_client.connect(settings)
        self.registry = GenerationRegistry(
            MongoGenerationStore(self.db), RedisHotCopy(self.redis), lambda: log_end_offsets(settings)
        )
        self.lease = BatchLease(MongoLeaseStore(self.db), settings.batch_lease_s)
        self.master = MasterDataset(settings, MongoManifest(self.db))
        self.store: BatchViewWriter = MongoBatchWriter(self.db, settings.mongo_url)
        self.filters: FilterTableWriter = ParquetFilterTableWriter(settings.filter_table_uri)

    def close(self) -> None:
        self.mongo.close()
        self.redis.close()

    def run(self, full: bool = False) -> RunSummary:
        wait_for_services(self.settings, job="the batch run")
        with self.lease.held(f"{socket.gethostname()}:{os.getpid()}") as held:
            self._clean_up_after_crashes(held)
            held.check("open a generation")
            gen = self.registry.open("full" if full else "incremental")
            try:
                return self._build(gen, full, held)
            except BaseException as exc:
                if isinstance(exc, LeaseLost) or held.lost.is_set():
                    # The lease's new holder owns the cleanup: it fails and drops this generation.
                    log.error("generation %d stopped: %s", gen.gen, exc)
                    raise
                log.error("generation %d failed: %r; the served generation is unchanged", gen.gen, exc)
                if self.registry.fail(gen, repr(exc)):
                    self.store.drop_generation(gen.gen)
                    self.filters.drop_generation(gen.gen)
                raise

    def _clean_up_after_crashes(self, held: Held) -> None:
        held.check("clean up after crashed runs")
        for stale in self.registry.abandon_stale():
            log.warning("generation %d was abandoned by a crashed run; dropping its partial views", stale.gen)
            self.store.drop_generation(stale.gen)
            self.filters.drop_generation(stale.gen)
        orphans = self.master.remove_orphans(self.spark)
        if orphans:
            log.warning(
                "removed %d uncommitted segment(s) left by a crashed absorb: %s", len(orphans), orphans
            )

    def _build(self, gen: Generation, full: bool, held: Held) -> RunSummary:
        s = self.settings
        summary = RunSummary(gen=gen.gen, kind=gen.kind)
        faults.checkpoint(s, "opened")

        # 1. absorb the log up to the cut, after a look at how close to retention the log is
        try:
            retention = log_retention.watch(s, self.master.absorbed_until())
        except (KafkaException, RuntimeError) as exc:  # advisory: the absorb says what is wrong
            log.warning("could not read how close the log is to its retention: %s", exc)
        else:
            if (warning := retention.warning()) is not None:
                log.warning(warning)
            summary.retention = retention.as_dict()
        t0 = time.monotonic()
        dlq = EventProducer(s)
        with SparkProgress(self.spark, "absorb"):
            segment = self.master.absorb(
                self.spark,
                gen.gen,
                gen.cut,
                log_start_offsets(s),
                lambda payload, reason, partition, offset: dlq.dead_letter(
                    payload, reason, DLQ_SOURCE, dlq_key(DLQ_SOURCE, s.events_topic, partition, offset)
                ),
            )
        dlq.flush()
        faults.checkpoint(s, "absorbed")
        if segment is not None:
            held.check("commit the absorbed segment")
            self.master.commit(segment)
            summary.events_absorbed, summary.invalid_records = segment.events, segment.invalid
            summary.invalid_reasons = dict(segment.invalid_reasons)
        summary.dead_letters_total = self.master.invalid_reasons()
        summary.seconds["absorb"] = time.monotonic() - t0
        log.info(
            "absorbed %d events (%d invalid) in %.1f s (%.0f events/s)",
            summary.events_absorbed,
            summary.invalid_records,
            summary.seconds["absorb"],
            summary.events_absorbed / max(summary.seconds["absorb"], 1e-9),
        )

        # 2. compute and write every view for the days it needs
        t0 = time.monotonic()
        served = self.registry.served()
        views = all_views()
        layout = stored_layout()  # the batch views' (views.registry.pass_fingerprint)
        fingerprints = {v.name: fingerprint(v, layout) for v in views}
        if s.filter_table:
            fingerprints[filter_table.NAME] = filter_table.fingerprint(layout)
        master_days = self.master.days()
        plan = plan_days(fingerprints, full, served, self.master.segments(), master_days)
        days_needed = sorted({d for days in plan.values() for d in days})
        day_map: dict[str, dict[str, int]] = {}
        if days_needed:
            events = self.master.read(self.spark, None if days_needed == master_days else days_needed)
            assert events is not None
            partitions = pass_partitions(self.master.segments(), days_needed)
            self._write_all(gen.gen, events, views, plan, partitions, held, summary)
        summary.view_days_recomputed = {v.name: len(plan[v.name]) for v in views}
        for name in fingerprints:
            held_days = dict(served.day_map.get(name, {})) if served is not None and not full else {}
            held_days.update({d: gen.gen for d in plan[name]})
            day_map[name] = held_days
        summary.seconds["views"] = time.monotonic() - t0
        faults.checkpoint(s, "written")

        # 3. publish, then retire what is no longer needed
        t0 = time.monotonic()
        gen.day_map = day_map
        gen.fingerprints = fingerprints
        gen.views = {v.name: describe(v) for v in views}
        gen.stats = {
            "events_absorbed": summary.events_absorbed,
            "invalid_records": summary.invalid_records,
            "invalid_reasons": summary.invalid_reasons,
            "dead_letters_total": summary.dead_letters_total,
            "documents_written": summary.documents_written,
            "view_days_recomputed": summary.view_days_recomputed,
            "retention": summary.retention,
            "lost_to_retention": self.master.lost_to_retention(),
        }
        held.check("publish")
        self.registry.publish(gen, lambda: faults.checkpoint(s, "switching"))
        held.check("retire and collect garbage")
        summary.retired = [g.gen for g in self.registry.retire(keep=2)]
        summary.dropped_collections, summary.dropped_filter_table = self._garbage_collect()
        summary.seconds["publish"] = time.monotonic() - t0
        return summary

    def _write_all(
        self,
        gen: int,
        events: DataFrame,
        views: list[View],
        plan: dict[str, list[str]],
        partitions: int,
        held: Held,
        summary: RunSummary,
    ) -> None:
        """The views' documents and the filter table's files of the days ``plan`` names, from one
        shuffle of the events by visitor into ``partitions`` partitions (views.shared_pass).

        The shared pass's stages are composed here: keyed events (every key the views to
        recompute and the filter table need, the views' first, so that the ``_k<i>`` of view i
        is the same column for both) moved by visitor, then the views' rows and the table's rows
        from the same moved events. Two writes are two Spark jobs, and each would run the
        shuffle again: the moved events are kept (:func:`kept`, :data:`MOVED_STORAGE`) by the
        views' write, which computes them, for the table's, and released after. The table's grouping
        includes ``visitor_id`` so that the moved events' partitioning satisfies its aggregation:
        no exchange of its own."""
        s = self.settings
        todo = [v for v in views if plan[v.name]]
        table_days = plan.get(filter_table.NAME, [])
        if not table_days:
            # The views alone: one Spark job writes all their documents straight from the pass.
            needed = events.select(*input_columns(todo, self.spark))
            rows = shared_pass.compute(needed, todo, s.hll_lg_k, partitions=partitions)
            held.check("write the views")
            self._write_views(gen, rows, {v.name: plan[v.name] for v in todo}, summary)
            return
        names = {v.name for v in todo}
        dimensions: list[View] = [*todo, *[d for d in filter_table.dimensions() if d.name not in names]]
        needed = events.select(*input_columns(dimensions, self.spark))
        keyed = shared_pass.keyed_events(needed, dimensions, ())
        moved = shared_pass.partitioned(keyed, single_partition=False, partitions=partitions)
        all_days = sorted({d for days in plan.values() for d in days})
        storage = MOVED_STORAGE if todo else None  # one write needs nothing kept
        if storage is not None:
            moved = kept(moved, storage)
        try:
            if todo:
                view_days = sorted({d for v in todo for d in plan[v.name]})
                rows = shared_pass.aggregate(
                    shared_pass.count_per_visitor(_on_days(moved, view_days, all_days), todo, ()),
                    todo,
                    (),
                    s.hll_lg_k,
                )
                held.check("write the views")
                self._write_views(gen, rows, {v.name: plan[v.name] for v in todo}, summary)
            t0 = time.monotonic()
            table = table_rows(moved, dimensions, table_days, all_days)
            held.check("write the filter table")
            with SparkProgress(self.spark, "filter table"):
                self.filters.write(gen, table)
        finally:
            if storage is not None:
                released(moved)
        files = self.filters.files(dict.fromkeys(table_days, gen))
        summary.filter_table = {
            "days_recomputed": len(table_days),
            "files": len(files),
            "bytes": sum(os.path.getsize(f) for f in files),
            "seconds": round(time.monotonic() - t0, 3),
        }
        log.info(
            "filter table: %d day(s) in %d file(s), %.1f MB, in %.1f s",
            len(table_days),
            len(files),
            summary.filter_table["bytes"] / 1e6,
            summary.filter_table["seconds"],
        )

    def _write_views(
        self, gen: int, rows: DataFrame, days: dict[str, list[str]], summary: RunSummary
    ) -> None:
        """Every view's documents in one job, then each view's day rankings. The progress line
        counts the documents in the generation's collections as they fill."""
        t0 = time.monotonic()

        last = [0, 0.0]  # documents and elapsed seconds at the previous line

        def documents(elapsed: float) -> str:
            n = self.store.documents_in(gen, days)
            rate = (n - last[0]) / max(elapsed - last[1], 1e-9)
            last[:] = [n, elapsed]
            return f"{n:,} documents written ({rate:,.0f} documents/s since the last line)"

        with SparkProgress(self.spark, f"views {', '.join(days)}", detail=documents):
            written = self.store.write(gen, rows, days)
        seconds = time.monotonic() - t0
        summary.insert_seconds = written.insert_seconds
        summary.hour_sketch_documents = written.hour_sketch_documents
        log.info(
            "%d documents of %d view(s) (and %d of hour sketches kept apart) in %.1f s, the shared "
            "pass included; inserted in %.1f s (%.0f documents/s)",
            written.documents,
            len(days),
            written.hour_sketch_documents,
            seconds,
            written.insert_seconds,
            written.inserted / max(written.insert_seconds, 1e-9),
        )
        faults.checkpoint(self.settings, "writing")
        for view, entries in written.entries.items():
            self.store.write_rankings(view, gen, entries, days[view])
            log.info(
                "view %s: %d day(s) recomputed, %d documents in %s",
                view,
                len(days[view]),
                len(entries),
                collection_name(view, gen),
            )
        summary.documents_written = {view: len(entries) for view, entries in written.entries.items()}

    def _garbage_collect(self) -> tuple[list[str], list[str]]:
        """Drop what no retained generation needs (the rules: generations.retention); returns the
        collections and the filter table's directories that went."""
        plan = retention.plan(self.registry.all(), self.settings.retire_grace_s, utc.now())
        dropped = self.store.garbage_collect(plan.referenced, plan.protected)
        # The filter table's directories go by the same rules, whether the table is on or not (one
        # turned off leaves nothing behind once its generations are retired).
        directories = self.filters.garbage_collect(plan.referenced, plan.protected)
        # Realtime keys go with their generation: the speed layer stopped counting it when it left
        # the active set, and queries read the served generation and its realtime keys in one
        # Redis transaction, so none sees a half-deleted generation.
        keep = plan.protected | plan.retained | set(self.registry.active_cuts())
        stale = {g for g in realtime_generations(self.redis) if g not in keep}
        if stale:
            deleted = drop_generations(self.redis, stale)
            log.info("deleted %d realtime keys of retired generation(s) %s", deleted, sorted(stale))
        for g in plan.expired:
            self.registry.mark_dropped(g)
        return dropped, directories
