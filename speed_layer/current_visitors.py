"""Current visitors in the speed layer: each micro-batch's visitors per site and page and UTC minute
of event time, computed in the micro-batch's one Spark job beside the views and written in its
commit (stores.redis.current_visitors has the layout and why every write is a union).

The rows come from the keyed events (views.shared_pass.keyed_events, with the minute carried
through as an extra column): every accepted, deduplicated record of the micro-batch, whatever
generation's cut it is past, since a window of minutes is answered by the speed layer alone. They
use the ``site`` and ``page`` dimensions' own keys, so a page here is the key /v1/breakdown lists.
One aggregation per (view, key, minute) gives the HLL sketch and the set of visitor ids, the set
left out past ``current_visitors_exact_limit`` (only small sets travel to the driver and Redis).
Minutes older than the longest window are not computed: their keys would already have expired.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from config.settings import Settings
from stores.redis.current_visitors import MinuteRow
from views.dimension import Dimension

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

VIEWS = ("site", "page")
"""The dimensions whose keys have current visitors."""
ROW_PREFIX = "#current:"
"""Collected rows of current visitors carry ``view`` = this + the dimension's name."""
MINUTE = "_minute"
"""The keyed events' column of the event's UTC minute (minutes since the epoch)."""
VISITORS = "_cv_visitors"


def minute_column() -> Column:
    """The UTC minute of the event time, as minutes since the epoch."""
    from pyspark.sql import functions as F

    return F.floor(F.unix_seconds("ts") / 60).alias(MINUTE)


def now_minute() -> int:
    return int(time.time() // 60)


def counted(dimensions: Sequence[Dimension]) -> bool:
    """Whether these dimensions give current visitors (``site`` or ``page`` is declared)."""
    return any(d.name in VIEWS for d in dimensions)


def minute_rows(
    keyed: DataFrame, dimensions: Sequence[Dimension], settings: Settings, single_partition: bool
) -> DataFrame | None:
    """Per (view, key, minute) of ``keyed`` (with :data:`MINUTE`): the sketch of the visitors and,
    when at most the limit, their ids; None when neither dimension is declared."""
    from pyspark.sql import functions as F

    indices = [(d.name, i) for i, d in enumerate(dimensions) if d.name in VIEWS]
    if not indices:
        return None
    oldest = now_minute() - settings.current_visitors_max_minutes - 1
    entries = F.array(
        *[
            F.struct(F.lit(ROW_PREFIX + name).alias("view"), F.col(f"_k{i}").alias("key"))
            for name, i in indices
        ]
    )
    events = keyed.coalesce(1) if single_partition else keyed
    visitors = F.collect_set("visitor_id")
    small = F.size(VISITORS) <= settings.current_visitors_exact_limit
    return (
        events.where(F.col(MINUTE) >= oldest)
        .select(MINUTE, "visitor_id", F.inline(entries))
        .groupBy("view", "key", MINUTE)
        .agg(F.hll_sketch_agg("visitor_id", settings.hll_lg_k).alias("sk"), visitors.alias(VISITORS))
        .select(
            "view",
            "key",
            F.col(MINUTE).cast("long").alias(MINUTE),
            "sk",
            F.when(small, F.col(VISITORS)).alias(VISITORS),
        )
    )


def split(rows: Sequence[Any]) -> tuple[list[MinuteRow], list[Any]]:
    """A micro-batch's collected rows: its current visitors' rows, and the others."""
    minutes: list[MinuteRow] = []
    others: list[Any] = []
    for row in rows:
        view = row["view"]
        if isinstance(view, str) and view.startswith(ROW_PREFIX):
            visitors = row[VISITORS]
            minutes.append(
                MinuteRow(
                    view.removeprefix(ROW_PREFIX),
                    row["key"],
                    int(row[MINUTE]),
                    bytes(row["sk"]),
                    None if visitors is None else list(visitors),
                )
            )
        else:
            others.append(row)
    return minutes, others
