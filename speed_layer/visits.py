"""The speed layer's visits, in the scan: each counted page view merged into the open visits of its
visitor-day as the Kafka partition's task reads it, and the realtime deltas, retractions included,
of every active generation.

The realtime visits of generation ``g`` must be, per visitor-day, the visits of every committed
page view minus the visits of those below ``g``'s cut (which ``g``'s batch views hold): then batch
plus realtime is the visits of all of them, whatever a late view merged or stretched. Merging one
view into its visitor-day's visits replaces the visits it joins (0, 1 or 2: visits are more than a
gap apart) by the one they become; that change, *-1 for each visit replaced, +1 for the new one*,
is what the view adds to every generation whose cut it is at or past. Summed over a partition's
views in offset order this telescopes to exactly the difference above: once a view of a
visitor-day is at or past a cut, every later view of it is too, because a Kafka partition is read
in offset order and the platform's producers key a visitor's views to one partition (a
visitor-day seen on two partitions is flagged instead). Within a micro-batch the sum is taken
before it leaves the JVM: per generation and visitor-day, the visits held when the generation's
first view of the range came (-1) against those held at the range's end (+1), the visits in both
cancelling out: one or two rows per visitor-day instead of two per view.

The state is a JVM function's (``lambda_platform.visits.VisitMarker``, toolchain/contract-udf), one
per Kafka partition in the executor that reads it, like the dedup's (speed_layer.dedup): no
exchange, no sort, no read or write of a store per micro-batch. The function reads each task's
records from Spark's internal rows and gives its changes once it has read them all
(:meth:`Marker.signed`), and the aggregation that sums the page views sums the visits' metrics
too (views.sessions.visit_entries). A task that finds its partition's state elsewhere than at its
range's start (a fresh JVM, a partition read by another executor) fails with ``VisitStateMissing``;
the micro-batch then rebuilds the states (speed_layer.visit_rebuild) and runs again. A range
evaluated twice (a second job over the micro-batch, a retried task) is applied again from the
state before it, so it gives the same changes.

**The horizon.** A visit leaves the state once its last view is ``visit_lateness_s`` plus the
session gap behind the watermark (the newest log-append time committed before the micro-batch).
A view whose event time is more than ``visit_lateness_s`` behind the watermark may belong to a
visit that left: it is merged with what is left, its visit is marked tainted, and the (site, day)
of every tainted visit a micro-batch changes is flagged for every generation it counts for, so
answers say those visits are not exact until the next batch run recomputes the day. A view within
the horizon can never belong to a visit that left (its distance to any such visit exceeds the gap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from generations.model import Offsets
from stores.redis import visit_state
from stores.redis.visit_state import VisitStateSink
from views import sessions
from views.dimension import Dimension
from views.visit_scan import java_ints

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

FLAG_VIEW = "#visit-flag"
"""The ``view`` of the flag rows in the micro-batch's one collect: rows that flag a (generation,
site, day) whose realtime visits may not be exact (split out by :func:`split_flags`; nothing past
the collect sees them as rows)."""
FLAG_DIMENSION = -1
"""The dimension index of :meth:`Marker.entries`' flag rows (``VisitEntries.FLAG``)."""
MIN_US = visit_state.NEVER
MISSING = "VisitStateMissing"
"""What the error of a task whose partition's visit state is not at its range's start says."""
SIGN = "_sign"
"""The column :meth:`Marker.signed` gives each visit: 1, or -1 for a retraction."""


@dataclass(frozen=True)
class VisitProgress:
    """What a micro-batch moves the visit bookkeeping to (the driver's, after its Spark job): the
    state's new watermark (the newest log-append time committed) and the cut-off before which
    ended visits leave it."""

    watermark_ms: int
    drop_before_us: int


@dataclass(frozen=True)
class Horizon:
    """The cut-offs of one micro-batch, from the bookkeeping as committed before it.

    ``dropped_before_us``: every visit the state has let go of ended before this (the largest
    cut-off applied so far). A view at least a gap after it cannot belong to any of them, so its
    merge is exact; an earlier one may (:attr:`late_before_us`). This micro-batch's commit then
    lets go of the visits that ended more than ``lateness_s`` plus the gap behind the watermark
    (:attr:`drop_before_us`)."""

    watermark_ms: int
    dropped_before_us: int
    lateness_s: int
    gap_s: int

    @property
    def late_before_us(self) -> int:
        """Views with an event time before this may belong to a visit the state let go of."""
        if self.dropped_before_us <= MIN_US:
            return MIN_US
        return self.dropped_before_us + self.gap_s * 1_000_000

    @property
    def drop_before_us(self) -> int:
        """The commit of this micro-batch lets go of the visits that ended before this."""
        if self.watermark_ms <= 0:
            return self.dropped_before_us
        behind = (self.watermark_ms - self.lateness_s * 1000) * 1000 - self.gap_s * 1_000_000
        return max(self.dropped_before_us, behind)


