"""The realtime views' store: its write half (the speed layer's sink, flushed inside the commit of
a micro-batch) and its read half (the serving layer's snapshot), and the values they exchange.
Backends: ``stores.redis`` (sink.py, reader.py), ``stores.memory``.

The read half answers in the serving layer's terms: a :class:`DayRead` asks for cells (a measure
of a day, or of one of its hours) of one (view, key, day), and the snapshot returns each as a
:class:`RealtimeDay`, decoded by the store (how a backend spells its fields is its own business:
stores.realtime_hash for Redis and its in-memory twin).

The sink follows the add/flush shape, and its flush is tied to the commit (as Quix Streams ties a
sink's flush to its checkpoint): the views and the offsets they cover land together or not at all.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from generations.model import Served, SpeedCommit

HOURS = 24
Txn = TypeVar("Txn", contravariant=True)

VisitSums = tuple[int, int, int, int]
"""Visits, bounces, total duration (ms) and views in visits (views.sessions), as a batch
document's ``visits`` holds them; realtime sums may be negative (retractions)."""
NO_VISITS: VisitSums = (0, 0, 0, 0)


class Measure(StrEnum):
    """What a realtime view holds per day and per hour."""

    PAGEVIEWS = "pageviews"
    VISITORS = "visitors"
    """The HLL sketch of the visitors."""
    VISITS = "visits"
    """The four visit sums (:data:`VisitSums`)."""


Cell = tuple[Measure, int | None]
"""A measure of a day (hour None) or of one of its hours (0-23)."""


@dataclass(frozen=True, slots=True)
class DayRead:
    """Cells of one realtime view (view, key, day) of the served generation."""

    view: str
    key: str
    day: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class RankRead:
    """The realtime ranking (key -> day's page views) of one view and day."""

    view: str
    day: str


@dataclass(frozen=True, slots=True)
class RealtimeDay:
    """What a realtime view of (view, key, day) holds of the cells read: the realtime twin of a
    batch document (stores.batch_views.BatchDoc). A cell not read, or without data, is 0 (page
    views, visit sums) or None (sketches): the identity of the merge."""

    pv: int = 0
    h_pv: tuple[int, ...] = (0,) * HOURS
    sk: bytes | None = None
    h_sk: tuple[bytes | None, ...] = (None,) * HOURS
    visits: VisitSums = NO_VISITS
    h_visits: tuple[VisitSums, ...] = (NO_VISITS,) * HOURS


EMPTY_DAY = RealtimeDay()


@dataclass(frozen=True)
class RealtimeSnapshot:
    """One atomic read of the realtime store: the served pointer, the speed layer's commit, the data.

    ``days[i]`` answers the i-th :class:`DayRead`; ``ranks[i]`` the i-th :class:`RankRead`, each
    (key, page views). ``served`` is None when the store has no served pointer (nothing published
    yet, or Redis lost its data); then the data lists are empty.
    """

    served: Served | None
    commit: SpeedCommit
    days: list[RealtimeDay]
    ranks: list[list[tuple[str, int]]]
    views: frozenset[str] | None = None
    """The views (``name@fingerprint``: views.registry.view_mark) the speed layer counted the
    served generation with since its cut; None when it has not counted it yet (its realtime views
    are then empty)."""
    visit_flags: frozenset[tuple[str, str]] = frozenset()
    """(site, day) whose realtime visits may not be exact (stores.redis.visit_state)."""
    stamp: Hashable | None = None
    """What identifies the realtime state this snapshot saw: equal stamps, equal realtime values
    (the served pointer, the commit record and the generation's view and visit-flag sets as Redis
    held them; every write of realtime values changes the commit record in the same transaction).
    None where the store cannot tell (no commit yet, a store without one): nothing may be reused."""


