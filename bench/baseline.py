"""The two-view pass the platform ran before views were declared, frozen as the bench's reference.

Before the shared pass (views.shared_pass), the platform served two views, page views and
visitors per URL and per site, computed as a shared *visits* table (one shuffle by URL and day,
duplicates dropped, page views per URL, hour and visitor), cached, and then one multi-stage
aggregation per view (per-visitor hours and days, hourly and daily totals and sketches, joined).
The batch layer wrote each view from the cached table; the speed layer built the table per
active generation and collected every (generation, view) frame in one job.

``make bench`` holds the five declared dimensions against this code on the same data in the same
run ("throughput with five dimensions must not fall below the two-view throughput"). It is kept
only here, as the measured reference: nothing in the platform imports it.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

SITE_PATTERN = r"^[a-z]+://([^/]+)"


def visits(events: Any) -> Any:
    """Deduplicated page views per (url, day, hour, visitor), partitioned by (url, day)."""
    from pyspark.sql import functions as F

    return (
        events.select(
            "url",
            F.date_format("ts", "yyyy-MM-dd").alias("day"),
            F.hour("ts").alias("hour"),
            "visitor_id",
            "event_id",
        )
        .repartition("url", "day")
        .dropDuplicates(["url", "day", "event_id"])
        .groupBy("url", "day", "hour", "visitor_id")
        .agg(F.count(F.lit(1)).alias("n"))
    )


def traffic_by(shared_visits: Any, key: Any, lg_k: int) -> Any:
    """View rows of page views and visitors per (key, UTC day, UTC hour)."""
    from pyspark.sql import functions as F

    per_visitor_hour = shared_visits.groupBy(key.alias("key"), "day", "hour", "visitor_id").agg(
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


def two_views(shared_visits: Any, lg_k: int) -> list[Any]:
    """The two shipped views (URL, site) of a visits table."""
    from pyspark.sql import functions as F

    return [
        traffic_by(shared_visits, F.col("url"), lg_k),
        traffic_by(shared_visits, F.regexp_extract(F.col("url"), SITE_PATTERN, 1), lg_k),
    ]


def batch_run(events: Any, lg_k: int) -> None:
    """What a batch run computed: the cached visits table, then each view written (no-op sink)."""
    shared = visits(events.select("event_id", "ts", "visitor_id", "url")).persist()
    try:
        for view in two_views(shared, lg_k):
            view.write.format("noop").mode("overwrite").save()
    finally:
        shared.unpersist()


def micro_batch(tagged: Any, gens: list[int], lg_k: int) -> list[Any]:
    """What a micro-batch computed: per active generation a cached visits table, then one collect
    of every (generation, view) frame."""
    from pyspark.sql import functions as F

    frames, shared = [], []
    for gen in gens:
        gen_visits = visits(tagged.where(F.col("gen") == gen)).persist()
        shared.append(gen_visits)
        for name, view in zip(("page", "site"), two_views(gen_visits, lg_k), strict=True):
            frames.append(view.select(F.lit(gen).alias("gen"), F.lit(name).alias("view"), "*"))
    try:
        rows: list[Any] = reduce(lambda a, b: a.unionByName(b), frames).collect()
        return rows
    finally:
        for df in shared:
            df.unpersist()