def dimensions_mark(dimensions: Sequence[Dimension]) -> str:
    """The dimensions the realtime visits are counted with (views of others are rebuilt)."""
    first = ",".join(d.name for _, d in sessions.first_keyed(dimensions))
    last = ",".join(d.name for _, d in sessions.last_keyed(dimensions))
    return f"first:{first};last:{last}"


def _cut(cut: Offsets) -> str:
    return ";".join(f"{p}:{o}" for p, o in sorted(cut.items()))


def _spec(offsets: dict[int, tuple[int, int]]) -> str:
    return ",".join(f"{p}:{a}:{b}" for p, (a, b) in sorted(offsets.items()))


class ScanVisits:
    """The visit states of one streaming query: ``namespace`` names them (its checkpoint and
    topic: speed_layer.dedup.ScanDedup's)."""

    def __init__(self, spark: SparkSession, namespace: str) -> None:
        self.spark = spark
        self.namespace = namespace
        self.missing = True
        """Whether this JVM is known to hold no state of the query (a start, :meth:`forget`): the
        next micro-batch rebuilds them before its job rather than after a failed one."""

    def _jvm(self) -> Any:
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        return jvm

    def forget(self) -> None:
        """Drop this JVM's states of the query (a new query must not trust an old one's)."""
        self._jvm().lambda_platform.visits.VisitStates.forget(self.namespace)
        self.missing = True

    def held(self) -> int:
        """Visitor-days the query's states hold in this JVM (local mode: all)."""
        return int(self._jvm().lambda_platform.visits.VisitStates.visitorDays(self.namespace))

    def seed(self, offsets: dict[int, int]) -> Any:
        """A new seed (``lambda_platform.visits.VisitSeed``) of empty states at ``offsets``, for
        :meth:`Marker.seed` once filled (speed_layer.visit_rebuild)."""
        spec = ",".join(f"{p}:{o}" for p, o in sorted(offsets.items()))
        return self._jvm().lambda_platform.visits.VisitSeed(spec)

    def marker(self, starts: dict[int, int], ends: dict[int, int], horizon: Horizon) -> Marker:
        """The visits' function for the range from ``starts`` to ``ends``."""
        ranges = {p: (starts.get(p, 0), end) for p, end in ends.items()}
        jvm = self._jvm().lambda_platform.visits.VisitMarker(
            self.namespace, _spec(ranges), horizon.dropped_before_us, horizon.late_before_us, horizon.gap_s
        )
        return Marker(jvm)


@dataclass
class Marker:
    """One range's ``VisitMarker``: :meth:`signed` gives its net changes of keyed page views."""

    jvm: Any

    def seed(self, seed: Any) -> None:
        """The states a partition starts from when its own is missing (a rebuild)."""
        self.jvm.seed(seed)

    def signed(
        self,
        keyed: DataFrame,
        dimensions: Sequence[Dimension],
        counted: str,
        active: dict[int, Offsets],
    ) -> DataFrame:
        """The net changes of ``keyed``'s counted page views (``counted``) for the ``active``
        generations: per generation and visitor-day (``gen``, ``site``, ``visitor_id``, ``day``),
        each visit its views replaced, with :data:`SIGN` -1, and each they made, with 1
        (:data:`views.sessions.VISIT`). Summed, a visit a micro-batch did not change is not there.
        ``keyed``: views.shared_pass.keyed_events of every record of the range (a range whose
        records are all rejected or duplicates still moves the state to its end), with
        ``kafka_partition``, ``kafka_offset`` and ``counted``, in the scan's order. With no
        ``active`` generation the changes are only applied (a rebuild's replay). Each reading of
        the frame applies the range again (from the state before it): materialise it to read it
        twice."""
        from pyspark.sql import DataFrame as Frame
        from pyspark.sql import functions as F

        records = _records(keyed, dimensions, counted)
        changes = Frame(self.jvm.signed(records._jdf, _cuts(active)), keyed.sparkSession)

        def named(side: str, dims: list[tuple[int, Dimension]]) -> Column:
            if not dims:
                return F.struct(F.lit(None).cast("string").alias("_"))
            return F.struct(*[F.col(side)[j].alias(d.name) for j, (_, d) in enumerate(dims)])

        visit = F.struct(
            "s_ts",
            "s_id",
            "e_ts",
            "e_id",
            named("first", sessions.first_keyed(dimensions)).alias("first"),
            named("last", sessions.last_keyed(dimensions)).alias("last"),
            "n",
            "tainted",
            "p_lo",
            "p_hi",
        )
        return changes.select(
            "gen", "site", "visitor_id", "day", visit.alias(sessions.VISIT), F.col("sign").alias(SIGN)
        )

    def entries(
        self,
        keyed: DataFrame,
        dimensions: Sequence[Dimension],
        counted: str,
        active: dict[int, Offsets],
    ) -> DataFrame:
        """The same changes as :meth:`signed`, summed in each task as the views' aggregation reads
        them: rows of (gen, v, key, day, level, n, vi, bo, du, vv), views.sessions.visit_entries'
        per generation, with the flag rows (``v`` :data:`FLAG_DIMENSION`, the site as ``key``:
        :func:`entry_rows` splits them). For the views alone (the filter table reads each visit:
        :meth:`signed`)."""
        from pyspark.sql import DataFrame as Frame

        spark = keyed.sparkSession
        first = java_ints(spark, [i for i, _ in sessions.first_keyed(dimensions)])
        last = java_ints(spark, [i for i, _ in sessions.last_keyed(dimensions)])
        records = _records(keyed, dimensions, counted)
        return Frame(self.jvm.entries(records._jdf, _cuts(active), first, last), spark)

    def apply(self, keyed: DataFrame, dimensions: Sequence[Dimension], counted: str) -> None:
        """Merge ``keyed``'s counted page views into the states, with no generation to count
        them for (a rebuild's replay)."""
        self.signed(keyed, dimensions, counted, {}).write.format("noop").mode("overwrite").save()