@dataclass(frozen=True)
class FilterRowsBudget:
    """What a read of the filter table's realtime rows may fetch: the lists are read only if the
    served generation is ``gen`` and their counted rows and bytes (FilterRowsSnapshot.rows,
    .nbytes) are at most ``rows`` and ``nbytes``; otherwise the read returns the counts alone
    (``withheld``). A budget may be negative: then nothing is read (the batch part alone is over
    the limit)."""

    gen: int
    rows: int
    nbytes: int

    def allows(self, gen: int, rows: int, nbytes: int) -> bool:
        """Whether the lists of generation ``gen`` holding ``rows`` rows and ``nbytes`` bytes may
        be read (the rule the Redis function applies too: stores/redis/snapshot.lua)."""
        return gen == self.gen and rows <= self.rows and nbytes <= self.nbytes


COUNTS_ONLY = FilterRowsBudget(-1, -1, -1)
"""A budget that reads no list: the counts alone, with the served generation they are of."""


@dataclass(frozen=True)
class FilterRowsSnapshot:
    """One atomic read of the filter table's realtime rows (stores.redis.filter_rows) of one site
    and some days: the served pointer, the speed layer's commit, the served generation's counted
    views and the lists' elements, all as Redis held them at one instant.

    ``blobs`` are the Arrow IPC streams of the lists of the requested days, in the order of the
    days and, within a day, of the micro-batches (decode them with
    stores.redis.filter_rows.decode_blobs). ``served`` is None when Redis has no served pointer;
    then ``views`` is None and ``blobs`` empty. The rows count for the served generation only when
    ``views`` holds the filter table's mark (views.filter_table.mark) with the fingerprint of the
    generation's batch part: then they hold every event from its cut up to ``commit.offsets``.
    A read with a :class:`FilterRowsBudget` returns the lists only within it (else ``withheld``)."""

    served: Served | None
    commit: SpeedCommit
    views: frozenset[str] | None
    blobs: list[bytes]
    stamp: Hashable | None = None
    """As RealtimeSnapshot.stamp: the served pointer, the commit record and the views set, raw;
    equal stamps, equal rows. None without a commit record."""
    rows: int = 0
    """The rows of the requested days' lists, as the commits that appended them counted them (read
    at the same instant as the lists), whether the lists were read or not."""
    nbytes: int = 0
    """What reading those lists holds in memory: the streams plus their rows decoded
    (stores.redis.filter_rows.read_bytes), counted the same way."""
    withheld: bool = False
    """The lists were not read (``blobs`` is empty though ``rows`` may not be 0): the read's
    :class:`FilterRowsBudget` did not allow them."""
    visit_flags: frozenset[tuple[str, str]] = frozenset()
    """The served generation's (site, day) whose realtime visits may not be exact (as
    RealtimeSnapshot.visit_flags), read at the same instant."""


class RealtimeSink(Protocol[Txn]):
    """The speed layer's side of the realtime views, for one micro-batch: rows are added, then
    flushed into ``Txn``, the transaction that also commits the micro-batch's offsets."""

    def add(self, gen: int, view: str, row: Any) -> None:
        """One view row (key, day, pv, uv, sk, hours) of this micro-batch for generation ``gen``."""
        ...

    def prepare(self) -> None:
        """Read what the flush merges with (stored sketches), before the transaction starts."""
        ...

    def flush(self, txn: Txn) -> int:
        """Queue every write into ``txn``; returns the number of realtime keys written."""
        ...


class RealtimeReader(Protocol):
    """The serving layer's side of the realtime views."""

    async def snapshot(self, days: Sequence[DayRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        """Served pointer, speed commit and the given realtime data of the served generation, all
        seen at one instant (raises RealtimeUnavailable if Redis cannot be read)."""
        ...

    async def speed_stats(self) -> dict[str, object] | None:
        """The speed layer's report of its last micro-batch, if any."""
        ...

    async def filter_rows_snapshot(
        self, site: str, days: Sequence[str], budget: FilterRowsBudget | None = None
    ) -> FilterRowsSnapshot:
        """The filter table's realtime rows of ``site`` on ``days`` for the served generation, with
        the served pointer, the commit, the generation's counted views and the rows' counts, seen at
        one instant; with a ``budget``, the rows only within it, else the counts alone (``withheld``)
        (raises RealtimeUnavailable if Redis cannot be read)."""
        ...

    async def ping(self) -> None: ...
