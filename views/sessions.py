"""Visits: the one definition of a visit, as Spark transformations both layers call.

A **visit** is a maximal run of one visitor's page views on one site, ordered by event time (ties
by ``event_id``), in which each view is at most the session gap (``session_gap_s``, 30 min) after
the previous one. A visit never crosses a UTC midnight: the visitor-day is the unit of state and of
incremental recompute. A visit is credited to the UTC hour and day of its first view; its entry
page is its first view's page key, its exit page its last view's, its views the number of its page
views, its duration the last view's time minus the first's (integer milliseconds, from microsecond
timestamps: ``(last_us - first_us) // 1000``), and it bounced when it has exactly one view. Its
site, referrer source, country, device, UTM values and channel are those of its first view.

Everything stored about visits is additive, per (view, key, day) and hour: ``vi`` visits, ``bo``
bounces, ``du`` total duration (ms), ``vv`` page views in visits. Batch and realtime parts add up;
the realtime part may be negative (a retraction: a late view merged two visits the batch counted).

The definition works on **visit summaries**, not on events: a summary is (first view's time, id
and keys; last view's time, id and keys; number of views). A page view is the summary of a visit
of one view, so :func:`merge` sessionises events (the batch layer) and merges new page views into
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


def as_summaries(keyed: DataFrame, dimensions: Sequence[Dimension], lean: bool = False) -> DataFrame:
    """Each keyed page view (views.shared_pass.keyed_events: ``site``, ``ts_us`` and the ``_k``
    keys) as the summary of a visit of one view, its other columns kept.

    ``lean`` (the batch layer's, walked backwards): the view's time and id only as ``s_ts`` and
    ``s_id`` (a view's end is its start: :func:`sessionised` reads them for both), no ``first``
    keys (a visit walked backwards closes on its first view, which has them as its own
    columns: views.shared_pass.with_visits) and no ``tainted`` flag (nothing is late for the batch
    layer): the rows the window operators buffer and sort are that much narrower."""
    from pyspark.sql import functions as F

    last = keys_struct(last_keyed(dimensions)).alias("last")
    one = F.lit(1).cast("long").alias("n")
    if lean:
        others = [c for c in keyed.columns if c not in ("ts_us", "event_id")]
        return keyed.select(*others, F.col("ts_us").alias("s_ts"), F.col("event_id").alias("s_id"), last, one)
    return keyed.select(
        "*",
        F.col("ts_us").alias("s_ts"),
        F.col("event_id").alias("s_id"),
        F.col("ts_us").alias("e_ts"),
        F.col("event_id").alias("e_id"),
        keys_struct(first_keyed(dimensions)).alias("first"),
        last,
        one,
        F.lit(False).alias("tainted"),
    )


def keys_struct(dims: list[tuple[int, Dimension]]) -> Column:
    from pyspark.sql import functions as F

    if not dims:
        return F.struct(F.lit(None).cast("string").alias("_"))
    return F.struct(*[F.col(f"_k{i}").alias(d.name) for i, d in dims])


VISIT = "_visit"
"""The struct every row of :func:`sessionised` gets: its visit (s_ts, s_id, e_ts, e_id, first, last,
n, tainted), complete on the visit's last row in order, which ``closes`` marks."""


def sessionised(summaries: DataFrame, by: Sequence[str], gap_s: int, backwards: bool = False) -> DataFrame:
    """Every row of ``summaries`` with :data:`VISIT`: a new visit wherever a summary starts more
    than ``gap_s`` after the latest end before it, within their (by..., visitor-day).
    ``_visit.closes`` marks one row per visit, its last in the order walked, whose ``_visit`` is
    the whole visit.

    Forwards, the summaries are walked by first view (time, then id); ``backwards``, by last view
    (time, then id) from the latest, a new visit wherever a summary ends more than ``gap_s`` before
    the earliest start after it: the mirror image, so the visits are the same. Walked backwards, a
    visit of single views (the batch layer's events) closes on its **first** view: that row's own
    keys and hour are the visit's (the filter table's visit rows: views.shared_pass.with_visits).

    One ordering, running frames only, so Spark sorts once (a window per visit would sort again):
    the row that opens a visit in the walk is carried forward (the last opening row up to here),
    and the visit's other end is the running extreme, because every visit walked before this one
    lies wholly beyond it. Counts are running sums minus their value before the opening row. The
    partitions of the speed layer's summaries (``p_lo``/``p_hi``) are the visitor-day's so far: a
    visitor-day with views from two partitions is doubtful as a whole. Clustered by the
    visitor-day: a frame already partitioned by visitor (the shared pass's one shuffle) needs no
    exchange, and every row keeps its own columns (the batch layer counts page views from the same
    rows)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # A lean summary (as_summaries) is one view: its end is its start, and it has no first keys
    # and no tainted flag.
    columns = set(summaries.columns)
    value: dict[str, Column] = {n: F.col(n) for n in ("s_ts", "s_id", "first", "last") if n in columns}
    value["e_ts"] = F.col("e_ts") if "e_ts" in columns else value["s_ts"]
    value["e_id"] = F.col("e_id") if "e_id" in columns else value["s_id"]
    tainted = F.col("tainted").cast("long") if "tainted" in columns else None
    # The end the walk meets first (opening), the other one (running), and how the other runs.
    sides = (("e_ts", "e_id", "last"), ("s_ts", "s_id", "first"))
    opened, other = [tuple(c for c in side if c in value) for side in (sides if backwards else sides[::-1])]
    part = [*by, *SUMMARY_KEYS]
    order = [value[c].desc() if backwards else value[c].asc() for c in opened[:2]]
    ordered = Window.partitionBy(*part).orderBy(*order)
    upto = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    gap_us = gap_s * 1_000_000
    before = ordered.rowsBetween(Window.unboundedPreceding, -1)
    if backwards:
        gap = F.min(value["s_ts"]).over(before) - value["e_ts"]
    else:
        gap = value["s_ts"] - F.max(value["e_ts"]).over(before)
    starts = summaries.withColumn("_starts", gap.isNull() | (gap > gap_us))
    cum_n = F.sum("n").over(upto)
    cum_t = None if tainted is None else F.sum(tainted).over(upto)
    opening = F.when(
        F.col("_starts"),
        F.struct(
            *[value[c].alias(c) for c in opened],
            (cum_n - F.col("n")).alias("n_before"),
            *([] if cum_t is None or tainted is None else [(cum_t - tainted).alias("t_before")]),
        ),
    )
    extreme = F.min if backwards else F.max
    has_p = "p_lo" in columns
    running = starts.select(
        "*",
        F.last(opening, ignorenulls=True).over(upto).alias("_open"),
        extreme(F.struct(*[value[c].alias(c) for c in other])).over(upto).alias("_other"),
        cum_n.alias("_cum_n"),
        *([] if cum_t is None else [cum_t.alias("_cum_t")]),
        F.lead("_starts", 1).over(ordered).alias("_next_starts"),
        *(
            [F.min("p_lo").over(upto).alias("_p_lo"), F.max("p_hi").over(upto).alias("_p_hi")]
            if has_p
            else []
        ),
    )
    ends = {name: F.col(f"_open.{name}") for name in opened} | {
        name: F.col(f"_other.{name}") for name in other
    }
    visit = F.struct(
        *[
            ends[name].alias(name)
            for name in ("s_ts", "s_id", "e_ts", "e_id", "first", "last")
            if name in ends
        ],
        (F.col("_cum_n") - F.col("_open.n_before")).alias("n"),
        *([] if cum_t is None else [(F.col("_cum_t") > F.col("_open.t_before")).alias("tainted")]),
        *([F.col("_p_lo").alias("p_lo"), F.col("_p_hi").alias("p_hi")] if has_p else []),
        F.coalesce(F.col("_next_starts"), F.lit(True)).alias("closes"),
    )
    helpers = [
        "_starts",
        "_open",
        "_other",
        "_cum_n",
        *([] if cum_t is None else ["_cum_t"]),
        "_next_starts",
        *(["_p_lo", "_p_hi"] if has_p else []),
    ]
    return running.withColumn(VISIT, visit).drop(*helpers)


def merge(summaries: DataFrame, by: Sequence[str], gap_s: int) -> DataFrame:
    """The visits of the summaries' views, one summary per visit, per (by..., visitor-day)
    (:func:`sessionised`'s closing rows)."""
    from pyspark.sql import functions as F

    values = [*SUMMARY_VALUES, *(("p_lo", "p_hi") if "p_lo" in summaries.columns else ())]
    return (
        sessionised(summaries, by, gap_s)
        .where(F.col(f"{VISIT}.closes"))
        .select(*by, *SUMMARY_KEYS, *[F.col(f"{VISIT}.{c}").alias(c) for c in values])
    )


SUMMARY_VALUES = ("s_ts", "s_id", "e_ts", "e_id", "first", "last", "n", "tainted")
"""A summary's values beside its visitor-day (and, in the speed layer, ``p_lo``/``p_hi``: the
lowest and highest Kafka partition its views came from)."""


def visit_metrics(v: Column, sign: Column | None = None) -> dict[str, Column]:
    """The additive metrics (:data:`METRICS`) of one visit ``v`` (a :data:`VISIT` struct), times
    ``sign``: 1 visit, 1 bounce when it has one view, its duration in integer milliseconds, its
    page views."""
    from pyspark.sql import functions as F

    factor = F.lit(1).cast("long") if sign is None else sign.cast("long")
    return {
        "vi": factor,
        "bo": F.when(v["n"] == 1, factor).otherwise(F.lit(0).cast("long")),
        "du": F.floor((v["e_ts"] - v["s_ts"]) / F.lit(1000)).cast("long") * factor,
        "vv": v["n"] * factor,
    }


def visit_entries(dimensions: Sequence[Dimension], sign: Column | None = None) -> Column:
    """The credited (v, key, level, n, vi, bo, du, vv) structs of a row's :data:`VISIT` (for the
    row that closes it): per visit-counting dimension, at its first view's hour and at the day
    level; the metrics times ``sign`` (the speed layer's retractions)."""
    from pyspark.sql import functions as F

    v = F.col(VISIT)
    hour = F.hour(F.timestamp_micros(v["s_ts"]))
    metrics = [
        F.lit(0).cast("long").alias("n"),  # no page view: the shape of the pass's page view entries
        *[value.alias(name) for name, value in visit_metrics(v, sign).items()],
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
