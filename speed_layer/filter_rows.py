"""The filter table's realtime rows (views.filter_table) in the speed layer: each micro-batch's rows
of its counted events, per active generation whose cut they are at or past, computed in the
micro-batch's one Spark job beside the view rows and written in its commit
(stores.redis.filter_rows has the layout).

The rows come from the same keyed events as the views, exploded to one row per generation
(views.filter_table.filter_rows grouped by ``gen`` too). They travel with the view rows: unioned
into the collected frame under the marker ``view`` :data:`VIEW`, their columns prefixed with
:data:`PREFIX` (``day`` is a date here, a string in the view rows), and split out of the collected
Arrow table without becoming Python rows (:func:`split_table`): a micro-batch has about a row per
event, and the sink encodes them straight from Arrow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from speed_layer.visits import SIGN
from stores.redis.filter_rows import GEN
from views import filter_table
from views.dimension import Dimension

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

VIEW = "#filters"
"""The ``view`` of the filter rows among a micro-batch's collected rows."""
PREFIX = "_ft_"
"""What the filter rows' columns are named with among the collected rows."""


def counted(dimensions: Sequence[Dimension], on: bool) -> bool:
    """Whether the job makes the filter rows: ``on`` (settings.filter_table) and every dimension
    of the table declared; on without them is a configuration error."""
    if not on:
        return False
    names = {d.name for d in dimensions}
    missing = [name for name in (*filter_table.DIMENSIONS, *filter_table.VISIT_PAGES) if name not in names]
    if missing:
        raise ValueError(f"filter_table is on but the views {missing} of the filter table are not declared")
    return True


def rows(
    by_gen: DataFrame,
    dimensions: Sequence[Dimension],
    single_partition: bool,
    visits: DataFrame | None = None,
) -> DataFrame:
    """The micro-batch's filter rows per generation, as collected rows: ``view`` :data:`VIEW`,
    ``gen`` and the prefixed columns. ``by_gen``: the keyed events exploded to a ``gen`` each (the
    page-view rows); ``visits``: the closing visits per generation with their sign
    (speed_layer.visits.Marker.signed; the visit rows, retractions included: a visit a micro-batch did
    not change cancels out in the sums). A micro-batch small enough for one task aggregates in it
    (no exchange)."""
    from pyspark.sql import functions as F

    entries = by_gen.select("gen", filter_table.event_entry(dimensions).alias("_e"))
    if visits is not None:
        visit = filter_table.visit_entry(dimensions, F.col(SIGN))
        entries = entries.unionByName(visits.select("gen", visit.alias("_e")))
    entries = entries.select("gen", "_e.*")
    table = filter_table.summed(entries.coalesce(1) if single_partition else entries, ["gen"])
    return table.select(
        F.lit(VIEW).alias("view"),
        "gen",
        *[F.col(c).alias(PREFIX + c) for c in filter_table.COLUMNS],
    )


def split_table(table: pa.Table) -> tuple[pa.Table | None, pa.Table]:
    """A micro-batch's collected Arrow table: its filter rows (``gen`` and the table's columns;
    None when it has no filter rows' columns) and the other rows (without those columns)."""
    import pyarrow.compute as pc

    columns = [PREFIX + c for c in filter_table.COLUMNS]
    if columns[0] not in table.column_names:
        return None, table
    is_filter = pc.fill_null(pc.equal(table.column("view"), VIEW), False)
    filters = table.filter(is_filter).select([GEN, *columns])
    filters = filters.rename_columns([GEN, *filter_table.COLUMNS])
    others = table.filter(pc.invert(is_filter)).drop_columns(columns)
    return filters, others
