"""The filter table: one row per (site, UTC day, hour, every filterable dimension's value, visitor),
with its page views. Combined filters (``POST /v2/query``) are answered by scanning it.

Why this grain: pre-aggregating every combination of dimensions does not scale (four give eleven
combinations), and a sketch per combination is bigger than what it summarises. At this grain the
page views of any filter are a sum, and its visitors are **exact**: the number of distinct 64-bit
visitor hashes, and sets of hashes union exactly across the batch part and the realtime part, where
distinct counts would not add. (Two visitors share a hash with a probability of about n²/2⁶⁵: for a
million visitors in a query, 3·10⁻⁸.)

Both layers make its rows with :func:`filter_rows`, from the shared pass's keyed events
(views.shared_pass.keyed_events: the same key expressions as the views, one definition), after each
layer's own dedup. The batch layer writes them as Parquet per generation and day
(stores.parquet.filter_table); the speed layer appends the rows of events past the cut to Redis
inside its micro-batch's commit (stores.redis.filter_rows). The table is declared like a view: its
fingerprint (:func:`fingerprint`) changes when its dimensions, its columns or the shared pass
change, and a changed fingerprint recomputes it in full.

Columns (the Arrow schema :func:`arrow_schema`; Parquet files have the same but ``day``, which is
their directory's ``day=YYYY-MM-DD``):

    site        string   the site (host with a non-default port)
    day         date32   UTC day of the event
    hour        int8     UTC hour of the event, 0-23
    <dimension> string   each of :data:`DIMENSIONS`, the value as the 1-D view keys it, without
                         the ``site|`` prefix of a per-site view (``(none)`` when missing)
    visitor     int64    64-bit hash of the visitor id (Spark's xxhash64, seed 42)
    pageviews   int64    page views of this visitor in this row
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from views.dimension import Dimension

NAME = "filters"
"""The filter table's name wherever a view's name would go: its entry in a generation's day map
and fingerprints, and its mark ``filters@<fingerprint>`` in the speed layer's counted views."""

DIMENSIONS = (
    "page",
    "referrer",
    "country",
    "device",
    "channel",
    "utm_source",
    "utm_medium",
    "utm_campaign",
)
"""The views whose values the table holds, each in a column of its name: every declared view that
counts page views but the site itself (its own column) and the visits-only entry and exit pages."""

SITE = "site"
DAY = "day"
HOUR = "hour"
VISITOR = "visitor"
PAGEVIEWS = "pageviews"
COLUMNS = (SITE, DAY, HOUR, *DIMENSIONS, VISITOR, PAGEVIEWS)
SORT = (SITE, "page", HOUR)
"""Each file's row order: a query names its site, and often a page, so row groups' min/max
statistics let the scan skip most of a file."""


def dimensions() -> list[Dimension]:
    """The declared views of :data:`DIMENSIONS`, in that order."""
    from views.registry import get_view

    return [get_view(name) for name in DIMENSIONS]


def arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field(SITE, pa.string(), nullable=False),
            pa.field(DAY, pa.date32(), nullable=False),
            pa.field(HOUR, pa.int8(), nullable=False),
            *[pa.field(name, pa.string(), nullable=False) for name in DIMENSIONS],
            pa.field(VISITOR, pa.int64(), nullable=False),
            pa.field(PAGEVIEWS, pa.int64(), nullable=False),
        ]
    )


def visitor_hash() -> Column:
    """The visitor column: a 64-bit hash of ``visitor_id``."""
    from pyspark.sql import functions as F

    return F.xxhash64("visitor_id")


def filter_rows(keyed: DataFrame, all_dimensions: Sequence[Dimension], by: Sequence[str] = ()) -> DataFrame:
    """The filter table's rows (plus the ``by`` columns) from the shared pass's keyed events
    (views.shared_pass.keyed_events over ``all_dimensions``, which must include :data:`DIMENSIONS`),
    page views summed per (by..., site, day, hour, values..., visitor).

    Every column the grouping names is per event, so on events already moved by visitor (the batch
    layer's shuffle, views.shared_pass.partitioned) the aggregation needs no exchange of its own."""
    from pyspark.sql import functions as F

    index = {d.name: i for i, d in enumerate(all_dimensions)}
    missing = [name for name in DIMENSIONS if name not in index]
    if missing:
        raise ValueError(f"the keyed events lack the filter table's dimensions {missing}")
    per_site = next(i for i, d in enumerate(all_dimensions) if d.per_site)
    site_key = F.col(f"_k{per_site}")
    values = []
    for name in DIMENSIONS:
        i = index[name]
        stored = F.col(f"_k{i}")
        values.append((_stripped(stored) if all_dimensions[i].per_site else stored).alias(name))
    return (
        keyed.select(
            *by,
            F.substring_index(site_key, "|", 1).alias(SITE),
            F.col("day").alias(DAY),
            F.col("hour").cast("byte").alias(HOUR),
            *values,
            visitor_hash().alias(VISITOR),
        )
        .groupBy(*by, SITE, DAY, HOUR, *DIMENSIONS, VISITOR)
        .agg(F.count(F.lit(1)).alias(PAGEVIEWS))
    )


def _stripped(stored: Column) -> Column:
    """``value`` of a stored ``site|value`` key (the site never contains ``|``; the value may)."""
    from pyspark.sql import functions as F

    return stored.substr(F.locate("|", stored) + 1, F.lit(1 << 30))


def fingerprint() -> str:
    """The table's fingerprint: its columns, the key expressions of its dimensions (their views'
    fingerprints, which cover the shared pass and the dedup rule) and this module's code. Needs an
    active Spark session, as a view's fingerprint does."""
    import inspect
    import sys

    from views.registry import fingerprint as view_fingerprint

    parts = [",".join(COLUMNS), ",".join(SORT)]
    parts += [f"{d.name}={view_fingerprint(d)}" for d in dimensions()]
    parts.append(inspect.getsource(sys.modules[__name__]))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def mark() -> str:
    """What the speed layer records among its counted views when it writes the table's rows."""
    return f"{NAME}@{fingerprint()}"
