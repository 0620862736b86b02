"""Traffic views: page views and unique visitors per URL and per site, by hour and by day.

Both views are the same aggregation over a different key, so they share :func:`traffic_by`.
Exact distinct counts and HLL sketches are computed from the (key, bucket, visitor) pre-aggregate
rather than in one aggregation with the raw events, which measured twice as fast and at a third of
the memory (DESIGN.md, measured facts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from views.registry import register

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SITE_PATTERN = r"^[a-z]+://([^/]+)"
"""The site of a normalised URL: its host with a non-default port (contract.events.site_of)."""


def site_column(url: Column) -> Column:
    from pyspark.sql import functions as F

    return F.regexp_extract(url, SITE_PATTERN, 1)


def traffic_by(events: DataFrame, key: Column, lg_k: int, few_keys: bool = False) -> DataFrame:
    """View rows (views.rows) of page views and visitors per (key, UTC day, UTC hour).

    Events are repartitioned once by (key, day); every later step (dropping duplicates, the
    aggregations, the join of hourly and daily values) works on a superset of those columns, so
    Spark adds no further shuffle. The same plan runs on a streaming micro-batch.

    Duplicates are the same event sent again (same ``event_id``, same content, hence the same key
    and day), so each event counts once per (key, day, event_id).

    With ``few_keys`` (a site has a handful of keys per day) the repartition would funnel all
    events into a few tasks; there the duplicates are dropped by a shuffle on the event id and the
    aggregations run with Spark's partial aggregation instead.
    """
    from pyspark.sql import functions as F

    keyed = events.select(
        key.alias("key"),
        F.date_format("ts", "yyyy-MM-dd").alias("day"),
        F.hour("ts").alias("hour"),
        "visitor_id",
        "event_id",
    )
    if not few_keys:
        keyed = keyed.repartition("key", "day")
    per_visitor_hour = (
        keyed.dropDuplicates(["key", "day", "event_id"])
        .groupBy("key", "day", "hour", "visitor_id")
        .agg(F.count(F.lit(1)).alias("n"))
    )
    hourly = (
        per_visitor_hour.groupBy("key", "day", "hour")
        .agg(
            F.sum("n").alias("pv"),
            F.count(F.lit(1)).alias("uv"),
            F.hll_sketch_agg("visitor_id", lg_k).alias("sk"),
        )
        .groupBy("key", "day")
        .agg(F.sort_array(F.collect_list(F.struct("hour", "pv", "uv", "sk"))).alias("hours"))
    )
    daily = (
        per_visitor_hour.groupBy("key", "day", "visitor_id")
        .agg(F.sum("n").alias("n"))
        .groupBy("key", "day")
        .agg(
            F.sum("n").alias("pv"),
            F.count(F.lit(1)).alias("uv"),
            F.hll_sketch_agg("visitor_id", lg_k).alias("sk"),
        )
    )
    return daily.join(hourly, ["key", "day"]).select("key", "day", "pv", "uv", "sk", "hours")


@register("url_traffic", key="url")
def url_traffic(events: DataFrame, lg_k: int) -> DataFrame:
    """Page views and unique visitors per URL, hourly and daily."""
    from pyspark.sql import functions as F

    return traffic_by(events, F.col("url"), lg_k)


@register("site_traffic", key="site")
def site_traffic(events: DataFrame, lg_k: int) -> DataFrame:
    """Page views and unique visitors per site (host), hourly and daily."""
    from pyspark.sql import functions as F

    return traffic_by(events, site_column(F.col("url")), lg_k, few_keys=True)
