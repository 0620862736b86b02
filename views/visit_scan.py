"""The batch layer's visits, counted in the scan: no sort, no window.

Each task of the shared pass records every page view it reads (``record``: a filter that keeps
every row and adds the view's time, event id and keys to the task's views, in the JVM), and once
it has read them all, sessionises each visitor-day's views by the one definition
(:mod:`views.sessions`: by time, ties by event id, a new visit after more than the gap, never across
a UTC midnight) and emits their metrics summed per (group, view, key, day, level) (``emit``). Both
are Catalyst expressions (toolchain/visit-scan) that run in the pass's generated code.

When is "read them all"? The emit sits after the per-visitor aggregation of
:func:`views.shared_pass.count_per_visitor`, in the same task as the records (the events are
already moved by visitor, so no exchange separates them), and an aggregation emits nothing before
it has consumed every input row. The first evaluation in the task emits; every later one is null.
A view recorded after that would fail the task rather than be lost (it cannot happen in the plans
this module builds). Each plan gets its own scan id, so two scans in one task never mix.

Why: sorting the moved events by visitor-day and time for window functions cost about a third of
the pass without visits (docs/visits.md, "Cost"); the views of a visitor-day are few, so sorting
each one's in the task is cheap. The views are held in primitive arrays (their size per view is in
docs/scaling.md), in the heap Spark leaves to user code: the batch layer sizes the shuffle
so that a task reads a bounded number of them (views.shared_pass.partitions_for), and a task's
record past its limit fails the task (docs/scaling.md, "Batch layer").
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from views import sessions
from views.dimension import Dimension

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

GROUP = "_group"
"""The emitted rows' ``by`` values, as JSON text (empty without ``by`` columns): the name of the
field in toolchain/visit-scan's EmitVisits."""


def _scan(spark: Any) -> Any:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return jvm.org.apache.spark.sql.lambda_platform.visits.VisitScan


def _columns(spark: Any, columns: Sequence[Column]) -> Any:
    gateway = spark.sparkContext._gateway
    array = gateway.new_array(gateway.jvm.org.apache.spark.sql.Column, len(columns))
    for i, c in enumerate(columns):
        array[i] = c._jc
    return array


def java_ints(spark: Any, values: Sequence[int]) -> Any:
    """``values`` as a Java ``int[]`` (for a JVM method that takes one)."""
    gateway = spark.sparkContext._gateway
    array = gateway.new_array(gateway.jvm.int, len(values))
    for i, v in enumerate(values):
        array[i] = v
    return array


def group(by: Sequence[str]) -> Column:
    """The ``by`` values of a row as one text (the visitor-days of two groups never mix)."""
    from pyspark.sql import functions as F

    return F.to_json(F.struct(*by)) if by else F.lit("")


class VisitScan:
    """One plan's pair of expressions: ``recorded`` before its per-visitor aggregation, ``visits``
    after it (views.shared_pass.count_per_visitor)."""

    def __init__(self, moved: DataFrame, dimensions: Sequence[Dimension], gap_s: int, limit_mib: int) -> None:
        self.spark = moved.sparkSession
        self.id = uuid.uuid4().hex
        self.first = [i for i, _ in sessions.first_keyed(dimensions)]
        self.last = [i for i, _ in sessions.last_keyed(dimensions)]
        self.gap_us = gap_s * 1_000_000
        self.limit = limit_mib << 20

    def recorded(self, moved: DataFrame, by: Sequence[str]) -> DataFrame:
        """``moved`` (keyed events moved by visitor: views.shared_pass), every row recorded."""
        from pyspark.sql import functions as F
        from pyspark.sql.classic.column import Column

        columns = [
            group(by),
            F.col("site"),
            F.col("visitor_id"),
            F.unix_date("day"),
            F.col("ts_us"),
            F.col("event_id"),
            *[F.col(f"_k{i}") for i in (*self.first, *self.last)],
        ]
        record = Column(_scan(self.spark).record(self.id, self.limit, _columns(self.spark, columns)))
        return moved.where(record)

    def visits(self) -> Column:
        """The task's visit rows on its first evaluation, null after: an array of (group, v, key,
        day, level, visitor_id, n, vi, bo, du, vv), the shape of the per-visitor rows."""
        from pyspark.sql.classic.column import Column

        spark = self.spark
        first, last = java_ints(spark, self.first), java_ints(spark, self.last)
        return Column(_scan(spark).emit(self.id, first, last, self.gap_us))
