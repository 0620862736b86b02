"""The one shared aggregation pass: every declared dimension from the same events, one event shuffle.

Both layers call :func:`view_rows`: the batch layer over the master dataset's days, the speed layer
over each micro-batch (with the generation as an extra grouping column). The stages:

1. :func:`keyed_events`: every dimension's stored key per event, computed before anything moves.
2. :func:`partitioned` and :func:`count_per_visitor`: the one shuffle of events, by visitor.
   Inside each partition: one row per (dimension, level) with level an hour or the whole day, page
   views per (view, key, day, level, visitor). The events come deduplicated by the layer (the rule
   of contract.duplicates): the pass counts every event it is given. The visits
   (:mod:`views.sessions`) are built in the same partitions, since a visitor-day lies in one: their
   credited rows join the per-visitor rows before the aggregation.
3. :func:`aggregate`: per (view, key, day, level) page views, exact distinct visitors and the HLL
   sketch, partially aggregated per partition (exact, since a visitor lives in one partition) and
   then exchanged as aggregates; then one row per (view, key, day) with its hours (:func:`assemble`).

A reader that stores no exact visitor count (the speed layer) skips stage 2 and the shuffle by
visitor: :func:`count_events` aggregates page views and sketches straight from the keyed events.

So the number of shuffles does not grow with the number of dimensions: adding one adds rows inside
the same stages. docs/views.md has the measured costs behind each choice.

Output, one row per (extra columns, view, key, UTC day), the shape of :mod:`views.rows` plus
``view``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from config.settings import get_settings
from views import sessions
from views.columns import built, with_given
from views.dimension import Dimension, View, site_column
from views.visit_scan import GROUP, VisitScan

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

STAGES = (
    "keyed_events",
    "partitioned",
    "count_per_visitor",
    "with_visits",
    "aggregate",
    "count_events",
    "assemble",
)
"""The stage functions, by name: the fingerprint hashes their live source."""


def keyed_events(
    events: DataFrame, dimensions: Sequence[Dimension], by: Sequence[str], single_partition: bool = False
) -> DataFrame:
    """(by..., day, hour, visitor_id, event_id, k0..kN): every dimension's stored key, per event.

    Keys are computed before the shuffle so that it moves short keys, not the raw fields they come
    from (a user agent alone is longer than all the keys together). A dimension declared
    ``once_per_value`` gets its key from a broadcast table of the distinct values of the fields it
    reads (:func:`_key_per_value`). The values dimensions are given (``Dimension.given``) are
    computed first, in a projection of their own. The day stays a date (an int) through the pass and becomes
    the stored ``YYYY-MM-DD`` string only on the output rows (:func:`aggregate`).

    With ``single_partition`` every key is evaluated per event: the broadcast table would cost a
    Spark job of its own, more than the per-event expression on a small input."""
    from pyspark.sql import functions as F

    events = with_given(events, [g for d in dimensions for g in d.given])
    keys = []
    for i, d in enumerate(dimensions):
        if d.once_per_value and not single_partition:
            events = _key_per_value(events, d, f"_v{i}")
            keys.append(d.stored_key(F.col(f"_v{i}")).alias(f"_k{i}"))
        else:
            keys.append(built(("key", d, i), lambda d=d, i=i: d.stored_key().alias(f"_k{i}")))  # type: ignore[misc]
    visit_columns = (
        [built(("site",), lambda: site_column().alias("site")), F.unix_micros("ts").alias("ts_us")]
        if sessions.counts_visits(dimensions)
        else []
    )
    return events.select(
        *by,
        F.to_date("ts").alias("day"),
        F.hour("ts").alias("hour"),
        "visitor_id",
        "event_id",
        *visit_columns,
        *keys,
    )


def _key_per_value(events: DataFrame, dimension: Dimension, name: str) -> DataFrame:
    """``events`` plus column ``name``: the dimension's key, evaluated once per distinct value of
    the fields it reads and joined back on them (null-safe, so a missing field finds its row)."""
    from functools import reduce

    from pyspark.sql import functions as F

    fields = dimension.key_columns(events)
    table = (
        events.select(*fields)
        .distinct()
        .select(*[F.col(f).alias(f"{name}_{f}") for f in fields], dimension.key().alias(name))
    )
    on = reduce(lambda a, b: a & b, [F.col(f).eqNullSafe(F.col(f"{name}_{f}")) for f in fields])
    return events.join(F.broadcast(table), on, "left").drop(*[f"{name}_{f}" for f in fields])


DAY = 24
"""The level of a day's totals, beside the hours 0-23 (:func:`count_per_visitor`)."""


