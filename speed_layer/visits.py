"""The speed layer's visits: a micro-batch's page views merged into the open visits of the
visitor-days they touch, and the realtime deltas, retractions included, of every active generation.

The realtime visits of generation ``g`` must be, per visitor-day, the visits of every committed
page view minus the visits of those below ``g``'s cut (which ``g``'s batch views hold): then batch
plus realtime is the visits of all of them, whatever a late view merged or stretched. A
micro-batch adds for ``g``, per visitor-day it touches:

    visits(state + batch's views) - visits(state + batch's views below g's cut)

where ``state`` holds the visits of every earlier view (stores.redis.visit_state). Summed over the
micro-batches this telescopes to exactly the difference above, because a Kafka partition is read in
offset order: once a view of a visitor-day is at or past a cut, every later view of it is too (the
platform's producers key a visitor's views to one partition; a visit whose views came from two
partitions is flagged instead). Both sides are computed by the one definition
(views.sessions.merge) as *variants* of the same rows: variant -1 (every view) and, per active
generation, the views not at or past its cut. The credited rows of variant -1's visits count +1
for every generation, those of variant ``g``'s visits -1 for ``g``: visits that did not change
cancel out in the aggregation, and what remains is the retraction of the old visits and the
addition of the new ones.

The state of the visitor-days a micro-batch touches is read by Spark's executors (:func:`stored`:
the texts fetched in ``mapInArrow`` by stores.redis.visit_state.loader, parsed by Spark), and its
new value comes back with the view rows, to be committed in the same transaction
(speed_layer.commit).

**The horizon.** A visit leaves the state once its last view is ``visit_lateness_s`` plus the
session gap behind the watermark (the newest log-append time committed before the micro-batch).
A view whose event time is more than ``visit_lateness_s`` behind the watermark may belong to a
visit that left: it is merged with what is left, its visit is marked tainted, and the (site, day)
of every tainted visit a micro-batch touches is flagged for every active generation, so answers
say those visits are not exact until the next batch run recomputes the day. A view within the
horizon can never belong to a visit that left (its distance to any such visit exceeds the gap).
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

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

STATE_VIEW = "#visit-state"
"""Collected rows that carry a visitor-day's new state (``aux``: JSON list of visits)."""
FLAG_VIEW = "#visit-flag"
"""Collected rows that flag a (generation, site, day) whose realtime visits may not be exact."""
META_VIEW = "#visit-meta"
"""The one row (added by the driver) with the state's new watermark and its drop cut-off."""
MIN_US = visit_state.NEVER


def meta_row(watermark_ms: int, drop_before_us: int) -> dict[str, Any]:
    return {"gen": None, "view": META_VIEW, "key": str(drop_before_us), "day": "", "aux": str(watermark_ms)}


