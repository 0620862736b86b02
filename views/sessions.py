"""Visits: the one definition of a visit, as Spark transformations both layers call.

A **visit** is a maximal run of one visitor's page views on one site, ordered by event time (ties
by ``event_id``), in which each view is at most the session gap (``session_gap_s``, 30 min) after
the previous one. A visit never crosses a UTC midnight: the visitor-day is the unit of state and of
incremental recompute. A visit is credited to the UTC hour and day of its first view; its entry
page is its first view's URL, its exit page its last view's, its views the number of its page
views, its duration the last view's time minus the first's (integer milliseconds, from microsecond
timestamps: ``(last_us - first_us) // 1000``), and it bounced when it has exactly one view. Its
site, referrer source, country and device are those of its first view.

Everything stored about visits is additive, per (view, key, day) and hour: ``vi`` visits, ``bo``
bounces, ``du`` total duration (ms), ``vv`` page views in visits. Batch and realtime parts add up;
the realtime part may be negative (a retraction: a late view merged two visits the batch counted).

The definition works on **visit summaries**, not on events: a summary is (first view's time, id
and keys; last view's time, id and keys; number of views). A page view is the summary of a visit
of one view, so :func:`sessionised` sessionises events (the batch layer) and merges new page views into
the visits already known (the speed layer's state) alike: the visits of a union of event sets are
the summaries sorted by start and merged wherever one starts at most the gap after the latest end
before it. That is exact because each summary's own views are gap-connected.

Columns of a summary (:data:`SUMMARY_KEYS` plus): ``s_ts``/``e_ts`` first and last view's time in
microseconds, ``s_id``/``e_id`` their event ids, ``first``/``last`` structs of the dimension keys
taken from the first/last view (named by dimension), ``n`` views, ``tainted`` (speed layer only:
the visit holds a view that arrived later than the state's horizon), and in the speed layer
``p_lo``/``p_hi``, the Kafka partitions its views came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from views.dimension import Dimension

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SUMMARY_KEYS = ("site", "visitor_id", "day")
"""A visitor-day: every visit lies inside one (site, visitor, UTC day)."""
METRICS = ("vi", "bo", "du", "vv")
"""Visits, bounces, total duration in milliseconds, page views in visits."""
DAY_LEVEL = 24
"""The level of a day's totals beside the hours 0-23 (as in views.shared_pass)."""


def first_keyed(dimensions: Sequence[Dimension]) -> list[tuple[int, Dimension]]:
    """The dimensions (with their index in the pass) whose visit key is the first view's."""
    return [(i, d) for i, d in enumerate(dimensions) if d.visits or d.per_visit == "entry"]


def last_keyed(dimensions: Sequence[Dimension]) -> list[tuple[int, Dimension]]:
    """The dimensions whose visit key is the last view's (the exit page)."""
    return [(i, d) for i, d in enumerate(dimensions) if d.per_visit == "exit"]


def counts_visits(dimensions: Sequence[Dimension]) -> bool:
    return any(d.counts_visits for d in dimensions)


def as_summaries(keyed: DataFrame, dimensions: Sequence[Dimension]) -> DataFrame:
    """Each keyed page view (views.shared_pass.keyed_events: ``site``, ``ts_us`` and the ``_k``
    keys) as the summary of a visit of one view, its other columns kept."""
    from pyspark.sql import functions as F

    return keyed.select(
        "*",
        F.col("ts_us").alias("s_ts"),
        F.col("event_id").alias("s_id"),
        F.col("ts_us").alias("e_ts"),
        F.col("event_id").alias("e_id"),
        _keys_struct(first_keyed(dimensions)).alias("first"),
        _keys_struct(last_keyed(dimensions)).alias("last"),
        F.lit(1).cast("long").alias("n"),
        F.lit(False).alias("tainted"),
    )


def _keys_struct(dims: list[tuple[int, Dimension]]) -> Column:
    from pyspark.sql import functions as F

    if not dims:
        return F.struct(F.lit(None).cast("string").alias("_"))
    return F.struct(*[F.col(f"_k{i}").alias(d.name) for i, d in dims])


VISIT = "_visit"
"""The column of :func:`sessionised`'s visit rows: the visit (s_ts, s_id, e_ts, e_id, first, last, n,
tainted and, in the speed layer, p_lo/p_hi); null on the rows passed through."""