def level_entries(dimensions: Sequence[Dimension]) -> Column:
    """The (v, key, level) structs of one keyed event (:func:`keyed_events`' ``_k0..`` columns),
    for each dimension that counts page views, at its hour and at DAY: ``inline`` makes them its
    rows. (The entry and exit pages count visits only: views.sessions.)"""
    from pyspark.sql import functions as F

    indices = tuple(i for i, d in enumerate(dimensions) if d.counts_page_views)
    return built(
        ("entries", indices),
        lambda: F.array(
            *[
                F.struct(F.lit(i).alias("v"), F.col(f"_k{i}").alias("key"), level.alias("level"))
                for i in indices
                for level in (F.col("hour"), F.lit(DAY))
            ]
        ),
    )


def partitions_for(events: int) -> int:
    """The shuffle's partitions for a pass over ``events`` events: enough that no task reads more
    than ``batch_views_per_task`` of them, since each holds its page views in memory to count their
    visits (views.visit_scan), and never fewer than Spark's shuffle partitions. The shuffle hashes
    visitors, so a task reads about its share."""
    settings = get_settings()
    return max(settings.spark_shuffle_partitions, -(-events // settings.batch_views_per_task))


def partitioned(keyed: DataFrame, single_partition: bool, partitions: int | None = None) -> DataFrame:
    """The one shuffle of events: by visitor, into ``partitions`` partitions (None: Spark's shuffle
    partitions, which adaptive execution may coalesce), or, for a small input, everything in one
    partition without a shuffle: ``coalesce(1)``; a single partition satisfies any grouping that
    follows. A task's visits in the scan hold its page views in memory (views.visit_scan): the
    batch layer sizes ``partitions`` from the events it reads (:func:`partitions_for`)."""
    if single_partition:
        return keyed.coalesce(1)
    return keyed.repartition(partitions, "visitor_id") if partitions else keyed.repartition("visitor_id")


def count_per_visitor(moved: DataFrame, dimensions: Sequence[Dimension], by: Sequence[str]) -> DataFrame:
    """Page views (``n``) per (by..., v, key, day, level, visitor), v the dimension's index in
    ``dimensions`` and level an hour or DAY, of events each layer has already deduplicated by the
    one rule (contract.duplicates: not here, where a re-send whose fields changed would look new),
    already moved by visitor (:func:`partitioned`); and, when a dimension counts visits, the
    visits' rows (``visitor_id`` null, ``n`` 0, the visit metrics summed per (by..., v, key, day,
    level) in each task: views.visit_scan).

    Exploding to one row per dimension and level and counting per visitor happen inside the
    partition. Every visitor's rows stay in one partition, so the per-partition partial counts and
    sketches of :func:`aggregate` add up exactly. Each visitor counts once at the DAY level however
    many hours they were active in: that is the day's exact distinct count, without a second pass
    or a join. The view and the day travel as ints through the two largest hash aggregations
    (docs/views.md has the figures).

    The visits are counted in the same scan (views.visit_scan): each task records the views it
    reads, and the per-visitor aggregation, which emits nothing before it has read them all, is
    followed by the task's visit rows. So the events are scanned and moved once, and not sorted.
    """
    from pyspark.sql import functions as F

    if not sessions.counts_visits(dimensions):
        return (
            moved.select(*by, "day", "visitor_id", F.inline(level_entries(dimensions)))
            .groupBy(*by, "v", "key", "day", "level", "visitor_id")
            .agg(F.count(F.lit(1)).alias("n"))
        )
    settings = get_settings()
    scan = VisitScan(moved, dimensions, settings.session_gap_s, settings.batch_record_limit_mib)
    hosts = [i for i, d in enumerate(dimensions) if d.counts_page_views]
    # Every event makes a row of its visitor-day at the DAY level of the first dimension that counts
    # page views (or of a host of its own, dropped after, when none does): the emit's hosts.
    host = hosts[0] if hosts else HOST
    own_host = F.array(_entry(HOST, F.lit(None).cast("string"), F.lit(DAY)))
    entries = level_entries(dimensions) if hosts else own_host
    per_visitor = (
        scan.recorded(moved, by)
        .select(*by, "day", "visitor_id", F.inline(entries))
        .groupBy(*by, "v", "key", "day", "level", "visitor_id")
        .agg(F.count(F.lit(1)).alias("n"))
    )
    hosting = (F.col("v") == host) & (F.col("level") == DAY)
    hosted = per_visitor.select("*", F.when(hosting, scan.visits()).alias("_visits"))
    none = F.lit(None).cast("long")
    # The emitted rows' shape (views.visit_scan), so that the generator runs in generated code.
    own = F.struct(
        F.lit(None).cast("string").alias(GROUP),
        "v",
        "key",
        "day",
        "level",
        "visitor_id",
        "n",
        *[none.alias(m) for m in sessions.METRICS],
    )
    both = F.when(F.col("_visits").isNull(), F.array(own)).otherwise(F.concat(F.array(own), "_visits"))
    rows = hosted.select(*by, F.inline(both))
    if by:  # a visit row's group is its own, not its host row's
        types = ", ".join(f"`{c}` {moved.schema[c].dataType.simpleString()}" for c in by)
        group = F.from_json(GROUP, f"struct<{types}>")
        rest = [c for c in rows.columns if c not in (*by, GROUP)]
        own_group = [F.when(F.col(GROUP).isNull(), F.col(c)).otherwise(group[c]).alias(c) for c in by]
        rows = rows.select(*own_group, *rest)
    else:
        rows = rows.drop(GROUP)
    return rows.where(F.col("v") != HOST) if not hosts else rows


HOST = -1
"""The view index of the host rows :func:`count_per_visitor` adds when no dimension counts page views."""


def _entry(v: int, key: Column, level: Column) -> Column:
    from pyspark.sql import functions as F

    return F.struct(F.lit(v).alias("v"), key.alias("key"), level.alias("level"))


def with_visits(moved: DataFrame, dimensions: Sequence[Dimension], by: Sequence[str]) -> DataFrame:
    """The events moved by visitor, each with its visit (views.sessions.sessionised, first and last
    keys of ``dimensions``): window functions clustered by visitor-day, no exchange. The filter
    table's write reads them (views.filter_table.table_rows: a row per visit and visitor).

    The views are walked backwards, so the visit (:data:`views.sessions.VISIT`) is kept on its
    first view's row only (null on the others), without the ids that only ordered the views; the
    summaries' own columns, each event's id and its time are dropped (the table reads neither)."""
    from pyspark.sql import functions as F

    visit = F.col(sessions.VISIT)
    summaries = sessions.as_summaries(moved, dimensions, lean=True)
    rows = sessions.sessionised(summaries, by, get_settings().session_gap_s, backwards=True)
    kept = [c for c in moved.columns if c not in ORDERING_ONLY]
    first = sessions.keys_struct(sessions.first_keyed(dimensions))  # the row's own: its visit's first view
    closing = F.when(visit["closes"], visit.dropFields("s_id", "e_id").withField("first", first))
    return rows.select(*kept, closing.alias(sessions.VISIT))


ORDERING_ONLY = ("event_id", "ts_us")
"""The keyed events' columns that only order the views of a visit (views.sessions.as_summaries)."""


def _metric_sums(rows: DataFrame) -> list[Column]:
    """The visit metrics' sums (views.sessions.METRICS), null where no row carries them."""
    from pyspark.sql import functions as F

    return [(F.sum(m) if m in rows.columns else F.lit(None).cast("long")).alias(m) for m in sessions.METRICS]


def aggregate(visits: DataFrame, dimensions: Sequence[Dimension], by: Sequence[str], lg_k: int) -> DataFrame:
    """View rows from the per-visitor counts (and the visits' credited rows, whose ``visitor_id``
    is null): the day's totals and its hours (views.rows).

    Per (view, key, day, level): page views, distinct visitors (rows, each visitor once), the HLL
    sketch and the visit metrics' sums, partially aggregated in each partition (exact: a visitor
    lives in one partition) before the exchange; then :func:`assemble`."""
    from pyspark.sql import functions as F

    viewer = F.when(F.col("n") > 0, F.col("visitor_id"))  # a visitor with page views here
    levels = visits.groupBy(*by, "v", "key", "day", "level").agg(
        F.sum("n").alias("pv"),
        F.count(viewer).alias("uv"),
        F.hll_sketch_agg(viewer, lg_k).alias("sk"),
        *_metric_sums(visits),
    )
    return assemble(levels, dimensions, by)


def count_events(
    keyed: DataFrame,
    dimensions: Sequence[Dimension],
    by: Sequence[str],
    lg_k: int,
    single_partition: bool,
    visit_rows: DataFrame | None = None,
) -> DataFrame:
    """Per (by..., v, key, day, level): page views and the HLL sketch of the visitors, straight
    from the keyed events, with no exact visitor count (``uv`` null): for a reader that stores only
    page views and sketches (the speed layer's realtime views), the per-visitor count and the
    shuffle by visitor it needs are work nobody reads. The sketch is the same either way: an HLL
    sketch of a visitor seen twice is the sketch of the visitor seen once. ``visit_rows``: the
    visits' credited rows (views.sessions.credited), summed in the same aggregation."""
    from pyspark.sql import functions as F

    rows = (keyed.coalesce(1) if single_partition else keyed).select(
        *by, "day", "visitor_id", F.inline(level_entries(dimensions))
    )
    if visit_rows is not None:
        rows = rows.unionByName(visit_rows, allowMissingColumns=True)
        if single_partition:
            rows = rows.coalesce(1)  # a union of two single partitions has two
    return (
        rows.groupBy(*by, "v", "key", "day", "level")
        .agg(
            F.count("visitor_id").alias("pv"),
            F.hll_sketch_agg("visitor_id", lg_k).alias("sk"),
            *_metric_sums(rows),
        )
        .select(
            *by,
            "v",
            "key",
            "day",
            "level",
            "pv",
            F.lit(None).cast("long").alias("uv"),
            "sk",
            *sessions.METRICS,
        )
    )


def assemble(levels: DataFrame, dimensions: Sequence[Dimension], by: Sequence[str]) -> DataFrame:
    """One row per (by..., view, key, day) from the (pv, uv, sk) of each level: the DAY level as
    the day's totals and the hours as its list, named and formatted as stored only then."""
    from pyspark.sql import functions as F

    group = [*by, "v", "key", "day"]
    is_day = F.col("level") == DAY

    def day_total(name: str) -> Column:
        return F.max(F.when(is_day, F.col(name))).alias(name)

    hour = F.struct(F.col("level").alias("hour"), "pv", "uv", "sk", *sessions.METRICS)
    names = F.array(*[F.lit(d.name) for d in dimensions])
    return (
        levels.groupBy(*group)
        .agg(
            day_total("pv"),
            day_total("uv"),
            F.first(F.when(is_day, F.col("sk")), ignorenulls=True).alias("sk"),
            F.sort_array(F.collect_list(F.when(~is_day, hour))).alias("hours"),
            *[day_total(m) for m in sessions.METRICS],
        )
        .select(
            *by,
            F.element_at(names, F.col("v") + 1).alias("view"),
            "key",
            F.date_format("day", "yyyy-MM-dd").alias("day"),
            "pv",
            "uv",
            "sk",
            "hours",
            *sessions.METRICS,
        )
    )


def view_rows(
    events: DataFrame,
    dimensions: Sequence[Dimension],
    lg_k: int,
    by: Sequence[str] = (),
    single_partition: bool = False,
    exact_visitors: bool = True,
    partitions: int | None = None,
) -> DataFrame:
    """View rows of every dimension in ``dimensions`` from ``events`` (contract columns plus the
    ``by`` columns), grouped by ``by`` too; ``single_partition`` for small inputs (no exchange);
    without ``exact_visitors``, ``uv`` is null and no per-visitor count is made (:func:`count_events`);
    ``partitions``: the shuffle's (:func:`partitioned`)."""
    if not dimensions:
        raise ValueError("view_rows needs at least one dimension")
    keyed = keyed_events(events, dimensions, by, single_partition)
    if not exact_visitors:
        return assemble(count_events(keyed, dimensions, by, lg_k, single_partition), dimensions, by)
    visits = count_per_visitor(partitioned(keyed, single_partition, partitions), dimensions, by)
    return aggregate(visits, dimensions, by, lg_k)


def compute(
    events: DataFrame,
    views: Sequence[View],
    lg_k: int,
    by: Sequence[str] = (),
    single_partition: bool = False,
    exact_visitors: bool = True,
    partitions: int | None = None,
) -> DataFrame:
    """View rows of ``views``, every one in the shared pass (:func:`view_rows`).

    ``single_partition`` computes them in one task with no exchange (for small inputs); the rows
    are the same either way. Without ``exact_visitors`` the ``uv`` is null (:func:`count_events`).
    ``partitions``: the shuffle's (:func:`partitioned`)."""
    if not views:
        raise ValueError("no views to compute")
    return view_rows(events, list(views), lg_k, by, single_partition, exact_visitors, partitions)


def input_columns(views: Sequence[View], spark: SparkSession) -> tuple[str, ...]:
    """Every contract field the views read (the projection before the pass)."""
    from contract.spark_schema import event_schema

    empty = spark.createDataFrame([], event_schema())
    needed = {"event_id", "ts", "visitor_id"}
    if sessions.counts_visits(views):
        needed.add("url")  # a visit's site
    for v in views:
        needed.update(v.input_columns(spark, empty))
    return tuple(sorted(needed))
