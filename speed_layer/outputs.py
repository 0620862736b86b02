"""What a micro-batch's counted events become: the realtime rows the speed layer commits.

From the counted events (accepted, not duplicates) tagged with the active generations whose cut
each is at or past (:data:`TAGS`) and their UTC minute (speed_layer.current_visitors.MINUTE), one
Spark job, over what the steps before kept in memory (:class:`Materialised`), gives:

- the shared pass's page views and sketches per generation (views.shared_pass.count_events), summed
  with the visits' deltas, retractions included (speed_layer.visits: made in the scan, by the
  visit state of each Kafka partition), and the flags of visits that may not be exact;
- the current visitors' rows (speed_layer.current_visitors);
- with the filter table on, its rows per generation (speed_layer.filter_rows), split out of the
  collected Arrow table as a table.

The job collects them in one frame (one Spark job, one collect); :func:`rows` splits what it
collected into :class:`RealtimeRows`, one field per kind of row, so nothing past the collect tells
kinds of rows apart by a marker.

The guarantees around it (the contract's verdicts, the dedup, the counts and dead letters, the
generations' tags, the exactly-once commit) are the micro-batch's (speed_layer.micro_batch). The
speed layer's throughput floor (bench/speed_floor.py) runs this same function over events parsed
with ``from_json`` alone, so that it gives the same output and the difference between the two is
the price of those guarantees.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from config.settings import Settings
from generations.model import Offsets
from speed_layer import current_visitors, filter_rows
from speed_layer.visits import Marker, VisitProgress, entry_rows, split_flags, visit_rows
from stores.redis.current_visitors import MinuteRow
from views import sessions
from views.dimension import Dimension
from views.shared_pass import assemble, count_events, keyed_events

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

TAGS = "_tags"
"""The active generations whose cut a record is at or past."""
COUNTED = "_counted"
"""Whether a record is a counted page view (accepted by the contract, not a duplicate)."""


@dataclass
class RealtimeRows:
    """What a micro-batch's Spark job gives for the active generations, one field per kind of row
    (speed_layer.writes turns each into its store's writes)."""

    views: list[Any] = field(default_factory=list)
    """The realtime view rows (views.rows with ``gen`` and ``view``, mappings): page views,
    sketches and the visits' deltas, retractions included."""
    visit_flags: list[tuple[int, str, str]] = field(default_factory=list)
    """(generation, site, day) whose realtime visits may not be exact."""
    minutes: list[MinuteRow] = field(default_factory=list)
    """The current visitors' rows (speed_layer.current_visitors)."""
    filters: pa.Table | None = None
    """The filter table's rows (``gen`` and views.filter_table.COLUMNS); None with the table off."""
    visit_progress: VisitProgress | None = None
    """Where the visit bookkeeping moves with this micro-batch (set by the driver after the job:
    speed_layer.micro_batch); None when no view counts visits."""


@dataclass(frozen=True)
class Outputs:
    """What the rows are made of: the declared dimensions, and whether the filter table is on."""

    settings: Settings
    dimensions: list[Dimension]
    filter_table: bool


class Materialised:
    """Frames computed once, each in a job of its own (``localCheckpoint``), and kept until
    :meth:`release`; the time goes to ``phases["read"]``."""

    def __init__(self, phases: dict[str, float]) -> None:
        self.phases = phases
        self._frames: list[DataFrame] = []

    def __call__(self, frame: DataFrame) -> DataFrame:
        t0 = time.monotonic()
        kept = frame.localCheckpoint(eager=True)
        self._frames.append(kept)
        self.phases["read"] = self.phases.get("read", 0.0) + time.monotonic() - t0
        return kept

    def keep(self, frame: DataFrame) -> None:
        """Release ``frame`` (materialised elsewhere) with the others."""
        self._frames.append(frame)

    def release(self) -> None:
        while self._frames:
            self._frames.pop().unpersist()


def rows(
    outputs: Outputs,
    tagged: DataFrame,
    visits: Marker | None,
    single: bool,
    materialise: Materialised,
    active: dict[int, Offsets],
) -> RealtimeRows:
    """The realtime rows of the ``tagged`` records' counted page views (:data:`COUNTED`; the
    records in the scan's order; one task each with ``single``, no exchange), collected in one job
    and split by kind (:class:`RealtimeRows`). ``visits``: the range's visit
    function (speed_layer.visits; needed when the views count visits), for the ``active``
    generations (the cuts ``tagged`` was tagged with)."""
    settings, dims = outputs.settings, outputs.dimensions
    counts_visits = sessions.counts_visits(dims)
    if not counts_visits:
        tagged = tagged.where(COUNTED)
    carried = [TAGS, "kafka_partition", current_visitors.MINUTE, COUNTED]
    keyed = keyed_events(tagged, dims, [*carried, "kafka_offset"] if counts_visits else carried, single)
    visit_deltas: tuple[DataFrame, DataFrame] | None = None
    signed_visits = None
    if counts_visits:
        if visits is None:
            raise ValueError("the views count visits: the micro-batch needs its visit function")
        # The visits read every record, in the scan's order (each partition's records reach its
        # visit state in offset order, and its whole range does); the views' rows, the visits'
        # and the current visitors' all read the keyed events, so they are computed once. The
        # visits' own rows are read twice (their sums, their flags), so they are kept too.
        keyed = materialise(keyed)
        if outputs.filter_table:  # it reads each visit
            signed_visits = materialise(visits.signed(keyed, dims, COUNTED, active))
            visit_deltas = visit_rows(signed_visits, dims)
        else:
            visit_deltas = entry_rows(materialise(visits.entries(keyed, dims, COUNTED, active)))
        keyed = keyed.drop("kafka_offset")
    elif single and current_visitors.counted(dims):
        keyed = materialise(keyed)
    keyed = keyed.where(COUNTED).drop(COUNTED)
    view_rows = views_with_visits(outputs, keyed, visit_deltas, single)
    minutes = current_visitors.minute_rows(keyed, dims, settings, single)
    if minutes is not None:
        view_rows = view_rows.unionByName(minutes, allowMissingColumns=True)
    if outputs.filter_table:
        filters = filter_rows.rows(by_generation(keyed), dims, single, signed_visits)
        view_rows = view_rows.unionByName(filters, allowMissingColumns=True)
    table, collected = filter_rows.split_table(view_rows.toArrow())
    return split(collected.to_pylist(), table)


def split(collected: list[Any], filters: pa.Table | None = None) -> RealtimeRows:
    """The collected rows (mappings; the filter rows' table apart: ``filters``) by kind."""
    minutes, rest = current_visitors.split(collected)
    views, flags = split_flags(rest)
    return RealtimeRows(views, flags, minutes, filters)


def views_with_visits(
    outputs: Outputs, keyed: DataFrame, visits: tuple[DataFrame, DataFrame] | None, single: bool
) -> DataFrame:
    """The realtime view rows of the keyed events (page views and sketches, no exact visitor
    count: the sink keeps none), with the micro-batch's ``visits``: its (delta rows, flag rows)
    (speed_layer.visits.visit_rows or entry_rows): the shared pass's stages, grouped by
    generation."""
    settings, dims = outputs.settings, outputs.dimensions
    deltas, flags = visits if visits is not None else (None, None)
    levels = count_events(by_generation(keyed), dims, ["gen"], settings.hll_lg_k, single, deltas)
    view_rows = assemble(levels, dims, ["gen"])
    return view_rows if flags is None else view_rows.unionByName(flags, allowMissingColumns=True)


def by_generation(keyed: DataFrame) -> DataFrame:
    """The keyed events once per generation they are tagged with (:data:`TAGS`), as ``gen``."""
    from pyspark.sql import functions as F

    return keyed.select(F.explode(TAGS).alias("gen"), *[c for c in keyed.columns if c != TAGS])


def tagged(records: DataFrame, active: dict[int, Offsets]) -> DataFrame:
    """``records`` (with :data:`COUNTED`) with :data:`TAGS` (the active generations whose cut
    each row is at or past) and its UTC minute."""
    from pyspark.sql import functions as F

    from speed_layer.stream import at_or_past

    tags = F.array(*[F.when(at_or_past(cut), F.lit(gen)) for gen, cut in sorted(active.items())])
    return records.withColumn(TAGS, F.filter(tags, lambda g: g.isNotNull())).withColumn(
        current_visitors.MINUTE, current_visitors.minute_column()
    )
