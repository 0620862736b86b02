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

Two kinds of rows share the columns (the Arrow schema :func:`arrow_schema`; Parquet files have
the same but ``day``, which is their directory's ``day=YYYY-MM-DD``):

- **page-view rows** (:func:`filter_rows`): one per (site, day, hour, every dimension's value of
  the view, visitor), with its page views; ``entry_page`` and the visit columns are null.
- **visit rows** (:func:`visit_rows`): one per visit (views.sessions: the one definition), credited
  like the views credit it: to its first view's hour and day, with its first view's referrer,
  country, device, channel and UTM values, its entry and exit page, its page views, and
  ``visits`` 1, ``bounces`` 1 when it has one view, ``duration_ms``; ``page`` is null. The speed
  layer's visit rows are signed: a retraction (a visit a late view changed) is the old visit's row
  with -1 in every additive column, so that the rows of a visit sum to what it is now.

    site          string   the site (host with a non-default port)
    day           date32   UTC day of the event (of the visit's first view)
    hour          int8     UTC hour of the event (of the visit's first view), 0-23
    page          string   the page (page-view rows; null in visit rows)
    entry_page    string   the visit's first page (visit rows; null in page-view rows)
    exit_page     string   the visit's last page (visit rows; null in page-view rows)
    <dimension>   string   each of :data:`DIMENSIONS` but the page: the value as the 1-D view keys
                           it, without the ``site|`` prefix of a per-site view (``(none)`` when
                           missing); a visit's are its first view's
    visitor       int64    64-bit hash of the visitor id (Spark's xxhash64, seed 42)
    pageviews     int64    page views of this visitor in this row (of the visit, in visit rows)
    visits        int64    visits (visit rows: 1, or -1 for a retraction; null in page-view rows)
    bounces       int64    visits of one page view (visit rows)
    duration_ms   int64    the visit's last view's time minus its first's, in ms (visit rows)
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

VISIT_PAGES = ("entry_page", "exit_page")
"""The visit rows' own dimensions (the views of visits only): the visit's first and last page."""
VISIT_DIMENSIONS = (*VISIT_PAGES, *DIMENSIONS[1:])
"""What a visit row holds a value of: its pages, and its first view's values of the others."""

SITE = "site"
DAY = "day"
HOUR = "hour"
VISITOR = "visitor"
PAGEVIEWS = "pageviews"
VISITS = "visits"
BOUNCES = "bounces"
DURATION_MS = "duration_ms"
VISIT_COLUMNS = (VISITS, BOUNCES, DURATION_MS)
"""A visit row's additive columns beside its page views (null in page-view rows)."""
COLUMNS = (SITE, DAY, HOUR, *DIMENSIONS, *VISIT_PAGES, VISITOR, PAGEVIEWS, *VISIT_COLUMNS)
SIGNED = (PAGEVIEWS, *VISIT_COLUMNS)
"""The columns a speed-layer visit row carries signed (a retraction's are negative)."""
NULLABLE = ("page", *VISIT_PAGES, *VISIT_COLUMNS)
"""The columns one kind of row leaves null: the page of a visit row, the rest in page-view rows."""
SORT = (SITE, "page", HOUR)
"""Each file's row order: a query names its site, and often a page, so row groups' min/max
statistics let the scan skip most of a file."""


def dimensions() -> list[Dimension]:
    """The declared views of :data:`DIMENSIONS` and :data:`VISIT_PAGES`, in that order."""
    from views.registry import get_view

    return [get_view(name) for name in (*DIMENSIONS, *VISIT_PAGES)]


def arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field(SITE, pa.string(), nullable=False),
            pa.field(DAY, pa.date32(), nullable=False),
            pa.field(HOUR, pa.int8(), nullable=False),
            *[pa.field(name, pa.string(), nullable=name in NULLABLE) for name in DIMENSIONS],
            *[pa.field(name, pa.string()) for name in VISIT_PAGES],
            pa.field(VISITOR, pa.int64(), nullable=False),
            pa.field(PAGEVIEWS, pa.int64(), nullable=False),
            *[pa.field(name, pa.int64()) for name in VISIT_COLUMNS],
        ]
    )


def visitor_hash() -> Column:
    """The visitor column: a 64-bit hash of ``visitor_id``."""
    from pyspark.sql import functions as F

    return F.xxhash64("visitor_id")


KEYS = (SITE, DAY, HOUR, *DIMENSIONS, *VISIT_PAGES, VISITOR)
"""What a row is per: everything but its additive columns (:data:`SIGNED`)."""


def event_entry(all_dimensions: Sequence[Dimension]) -> Column:
    """The page-view row of one keyed event (views.shared_pass.keyed_events over
    ``all_dimensions``, which must include :data:`DIMENSIONS`), as a struct of :data:`COLUMNS`:
    one page view, no visit."""
    from pyspark.sql import functions as F

    index = {d.name: i for i, d in enumerate(all_dimensions)}
    missing = [name for name in DIMENSIONS if name not in index]
    if missing:
        raise ValueError(f"the keyed events lack the filter table's dimensions {missing}")
    per_site = next(i for i, d in enumerate(all_dimensions) if d.per_site)
    values = []
    for name in DIMENSIONS:
        i = index[name]
        stored = F.col(f"_k{i}")
        values.append((_stripped(stored) if all_dimensions[i].per_site else stored).alias(name))
    return F.struct(
        F.substring_index(F.col(f"_k{per_site}"), "|", 1).alias(SITE),
        F.col("day").alias(DAY),
        F.col("hour").cast("byte").alias(HOUR),
        *values,
        *[F.lit(None).cast("string").alias(name) for name in VISIT_PAGES],
        visitor_hash().alias(VISITOR),
        F.lit(1).cast("long").alias(PAGEVIEWS),
        *[F.lit(None).cast("long").alias(name) for name in VISIT_COLUMNS],
    )


def visit_entry(all_dimensions: Sequence[Dimension], sign: Column | None = None) -> Column:
    """The visit row of a row of views.sessions.sessionised that closes a visit (``_visit.closes``;
    with its visitor-day columns ``site``, ``visitor_id``, ``day``), as a struct of
    :data:`COLUMNS`, its additive columns times ``sign`` (the speed layer's retractions).
    ``all_dimensions`` are those the visits were summarised over (they must include
    :data:`VISIT_DIMENSIONS`)."""
    from pyspark.sql import functions as F

    from views import sessions

    named = {d.name: d for d in all_dimensions}
    missing = [name for name in VISIT_DIMENSIONS if name not in named]
    if missing:
        raise ValueError(f"the visits lack the filter table's dimensions {missing}")
    v = F.col(sessions.VISIT)
    metrics = sessions.visit_metrics(v, sign)

    def first(name: str) -> Column:
        stored = v["first"][name]
        return _stripped(stored) if named[name].per_site else stored

    return F.struct(
        F.col("site").alias(SITE),
        F.col("day").alias(DAY),
        F.hour(F.timestamp_micros(v["s_ts"])).cast("byte").alias(HOUR),
        F.lit(None).cast("string").alias("page"),
        *[first(name).alias(name) for name in DIMENSIONS[1:]],
        v["first"]["entry_page"].alias("entry_page"),
        v["last"]["exit_page"].alias("exit_page"),
        visitor_hash().alias(VISITOR),
        metrics["vv"].alias(PAGEVIEWS),
        metrics["vi"].alias(VISITS),
        metrics["bo"].alias(BOUNCES),
        metrics["du"].alias(DURATION_MS),
    )


def summed(entries: DataFrame, by: Sequence[str] = ()) -> DataFrame:
    """The table's rows (plus the ``by`` columns) from ``entries`` (the ``by`` columns and the
    columns of :func:`event_entry` or :func:`visit_entry`): their additive columns summed per
    (by..., :data:`KEYS`), the rows whose sums are all 0 left out (a visit and its retraction).

    A page-view row's visit columns stay null (a sum of nulls). Every key is per event or per
    visit, so on rows already moved by visitor (with ``visitor_id`` among ``by``) the aggregation
    needs no exchange of its own."""
    from pyspark.sql import functions as F

    rows = entries.groupBy(*by, *KEYS).agg(*[F.sum(c).alias(c) for c in SIGNED])
    nothing = F.lit(True)
    for c in SIGNED:
        nothing = nothing & (F.col(c) == 0)
    return rows.where(F.col(VISITS).isNull() | ~nothing).select(*by, *COLUMNS)


def filter_rows(keyed: DataFrame, all_dimensions: Sequence[Dimension], by: Sequence[str] = ()) -> DataFrame:
    """The page-view rows (plus the ``by`` columns) of the shared pass's keyed events
    (views.shared_pass.keyed_events over ``all_dimensions``), page views summed per (by..., site,
    day, hour, values..., visitor)."""
    return summed(keyed.select(*by, event_entry(all_dimensions).alias("_e")).select(*by, "_e.*"), by)


def table_rows(visits: DataFrame, all_dimensions: Sequence[Dimension], by: Sequence[str] = ()) -> DataFrame:
    """Both kinds of rows (plus the ``by`` columns) of keyed events that views.sessions.sessionised
    gave their visits: a page-view row per event, and a visit row per row that closes a visit,
    made by one generator, so the rows keep the events' partitioning (no exchange when
    ``visitor_id`` is among ``by`` and the events were moved by visitor)."""
    from pyspark.sql import functions as F

    from views import sessions

    event = event_entry(all_dimensions)
    both = F.when(F.col(f"{sessions.VISIT}.closes"), F.array(event, visit_entry(all_dimensions))).otherwise(
        F.array(event)
    )
    return summed(visits.select(*by, F.inline(both)), by)


def _stripped(stored: Column) -> Column:
    """``value`` of a stored ``site|value`` key (the site never contains ``|``; the value may)."""
    from pyspark.sql import functions as F

    return stored.substr(F.locate("|", stored) + 1, F.lit(1 << 30))


def fingerprint(layout: str) -> str:
    """The table's fingerprint: its columns, the key expressions of its dimensions (their views'
    fingerprints in ``layout``, which cover the shared pass and the dedup rule) and this module's
    code. Needs an active Spark session, as a view's fingerprint does."""
    import inspect
    import sys

    from views.registry import fingerprint as view_fingerprint

    parts = [",".join(COLUMNS), ",".join(SORT)]
    parts += [f"{d.name}={view_fingerprint(d, layout)}" for d in dimensions()]
    parts.append(inspect.getsource(sys.modules[__name__]))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def mark(layout: str) -> str:
    """What the speed layer records among its counted views when it writes the table's rows."""
    return f"{NAME}@{fingerprint(layout)}"
