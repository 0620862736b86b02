"""What a micro-batch's counted events become: the realtime rows the speed layer commits.

From the counted events (accepted, not duplicates) tagged with the active generations whose cut
each is at or past (:data:`TAGS`) and their UTC minute (speed_layer.current_visitors.MINUTE), one
Spark job, over what the steps before kept in memory (:class:`Materialised`), gives:

- the shared pass's page views and sketches per generation (views.shared_pass.count_events), summed
  with the visits' deltas, retractions included (speed_layer.visits), and the visit state's new
  values and flags;
- the current visitors' rows (speed_layer.current_visitors);
- with the filter table on, its rows per generation (speed_layer.filter_rows), split out of the
  collected Arrow table as a table.

The guarantees around it (the contract's verdicts, the dedup, the counts and dead letters, the
generations' tags, the exactly-once commit) are the micro-batch's (speed_layer.micro_batch). The
speed layer's throughput floor (bench/speed_floor.py) runs this same function over events parsed
with ``from_json`` alone, so that it gives the same output and the difference between the two is
the price of those guarantees.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from config.settings import Settings
from generations.model import Offsets
from speed_layer import current_visitors, filter_rows
from speed_layer.visits import Horizon, collected_table, signed, visit_rows
from views import sessions
from views.dimension import Dimension
from views.shared_pass import assemble, count_events, keyed_events

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TAGS = "_tags"
"""The active generations whose cut a record is at or past."""


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
    active: dict[int, Offsets],
    horizon: Horizon,
    single: bool,
    materialise: Materialised,
) -> list[Any]:
    """The collected rows of the ``tagged`` counted events (one task each with ``single``, no
    exchange): every row a mapping, the visit state's and the filter table's each as one block
    (speed_layer.visits.collected_table, speed_layer.filter_rows.block)."""
    settings, dims = outputs.settings, outputs.dimensions
    keyed = keyed_events(tagged, dims, [TAGS, "kafka_partition", current_visitors.MINUTE], single)
    if sessions.counts_visits(dims) or (single and current_visitors.counted(dims)):
        # The visits' job, the views' rows and the current visitors' all read the keyed events:
        # what comes before the keys runs once.
        keyed = materialise(keyed)
    view_rows, visits = views_with_visits(outputs, keyed, active, horizon, single, materialise)
    minutes = current_visitors.minute_rows(keyed, dims, settings, single)
    if minutes is not None:
        view_rows = view_rows.unionByName(minutes, allowMissingColumns=True)
    if outputs.filter_table:
        signed_visits = None if visits is None else signed(visits, sorted(active))
        filters = filter_rows.rows(by_generation(keyed), dims, single, signed_visits)
        view_rows = view_rows.unionByName(filters, allowMissingColumns=True)
    table, collected = filter_rows.split_table(view_rows.toArrow())
    result = collected_table(collected)
    if table is not None:
        result.append(filter_rows.block(table))
    return result


def views_with_visits(
    outputs: Outputs,
    keyed: DataFrame,
    active: dict[int, Offsets],
    horizon: Horizon,
    single: bool,
    materialise: Materialised,
) -> tuple[DataFrame, DataFrame | None]:
    """The realtime view rows of the keyed events (page views and sketches, no exact visitor
    count: the sink keeps none), with the visits' deltas and the visit state's rows
    (speed_layer.visits): the shared pass's stages, grouped by generation. And the micro-batch's
    closing visits of every variant (None without visits)."""
    settings, dims = outputs.settings, outputs.dimensions
    by_gen = by_generation(keyed)
    deltas, extra, visits = None, None, None
    if sessions.counts_visits(dims):
        t0 = time.monotonic()
        deltas, extra, visits = visit_rows(keyed, dims, active, horizon, settings.redis_url, single)
        materialise.keep(visits)
        phases = materialise.phases
        phases["visits"] = phases.get("visits", 0.0) + time.monotonic() - t0
    levels = count_events(by_gen, dims, ["gen"], settings.hll_lg_k, single, deltas)
    view_rows = assemble(levels, dims, ["gen"])
    return (view_rows if extra is None else view_rows.unionByName(extra, allowMissingColumns=True)), visits


def by_generation(keyed: DataFrame) -> DataFrame:
    """The keyed events once per generation they are tagged with (:data:`TAGS`), as ``gen``."""
    from pyspark.sql import functions as F

    return keyed.select(F.explode(TAGS).alias("gen"), *[c for c in keyed.columns if c != TAGS])


def tagged(counted: DataFrame, active: dict[int, Offsets]) -> DataFrame:
    """``counted`` with :data:`TAGS` (the active generations whose cut each row is at or past)
    and its UTC minute."""
    from pyspark.sql import functions as F

    from speed_layer.stream import at_or_past

    tags = F.array(*[F.when(at_or_past(cut), F.lit(gen)) for gen, cut in sorted(active.items())])
    return counted.withColumn(TAGS, F.filter(tags, lambda g: g.isNotNull())).withColumn(
        current_visitors.MINUTE, current_visitors.minute_column()
    )
