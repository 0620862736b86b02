"""The one shared aggregation pass: every declared dimension from the same events, one shuffle.

Both layers call :func:`view_rows`: the batch layer over the master dataset's days, the speed layer
over each micro-batch (with the generation as an extra grouping column). The stages:

1. :func:`explode_dimensions`: one row per (event, dimension) with the dimension's stored key.
2. :func:`count_visits`: one shuffle, by (view, key, day); each event once per (view, key, day,
   event_id), because a duplicate is the same event sent again and has the same key and day; then
   page views per (view, key, day, hour, visitor). Both group by supersets of the shuffle's
   columns, so Spark adds no exchange.
3. :func:`aggregate`: hourly and daily page views, exact distinct visitors and HLL sketches, again
   grouped by supersets of the shuffle's columns, joined on them without another exchange.

So the number of shuffles does not grow with the number of dimensions: adding one adds rows to the
same shuffle. Exact distinct counts and HLL sketches come from the (key, hour, visitor)
pre-aggregate, which measured twice as fast as one aggregation over raw events, at a third of the
memory (docs/views.md, docs/design.md).

Output, one row per (extra columns, view, key, UTC day), the shape of :mod:`views.rows` plus
``view``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from views.dimension import Dimension, FunctionView, View

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

STAGES = ("explode_dimensions", "count_visits", "aggregate")
"""The stage functions, by name: the fingerprint hashes their live source."""


def explode_dimensions(events: DataFrame, dimensions: Sequence[Dimension], by: Sequence[str]) -> DataFrame:
    """(by..., view, key, day, hour, visitor_id, event_id): one row per event and dimension."""
    from pyspark.sql import functions as F

    entries = F.array(
        *[F.struct(F.lit(d.name).alias("view"), d.stored_key().alias("key")) for d in dimensions]
    )
    return events.select(
        *by,
        F.date_format("ts", "yyyy-MM-dd").alias("day"),
        F.hour("ts").alias("hour"),
        "visitor_id",
        "event_id",
        F.explode(entries).alias("d"),
    ).select(*by, "d.view", "d.key", "day", "hour", "visitor_id", "event_id")


def count_visits(rows: DataFrame, by: Sequence[str]) -> DataFrame:
    """Deduplicated page views per (by..., view, key, day, hour, visitor): the one shuffle."""
    from pyspark.sql import functions as F

    group = [*by, "view", "key", "day"]
    return (
        rows.repartition(*group)
        .dropDuplicates([*group, "event_id"])
        .groupBy(*group, "hour", "visitor_id")
        .agg(F.count(F.lit(1)).alias("n"))
    )


def aggregate(visits: DataFrame, by: Sequence[str], lg_k: int) -> DataFrame:
    """View rows from the per-visitor counts: the day's totals and its hours (views.rows)."""
    from pyspark.sql import functions as F

    group = [*by, "view", "key", "day"]
    hourly = (
        visits.groupBy(*group, "hour")
        .agg(
            F.sum("n").alias("pv"),
            F.count(F.lit(1)).alias("uv"),
            F.hll_sketch_agg("visitor_id", lg_k).alias("sk"),
        )
        .groupBy(*group)
        .agg(F.sort_array(F.collect_list(F.struct("hour", "pv", "uv", "sk"))).alias("hours"))
    )
    daily = (
        visits.groupBy(*group, "visitor_id")
        .agg(F.sum("n").alias("n"))
        .groupBy(*group)
        .agg(
            F.sum("n").alias("pv"),
            F.count(F.lit(1)).alias("uv"),
            F.hll_sketch_agg("visitor_id", lg_k).alias("sk"),
        )
    )
    return daily.join(hourly, group).select(*group, "pv", "uv", "sk", "hours")


def view_rows(
    events: DataFrame, dimensions: Sequence[Dimension], lg_k: int, by: Sequence[str] = ()
) -> DataFrame:
    """View rows of every dimension in ``dimensions`` from ``events`` (contract columns plus the
    ``by`` columns), grouped by ``by`` too."""
    if not dimensions:
        raise ValueError("view_rows needs at least one dimension")
    return aggregate(count_visits(explode_dimensions(events, dimensions, by), by), by, lg_k)


def compute(events: DataFrame, views: Sequence[View], lg_k: int, by: Sequence[str] = ()) -> DataFrame:
    """View rows of ``views``: every dimension in the shared pass, each function view beside it."""
    from functools import reduce

    from pyspark.sql import functions as F

    dimensions = [v for v in views if isinstance(v, Dimension)]
    frames = [view_rows(events, dimensions, lg_k, by)] if dimensions else []
    columns = [*by, "view", "key", "day", "pv", "uv", "sk", "hours"]
    for v in views:
        if isinstance(v, FunctionView):
            rows = v.compute(events, lg_k, by).withColumn("view", F.lit(v.name))
            frames.append(rows.select(*columns))
    if not frames:
        raise ValueError("no views to compute")
    return reduce(lambda a, b: a.unionByName(b), frames)


def input_columns(views: Sequence[View], spark: SparkSession) -> tuple[str, ...]:
    """Every contract field the views read (the projection before the pass)."""
    from contract.spark_schema import event_schema

    empty = spark.createDataFrame([], event_schema())
    needed = {"event_id", "ts", "visitor_id"}
    for v in views:
        needed.update(v.input_columns(spark, empty) if isinstance(v, Dimension) else v.inputs)
    return tuple(sorted(needed))
