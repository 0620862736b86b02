"""The first step every view shares: each event once, counted per URL, UTC hour and visitor.

Views are functions of this *visits* table rather than of raw events: dropping duplicates and the
first (largest) aggregation then happen once per batch or micro-batch, not once per view. It is
still one definition, applied by both layers: ``visits(events)`` and then each registered view.

    url         string   the normalised URL
    day         string   UTC date, YYYY-MM-DD
    hour        int      UTC hour, 0-23
    visitor_id  string
    n           bigint   page views of that URL by that visitor in that hour
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def visits(events: DataFrame) -> DataFrame:
    """Deduplicated page views per (url, day, hour, visitor), partitioned by (url, day).

    Duplicates are the same event sent again (same ``event_id``, same content, hence the same URL
    and day), so each event counts once per (url, day, event_id). One shuffle, by (url, day): the
    dedup and the aggregation group by supersets of those columns and add none, and so do the
    per-URL views downstream.
    """
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