def _records(keyed: DataFrame, dimensions: Sequence[Dimension], counted: str) -> DataFrame:
    """The columns ``VisitMarker`` reads, in its order."""
    from pyspark.sql import functions as F

    def keys(dims: list[tuple[int, Dimension]]) -> Column:
        return F.array(*[F.col(f"_k{i}") for i, _ in dims]) if dims else F.array().cast("array<string>")

    return keyed.select(
        F.coalesce(F.col(counted), F.lit(False)),
        F.col("kafka_partition").cast("int"),
        F.col("kafka_offset").cast("long"),
        F.unix_date("day"),
        F.col("site"),
        F.col("visitor_id"),
        F.col("ts_us"),
        F.col("event_id"),
        keys(sessions.first_keyed(dimensions)),
        keys(sessions.last_keyed(dimensions)),
    )


def _cuts(active: dict[int, Offsets]) -> str:
    """The generations' cuts as ``VisitMarker`` reads them."""
    return "|".join(f"{gen}={_cut(cut)}" for gen, cut in sorted(active.items()))


def entry_rows(entries: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(delta rows, flag rows) of :meth:`Marker.entries`, as :func:`visit_rows` gives them."""
    from pyspark.sql import functions as F

    deltas = entries.where(F.col("v") != FLAG_DIMENSION)
    flags = entries.where(F.col("v") == FLAG_DIMENSION).select(
        "gen",
        F.lit(FLAG_VIEW).alias("view"),
        "key",
        F.date_format("day", "yyyy-MM-dd").alias("day"),
        F.lit(None).cast("string").alias("aux"),
    )
    return deltas, flags


def visit_rows(signed_visits: DataFrame, dimensions: Sequence[Dimension]) -> tuple[DataFrame, DataFrame]:
    """(delta rows, flag rows) of the micro-batch's :meth:`Marker.signed` visits.

    The delta rows are views.sessions.visit_entries' rows per ``gen`` (to be summed with the page
    views: views.shared_pass.count_events); the flag rows are (gen, view, key, day, aux) rows of
    :data:`FLAG_VIEW`: the (site, day) of every visit a view made that may not be exact."""
    from pyspark.sql import functions as F

    deltas = signed_visits.select("gen", "day", F.inline(sessions.visit_entries(dimensions, F.col(SIGN))))
    visit = F.col(sessions.VISIT)
    doubtful = (F.col(SIGN) > 0) & (visit["tainted"] | (visit["p_lo"] != visit["p_hi"]))
    flags = (
        signed_visits.where(doubtful)
        .select("gen", "site", F.date_format("day", "yyyy-MM-dd").alias("day"))
        .distinct()
        .select(
            "gen",
            F.lit(FLAG_VIEW).alias("view"),
            F.col("site").alias("key"),
            "day",
            F.lit(None).cast("string").alias("aux"),
        )
    )
    return deltas, flags


def state_sink(
    flags: Sequence[tuple[int, str, str]], progress: VisitProgress | None
) -> VisitStateSink | None:
    """The bookkeeping's sink for a micro-batch's flags ((generation, site, day) whose realtime
    visits may not be exact) and progress (None when the batch carried no visits: no sink)."""
    if progress is None:
        return None
    sink = VisitStateSink(progress.drop_before_us, progress.watermark_ms)
    for gen, site, day in flags:
        sink.add_flag(gen, site, day)
    return sink


def split_flags(rows: Sequence[Any]) -> tuple[list[Any], list[tuple[int, str, str]]]:
    """A micro-batch's collected rows (with the current visitors' taken out): its view rows, and
    its flags as (generation, site, day)."""
    views: list[Any] = []
    flags: list[tuple[int, str, str]] = []
    for row in rows:
        if row["view"] == FLAG_VIEW:
            flags.append((int(row["gen"]), row["key"], row["day"]))
        else:
            views.append(row)
    return views, flags