@dataclass(frozen=True)
class Horizon:
    """The cut-offs of one micro-batch, from the state as committed before it.

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
    """The dimensions a state stores first and last keys for (a state of others is rebuilt)."""
    first = ",".join(d.name for _, d in sessions.first_keyed(dimensions))
    last = ",".join(d.name for _, d in sessions.last_keyed(dimensions))
    return f"first:{first};last:{last}"


def visit_schema(dimensions: Sequence[Dimension]) -> str:
    """The Spark type (DDL) of a stored visit (stores.redis.visit_state.FIELDS, the first and
    last view's keys by dimension name)."""

    def keys(dims: list[tuple[int, Dimension]]) -> str:
        return ",".join(f"`{d.name}`:string" for _, d in dims) or "`_`:string"

    return (
        "struct<s_ts:bigint,s_id:string,e_ts:bigint,e_id:string,"
        f"first:struct<{keys(sessions.first_keyed(dimensions))}>,"
        f"last:struct<{keys(sessions.last_keyed(dimensions))}>,n:bigint,tainted:boolean,"
        "p_lo:int,p_hi:int>"
    )


def stored(
    touched: DataFrame, dimensions: Sequence[Dimension], redis_url: str, dropped_before_us: int
) -> DataFrame:
    """The stored visits of the ``touched`` visitor-days (site, visitor_id, day as text) that may
    still change (those that ended before ``dropped_before_us`` count as gone), one row each:
    site, visitor_id, day (a date) and the visit's fields. A text that is not a list of visits
    fails the micro-batch (FAILFAST) rather than losing the visits it held."""
    from pyspark.sql import functions as F

    visits = F.from_json("text", f"array<{visit_schema(dimensions)}>", {"mode": "FAILFAST"})
    return (
        touched.mapInArrow(visit_state.loader(redis_url), visit_state.TEXTS_SCHEMA)
        .select("site", "visitor_id", F.to_date("day").alias("day"), F.inline(visits))
        .where(F.col("e_ts") >= F.lit(dropped_before_us))
    )


def visit_rows(
    keyed: DataFrame,
    dimensions: Sequence[Dimension],
    active: dict[int, Offsets],
    horizon: Horizon,
    redis_url: str,
    single_partition: bool = False,
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(delta rows, state and flag rows, the visits to unpersist after the job) of
    a micro-batch's keyed page views
    (views.shared_pass.keyed_events grouped by ``_tags``, the generations each view is at or past
    the cut of, and ``kafka_partition``).

    The delta rows are views.sessions.visit_entries' rows per ``gen`` (to be summed with the page
    views: views.shared_pass.count_events); the others are (gen, view, key, day, aux) rows of
    :data:`STATE_VIEW` and :data:`FLAG_VIEW`. With ``single_partition`` (a small micro-batch)
    everything runs in one task with no exchange, as the page views do (views.shared_pass)."""
    from pyspark.sql import functions as F

    if single_partition:
        keyed = keyed.coalesce(1)

    gens = sorted(active)
    gap_s = horizon.gap_s
    part = F.col("kafka_partition").cast("int")
    events = sessions.as_summaries(keyed, dimensions).select(
        *sessions.SUMMARY_KEYS,
        "s_ts",
        "s_id",
        "e_ts",
        "e_id",
        "first",
        "last",
        "n",
        (F.col("ts_us") < F.lit(horizon.late_before_us)).alias("tainted"),
        part.alias("p_lo"),
        part.alias("p_hi"),
        "_tags",
    )
    variants = F.array(F.lit(-1), *[F.when(~F.array_contains("_tags", g), F.lit(g)) for g in gens])
    events = events.select("*", F.explode(variants).alias("variant")).where(F.col("variant").isNotNull())
    touched = keyed.select("site", "visitor_id", F.date_format("day", "yyyy-MM-dd").alias("day")).distinct()
    state = stored(touched, dimensions, redis_url, horizon.dropped_before_us)
    state = state.select("*", F.explode(F.array(*[F.lit(g) for g in (-1, *gens)])).alias("variant"))
    rows = events.drop("_tags").unionByName(state)
    if single_partition:
        rows = rows.coalesce(1)  # a union of two single partitions has two
    # Materialised once (a job of its own): the deltas, the new state and the flags all read it,
    # and Spark would otherwise sessionise, and read the state, once for each (measured slower
    # even for micro-batches of a few thousand views).
    closing = (
        sessions.sessionised(rows, ["variant"], gap_s)
        .where(F.col(f"{sessions.VISIT}.closes"))
        .select("variant", *sessions.SUMMARY_KEYS, sessions.VISIT)
        .localCheckpoint(eager=True)
    )

    every = F.col("variant") == -1
    deltas = signed(closing, gens).select(
        "gen", "day", F.inline(sessions.visit_entries(dimensions, F.col(SIGN)))
    )

    visit = F.col(sessions.VISIT)
    current = closing.where(every)
    day = F.date_format("day", "yyyy-MM-dd")
    fields = [visit[f].alias(f) for f in ("s_ts", "s_id", "e_ts", "e_id", "first", "last", "n", "tainted")]
    fields += [visit["p_lo"].alias("p_lo"), visit["p_hi"].alias("p_hi")]
    new_state = (
        current.groupBy("site", "visitor_id", "day")
        .agg(
            F.to_json(F.collect_list(F.struct(*fields))).alias("aux"),
            F.max(visit["e_ts"]).alias("end"),
        )
        .select(
            F.lit(None).cast("int").alias("gen"),
            F.lit(STATE_VIEW).alias("view"),
            visit_state.state_key_column(F.col("site"), F.col("visitor_id"), day).alias("key"),
            day.alias("day"),
            "aux",
            "end",
        )
    )
    doubtful = visit["tainted"] | (visit["p_lo"] != visit["p_hi"])
    flags = (
        current.where(doubtful)
        .select("site", day.alias("day"))
        .distinct()
        .select(
            F.explode(F.array(*[F.lit(g) for g in gens])).alias("gen"),
            F.lit(FLAG_VIEW).alias("view"),
            F.col("site").alias("key"),
            "day",
            F.lit(None).cast("string").alias("aux"),
        )
    )
    return deltas, new_state.unionByName(flags, allowMissingColumns=True), closing


SIGN = "_sign"
"""The column :func:`signed` gives each visit: 1, or -1 for a retraction."""


def signed(closing: DataFrame, gens: Sequence[int]) -> DataFrame:
    """The closing visits of every variant (:func:`visit_rows`' third frame) once per generation
    they count for, as ``gen``, with :data:`SIGN`: variant -1's (the visits of every view) +1 for
    every active generation in ``gens``, variant ``g``'s (those of the views below g's cut) -1 for
    ``g``. Summed, a visit that did not change cancels out."""
    from pyspark.sql import functions as F

    every = F.col("variant") == -1
    gen = F.explode(F.when(every, F.array(*[F.lit(g) for g in gens])).otherwise(F.array(F.col("variant"))))
    sign = F.when(every, F.lit(1)).otherwise(F.lit(-1))
    return closing.select("*", gen.alias("gen"), sign.alias(SIGN))


@dataclass
class VisitUpdate:
    """What a micro-batch changes in the visit state, from its collected rows."""

    states: list[tuple[str, str, int]]
    """(state key, JSON list of visits, latest end) per touched visitor-day
    (stores.redis.visit_state.VisitStateSink.add_text)."""
    flags: list[tuple[int, str, str]]
    """(generation, site, day) whose realtime visits may not be exact."""
    watermark_ms: int | None = None
    drop_before_us: int | None = None

    def sink(self, client: visit_state.Client) -> VisitStateSink | None:
        """The state's sink for this update (None when the batch carried no visit state)."""
        if self.watermark_ms is None or self.drop_before_us is None:
            return None
        sink = VisitStateSink(client, self.drop_before_us, self.watermark_ms)
        for key, text, end in self.states:
            sink.add_text(key, text, end)
        for gen, site, day in self.flags:
            sink.add_flag(gen, site, day)
        return sink


def collected(rows: DataFrame) -> list[Any]:
    """A micro-batch's rows (:func:`visit_rows`' beside the views'), collected through Arrow: every
    row as a mapping, except the visit state's, which come as one mapping of columns
    (``view`` :data:`STATE_VIEW`; ``key``, ``aux`` and ``end`` lists): a visitor-day each, up to
    one per view of the micro-batch, too many to make a Python row of each."""
    return collected_table(rows.toArrow())


def collected_table(table: pa.Table) -> list[Any]:
    """:func:`collected` of rows already collected as an Arrow table."""
    import pyarrow.compute as pc

    if "end" not in table.column_names:
        return list(table.to_pylist())
    is_state = pc.fill_null(pc.equal(table.column("view"), STATE_VIEW), False)
    states = table.filter(is_state)
    others = table.filter(pc.invert(is_state)).drop_columns(["end"])
    block = {"view": STATE_VIEW, **{c: states.column(c).to_pylist() for c in ("key", "aux", "end")}}
    return [*others.to_pylist(), block]


def split(rows: Sequence[Any]) -> tuple[list[Any], VisitUpdate]:
    """The view rows of a micro-batch's :func:`collected` rows, and its visit state update."""
    views: list[Any] = []
    states: list[tuple[str, str, int]] = []
    flags: list[tuple[int, str, str]] = []
    update = VisitUpdate(states, flags)
    for row in rows:
        view = row["view"]
        if view == META_VIEW:
            update.watermark_ms, update.drop_before_us = int(row["aux"]), int(row["key"])
        elif view == STATE_VIEW:
            states.extend(zip(row["key"], row["aux"], row["end"], strict=True))
        elif view == FLAG_VIEW:
            flags.append((int(row["gen"]), row["key"], row["day"]))
        else:
            views.append(row)
    return views, update
