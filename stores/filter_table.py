"""The filter table's batch store (views.filter_table): its write half, the batch layer's. Backend:
``stores.parquet.filter_table``, whose ``batch_files`` lists a generation's files for the readers
(the serving layer's filter path scans them); the realtime rows are the realtime store's
(stores.realtime_views.RealtimeReader.filter_rows_snapshot)."""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any, Protocol


class FilterTableWriter(Protocol):
    """The batch layer's side of the filter table (views.filter_table; stores.parquet.filter_table):
    a generation writes the days it recomputed into its own storage, and garbage collection
    follows the batch views' rules (generations.retention)."""

    def write(self, gen: int, rows: Any) -> None:
        """Store the filter table's rows (views.filter_table.filter_rows, a Spark DataFrame) as
        generation ``gen``'s, each row under its day."""
        ...

    def files(self, days: Mapping[str, int]) -> list[str]:
        """The files holding the given days, each day from the generation named for it."""
        ...

    def drop_generation(self, gen: int) -> None:
        """Delete what a generation wrote of the table (a failed or abandoned one)."""
        ...

    def garbage_collect(self, referenced: Set[tuple[str, int]], protected_gens: Set[int]) -> list[str]:
        """Delete what no retained generation references (``referenced``: (name, generation) of
        their day maps' entries; never ``protected_gens``); returns what went."""
        ...