def sessionised(
    summaries: DataFrame, by: Sequence[str], gap_s: int, clustered: bool, pass_through: bool = False
) -> DataFrame:
    """The visits of ``summaries``, one row each (the ``by`` columns, the visitor-day and
    :data:`VISIT`): summaries ordered by first view (time, then id) within their (by...,
    visitor-day), a new visit wherever one starts more than ``gap_s`` after the latest end before
    it. With ``pass_through``, every input row comes out too, its :data:`VISIT` null and the
    visit rows' other columns null: the batch layer counts page views from the same scan.

    The merge is one JVM function (``lambda_platform.visits.Sessioniser`` in toolchain/contract-udf,
    built by ``make setup``): each task keeps the narrow summaries of its partition per group in a
    hash map and orders and merges each group (a visitor-day holds a handful of views) when its
    input ends, so nothing is sorted and no window operator runs (docs/visits.md, "Cost"). Every
    row of a group must be in one partition: ``clustered`` says the input already is (the shared
    pass's shuffle by visitor, or one partition); otherwise it is moved by group first. A task's
    memory is the summaries of its partition, as a hash aggregation's would be."""
    from pyspark.sql import DataFrame as PyDataFrame

    group = [*by, *SUMMARY_KEYS]
    if not clustered:
        summaries = summaries.repartition(*group)
    spark = summaries.sparkSession
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        sessioniser = jvm.lambda_platform.visits.Sessioniser
        jdf = sessioniser.sessionise(summaries._jdf, list(by), gap_s * 1_000_000, pass_through)
    except TypeError as exc:  # py4j: "'JavaPackage' object is not callable", a class it cannot find
        raise RuntimeError(
            "the sessioniser (lambda_platform.visits.Sessioniser) is not on the session's classpath: "
            "run `make setup`, which builds it into the contract jars directory"
        ) from exc
    return PyDataFrame(jdf, spark)


def merge(summaries: DataFrame, by: Sequence[str], gap_s: int, clustered: bool = False) -> DataFrame:
    """The visits of the summaries' views, one summary per visit, per (by..., visitor-day)
    (:func:`sessionised`)."""
    from pyspark.sql import functions as F

    values = [*SUMMARY_VALUES, *(("p_lo", "p_hi") if "p_lo" in summaries.columns else ())]
    return sessionised(summaries, by, gap_s, clustered).select(
        *by, *SUMMARY_KEYS, *[F.col(f"{VISIT}.{c}").alias(c) for c in values]
    )


SUMMARY_VALUES = ("s_ts", "s_id", "e_ts", "e_id", "first", "last", "n", "tainted")
"""A summary's values beside its visitor-day (and, in the speed layer, ``p_lo``/``p_hi``: the
lowest and highest Kafka partition its views came from)."""


def visit_entries(dimensions: Sequence[Dimension], sign: Column | None = None) -> Column:
    """The credited (v, key, level, n, vi, bo, du, vv) structs of a visit row's :data:`VISIT`: per
    visit-counting dimension, at its first view's hour and at the day level; the metrics times
    ``sign`` (the speed layer's retractions)."""
    from pyspark.sql import functions as F

    v = F.col(VISIT)
    factor = F.lit(1).cast("long") if sign is None else sign.cast("long")
    hour = F.hour(F.timestamp_micros(v["s_ts"]))
    metrics = [
        F.lit(0).cast("long").alias("n"),  # no page view: the shape of the pass's page view entries
        factor.alias("vi"),
        F.when(v["n"] == 1, factor).otherwise(F.lit(0).cast("long")).alias("bo"),
        (F.floor((v["e_ts"] - v["s_ts"]) / F.lit(1000)).cast("long") * factor).alias("du"),
        (v["n"] * factor).alias("vv"),
    ]
    entries = [
        F.struct(F.lit(i).alias("v"), v[group][d.name].alias("key"), level.alias("level"), *metrics)
        for group, dims in (("first", first_keyed(dimensions)), ("last", last_keyed(dimensions)))
        for i, d in dims
        for level in (hour, F.lit(DAY_LEVEL))
    ]
    if not entries:
        raise ValueError("no dimension counts visits")
    return F.array(*entries)
