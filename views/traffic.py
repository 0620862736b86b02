"""Traffic views: page views and unique visitors per URL and per site, by hour and by day.

Both views are the same aggregation of the visits table (views.visits) over a different key, so
they share :func:`traffic_by`.
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


def traffic_by(visits: DataFrame, key: Column, lg_k: int) -> DataFrame:
    """View rows (views.rows) of page views and visitors per (key, UTC day, UTC hour).

    ``visits`` is the shared, deduplicated (url, day, hour, visitor) table (views.visits). For a
    key that is the URL itself, every aggregation below groups by a superset of the visits'
    partitioning and Spark adds no shuffle; for a coarser key (the site) the first aggregation
    folds the URLs together with Spark's partial aggregation.
    """
    from pyspark.sql import functions as F

    per_visitor_hour = visits.groupBy(key.alias("key"), "day", "hour", "visitor_id").agg(
        F.sum("n").alias("n")
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
def url_traffic(visits: DataFrame, lg_k: int) -> DataFrame:
    """Page views and unique visitors per URL, hourly and daily."""
    from pyspark.sql import functions as F

    return traffic_by(visits, F.col("url"), lg_k)


@register("site_traffic", key="site")
def site_traffic(visits: DataFrame, lg_k: int) -> DataFrame:
    """Page views and unique visitors per site (host), hourly and daily."""
    from pyspark.sql import functions as F

    return traffic_by(visits, site_column(F.col("url")), lg_k)
