"""The speed layer's visit states rebuilt: after a restart, or wherever a task finds its
partition's state elsewhere than at its micro-batch's start.

A partition's state at offset ``S`` is a function of the log: the visits of the partition's counted
page views below ``S`` (those that ended before the committed cut-off, ``dropped_before_us``, left
out: the state had let go of them). The master dataset holds the accepted, deduplicated events below
the offsets the batch layer absorbed (``A``), so the rebuild takes:

1. the **seed**: the visits of the master dataset's events below ``min(A, S)``, computed by the one
   definition (views.sessions.merge) per partition, as far back as the horizon needs (the days of
   the cut-off onwards), collected into the driver (``lambda_platform.visits.VisitSeed``);
2. where the speed layer is ahead of the batch layer (``A < S``), the **replay** of ``[A, S)``: the
   records read back from Kafka through the contract and the dedup (its state rebuilt at ``A`` from
   the window before), their keys made by the views' code, merged into the seed by the same JVM
   function as every micro-batch, whose changes are dropped. Both states then stand at ``S``.

The micro-batch runs again with the seed beside its own function: a partition whose state is still
missing takes the seed's where it stands at the range's start. A fresh start
(:func:`fresh_start`) only records the horizon: its first micro-batch finds no state and rebuilds.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from generations.model import Offsets
from speed_layer.dedup import counted
from speed_layer.outputs import COUNTED
from speed_layer.stream import at_or_past, read_range
from speed_layer.visits import Horizon, dimensions_mark
from stores.redis import visit_state
from views import sessions
from views.dimension import Dimension
from views.shared_pass import keyed_events

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column, DataFrame

    from speed_layer.context import SpeedContext
    from stores.parquet.master import MasterReader

log = logging.getLogger(__name__)


def fresh_start(context: SpeedContext, start: Offsets | None) -> None:
    """Start the visit bookkeeping over for a stream from ``start``: its watermark is the newest
    log-append time of the master dataset's events below ``start`` (the visits the states are
    seeded with), and its cut-off the horizon's from there."""
    settings = context.settings
    mark = dimensions_mark(context.dimensions)
    events = None if start is None else context.master.read(context.spark)
    newest = None
    if events is not None:
        from pyspark.sql import functions as F

        assert start is not None
        row = events.where(~at_or_past(start)).agg(F.max(F.unix_millis("log_time"))).first()
        newest = None if row is None else row[0]
    if newest is None:
        visit_state.clear(context.redis, mark)
        log.info("visit state: starts empty (no event of the master dataset is below the stream's start)")
        return
    horizon = Horizon(int(newest), visit_state.NEVER, settings.visit_lateness_s, settings.session_gap_s)
    visit_state.clear(context.redis, mark, horizon.watermark_ms, horizon.drop_before_us)


def rebuild(context: SpeedContext, starts: Offsets, ends: Offsets, horizon: Horizon) -> Any:
    """Rebuild the visit states of every partition of the micro-batch at ``starts``; returns the
    seed for the micro-batch's function (speed_layer.visits.Marker.seed)."""
    t0 = time.monotonic()
    at = {p: starts.get(p, 0) for p in ends}
    master = context.master
    absorbed = master.absorbed_until()
    seed_at = {p: min(absorbed.get(p, 0), o) for p, o in at.items()}
    seed = context.visits.seed(seed_at)
    seeded = 0
    visits = _seed_visits(context, master, seed_at, horizon)
    if visits is not None:
        seeded = int(seed.add(visits._jdf.toLocalIterator()))
    replay = {p: (seed_at[p], at[p]) for p in at if seed_at[p] < at[p]}
    if replay:
        _replay(context, seed, replay, horizon)
    log.info(
        "visit state rebuilt at %s: %d visits seeded from the master dataset, %d records of log replayed, "
        "in %.1f s",
        at,
        seeded,
        sum(b - a for a, b in replay.values()),
        time.monotonic() - t0,
    )
    return seed


def _seed_visits(
    context: SpeedContext, master: MasterReader, below: Offsets, horizon: Horizon
) -> DataFrame | None:
    """The visits of the master dataset's events below ``below`` that the horizon still holds
    (:func:`seed_visits`), read from the days of its cut-off onwards."""
    first_day = datetime.fromtimestamp(max(horizon.dropped_before_us, 0) / 1e6, UTC).strftime("%Y-%m-%d")
    days = [d for d in master.days() if d >= first_day]
    events = master.read(context.spark, days) if days else None
    if events is None:
        return None
    return seed_visits(
        events.where(~at_or_past(below)),
        context.dimensions,
        context.input_columns,
        context.settings.session_gap_s,
        horizon.dropped_before_us,
    )


def seed_visits(
    events: DataFrame,
    dimensions: Sequence[Dimension],
    input_columns: Sequence[str],
    gap_s: int,
    dropped_before_us: int,
) -> DataFrame:
    """The visits of ``events`` (counted page views with ``kafka_partition``) per partition, those
    that ended before ``dropped_before_us`` left out, in the columns ``VisitSeed.add`` reads."""
    from pyspark.sql import functions as F

    columns = [c for c in input_columns if c in events.columns]
    keyed = keyed_events(events.select(*columns, "kafka_partition"), dimensions, ["kafka_partition"])
    part = F.col("kafka_partition").cast("int")
    summaries = (
        sessions.as_summaries(keyed, dimensions)
        .withColumn("p_lo", part)
        .withColumn("p_hi", part)
        .drop("hour", "ts_us", "event_id", *[c for c in keyed.columns if c.startswith("_k")])
    )

    def keys(side: str, dims: list[tuple[int, Dimension]]) -> Column:
        if not dims:
            return F.array().cast("array<string>")
        return F.array(*[F.col(side)[d.name] for _, d in dims])

    return (
        sessions.merge(summaries, ["kafka_partition"], gap_s)
        .where(F.col("e_ts") >= F.lit(dropped_before_us))
        .select(
            F.col("kafka_partition").cast("int"),
            F.unix_date("day"),
            "site",
            "visitor_id",
            "s_ts",
            "s_id",
            "e_ts",
            "e_id",
            keys("first", sessions.first_keyed(dimensions)),
            keys("last", sessions.last_keyed(dimensions)),
            "n",
            "p_lo",
            "p_hi",
        )
    )


def _replay(context: SpeedContext, seed: Any, ranges: dict[int, tuple[int, int]], horizon: Horizon) -> None:
    """Merge the counted page views of the log ``ranges`` into the seed's states (and move the
    dedup's states of those partitions to the ranges' ends)."""
    starts = {p: a for p, (a, _) in ranges.items()}
    ends = {p: b for p, (_, b) in ranges.items()}
    records = read_range(context.spark, context.settings, ranges, context.input_columns)
    marked, dedup_marker = context.dedup.mark(records, starts, ends)
    context.dedup.rebuild(dedup_marker, starts, ends)
    records = marked.select("*", counted().alias(COUNTED))
    # Each key per event: a key per distinct value would read the records once more first.
    keyed = keyed_events(
        records, context.dimensions, ["kafka_partition", "kafka_offset", COUNTED], single_partition=True
    )
    marker = context.visits.marker(starts, ends, horizon)
    marker.seed(seed)
    marker.apply(keyed, context.dimensions, COUNTED)
