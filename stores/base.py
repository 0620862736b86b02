"""The interfaces of the stores, each with its write half and its read half; one package per backend.

- The generation registry (MongoDB: ``stores.mongo.generations``): :class:`GenerationStore`, the
  durable record of every generation and the served pointer; its hot copy (Redis:
  ``stores.redis.handshake``): :class:`HotCopy`, the active generations with their cuts, the served
  pointer and the transaction that opens a generation against the speed layer's commit;
  :class:`ManifestStore` (``stores.mongo.manifest``), the master dataset's committed segments, and
  :class:`ManifestReader`, the status's read of them;
  :class:`LeaseStore` (``stores.mongo.lease``), the batch run's single-writer lease.
- Batch views (MongoDB: ``stores.mongo``): :class:`BatchViewWriter`, the batch layer's write,
  rankings, read-back and garbage collection of a generation's documents; :class:`BatchReader`,
  the serving layer's reads of published generations and their documents.
- The filter table (Parquet: ``stores.parquet``): :class:`FilterTableWriter`, the batch layer's
  write and garbage collection of a generation's rows of views.filter_table; readers list a
  generation's files with ``stores.parquet.filter_table.batch_files``.
- Realtime views (Redis: ``stores.redis``): :class:`RealtimeSink`, the speed layer's add/flush,
  flushed inside the transaction that commits the micro-batch (as Quix Streams ties a sink's flush
  to its checkpoint), so the views and the commit land together or not at all;
  :class:`RealtimeReader`, the served pointer, the speed commit and the realtime views in one
  consistent snapshot.

``stores.memory`` implements both halves of the batch and realtime views in memory: the engine's
unit tests, the reference for a new backend, and a backend of the suite every backend passes
(tests/serving_suite.py). A new backend is a package here plus one fixture of that suite.
Everything the serving layer reads is async (the API serves many queries per worker, and a
query's reads wait on the network, not the CPU); the writers run in the batch and speed jobs and
are synchronous.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from views import sketches

if TYPE_CHECKING:
    from datetime import datetime

    from batch_layer.segment import Segment
    from generations.model import Generation, Offsets, Served
    from generations.state import GenerationState
    from serving_layer.model import FilterRowsBudget, FilterRowsSnapshot, HashRead, RankRead, RealtimeSnapshot

DocRef = tuple[int, str, str]
"""(generation holding the document, key, day)."""
Entry = tuple[str, str, int]
"""(day, key, page views) of one written (key, day) document: what a day's ranking is built from."""
Txn = TypeVar("Txn", contravariant=True)

# A realtime view of (generation, view, key, day) is a hash of these fields, the realtime twin of a
# batch document: ``pv`` and ``pv:HH`` page views in the day and in hour HH (00-23), ``sk`` and
# ``sk:HH`` the HLL sketches of their visitors. Exact distinct counts are not kept in realtime: they
# do not add up across micro-batches.
PV = "pv"
SKETCH = "sk"
VISIT_FIELDS = ("vi", "bo", "du", "vv")
"""Visits, bounces, total duration (ms), views in visits (views.sessions): ``vi`` and ``vi:HH`` ...
per day and hour, increments that may be negative (retractions)."""


def hour_field(kind: str, hour: int) -> str:
    """``pv:07`` / ``sk:07``: the hourly field of a realtime hash."""
    return f"{kind}:{hour:02d}"


@dataclass(frozen=True)
class RealtimeWrite:
    """What one view row (views.rows) adds to its realtime hash: increments per field, sketches to
    union per field, and its key's ranking score (page views; visits for a view of visits only)."""

    increments: dict[str, int]
    sketches: dict[str, bytes]
    score: int


def realtime_write(row: Any) -> RealtimeWrite:
    """The fields a view row writes (the one mapping every realtime store applies): page views and
    their sketches where the row has page views, visit metrics where they are not zero."""
    increments: dict[str, int] = {}
    found: dict[str, bytes] = {}
    pv = int(row["pv"])
    if pv:
        increments[PV] = pv
        found[SKETCH] = bytes(row["sk"])
    for name in VISIT_FIELDS:
        if n := visit_metric(row, name):
            increments[name] = n
    for h in row["hours"]:
        hour = h["hour"]
        if h["pv"]:
            increments[hour_field(PV, hour)] = int(h["pv"])
            found[hour_field(SKETCH, hour)] = bytes(h["sk"])
        for name in VISIT_FIELDS:
            if n := visit_metric(h, name):
                increments[hour_field(name, hour)] = n
    return RealtimeWrite(increments, found, ranking_score(row))


def ranking_score(row: Any) -> int:
    """What a day's ranking orders a row's key by: its page views, or, for a view of visits only
    (the entry and exit pages, which count no page views), its visits."""
    return int(row["pv"]) or visit_metric(row, "vi")


def row_field(row: Any, name: str) -> Any:
    """A field of a view row or hour (a Spark Row or a mapping); None when it has none (rows of
    code that predates the field)."""
    try:
        return row[name]
    except (KeyError, ValueError, IndexError):
        return None


def visit_metric(row: Any, name: str) -> int:
    """A visit metric of a row or hour (0 when the row has none: a view without visits)."""
    return int(row_field(row, name) or 0)


def view_mark(name: str, fingerprint: str) -> str:
    """A view as the speed layer records it for a generation it counted: ``name@fingerprint``."""
    return f"{name}@{fingerprint}"


@dataclass(frozen=True, slots=True)
class BatchDoc:
    """One stored batch-view document as the engine reads it: a key's day and its 24 hours.

    ``h_sk`` is None while hour sketches stored apart (stores.mongo.codec) have not been read:
    only queries that union hours of the day ask for them (BatchReader.documents).
    """

    pv: int
    uv: int
    sk: bytes | None
    h_pv: list[int]
    h_uv: list[int]
    h_sk: list[bytes | None] | None
    visits: tuple[int, int, int, int] | None = None
    """The day's visits, bounces, total duration (ms) and views in visits (views.sessions); None for
    a view that counts no visits."""
    h_visits: list[tuple[int, int, int, int]] | None = None
    """The same per hour 0-23."""
    _unions: dict[tuple[int, ...], bytes | None] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    """Memo of :meth:`hours_union` (the document is immutable, so are its unions)."""

    def hours_union(self, hours: tuple[int, ...]) -> bytes | None:
        """The union of some hours' sketches, serialised; computed once per document and hours."""
        if self.h_sk is None:
            raise RuntimeError("hour sketches stored apart were not read for this query")
        if hours not in self._unions:
            h_sk = self.h_sk
            self._unions[hours] = sketches.union_bytes(h_sk[h] for h in hours)
        return self._unions[hours]

    @property
    def sketches_apart(self) -> bool:
        """Whether the hour sketches are stored apart and not read yet."""
        return self.h_sk is None

    @property
    def size(self) -> int:
        """Approximate bytes held in memory, for the cache's budget."""
        return 600 + len(self.sk or b"") + sum(len(s) for s in self.h_sk or () if s)


@dataclass(frozen=True)
class WrittenViews:
    """What :meth:`BatchViewWriter.write` wrote: per view, an entry per document, and for how long
    documents were being inserted (from the first insert's start to the last one's end)."""

    entries: dict[str, list[Entry]]
    insert_seconds: float
    inserted: int = 0
    """Documents inserted: one per entry, plus any a backend stores beside them (hour sketches
    kept apart: stores.mongo.codec)."""

    @property
    def documents(self) -> int:
        """(key, day) documents: one per entry."""
        return sum(len(e) for e in self.entries.values())

    @property
    def hour_sketch_documents(self) -> int:
        """Documents of hour sketches stored apart from their (key, day) document."""
        return self.inserted - self.documents


class GenerationStore(Protocol):
    """The durable half of the generation registry (generations.registry keeps the protocol and
    the hot copy): a record per generation and the served pointer."""

    def get(self, gen: int) -> Generation | None: ...

    def all(self) -> list[Generation]:
        """Every generation, in ascending order."""
        ...

    def insert(self, gen: Generation) -> None:
        """A new generation's record (fails if the number is taken)."""
        ...

    def save(self, gen: Generation) -> None: ...

    def save_if(self, gen: Generation, expected: Iterable[GenerationState]) -> bool:
        """Save ``gen`` only if its stored state is one of ``expected``, atomically; whether it was."""
        ...

    def set_state(self, gen: int, state: GenerationState) -> None: ...

    def served_gen(self) -> int | None:
        """The served generation's number; None before the first publication."""
        ...

    def point_served(self, gen: int, at: datetime) -> None:
        """Switch the served pointer, atomically."""
        ...


class HotCopy(Protocol):
    """The generation registry's hot copy (generations.registry keeps the protocol: which
    generation, which cut, when): what the speed layer and the API read on every micro-batch and
    query. Every write here is atomic; :meth:`register_cut` is the opening handshake."""

    def active(self) -> dict[int, Offsets]:
        """The generations the speed layer counts for, with their cuts ({} when none is kept)."""
        ...

    def served(self) -> Served:
        """The served generation as the hot copy has it (``Served()`` when it has none)."""
        ...

    def register_cut(self, gen: int, cut_for: Callable[[Offsets], Offsets]) -> Offsets:
        """Add ``gen`` to the active generations with the cut ``cut_for(committed)`` computes from
        the speed layer's committed end offsets, in one transaction that fails and is tried again
        (``cut_for`` called again with fresh offsets) if the speed layer commits meanwhile."""
        ...

    def write(self, active: dict[int, Offsets], served: Served) -> None:
        """Replace the active generations and the served pointer, both in one transaction."""
        ...

    def write_if_absent(self, active: dict[int, Offsets], served: Served) -> None:
        """:meth:`write`, only if no active generations are kept (one transaction)."""
        ...

    def drop_active(self, gen: int) -> None:
        """Remove ``gen`` from the active generations (one transaction)."""
        ...


class ManifestStore(Protocol):
    """The master dataset's manifest: the segments committed so far (batch_layer.master)."""

    def segments(self) -> list[Segment]:
        """Every committed segment, by generation and id."""
        ...

    def commit(self, segment: Segment) -> None:
        """Make a written segment part of the master dataset, atomically."""
        ...


class ManifestReader(Protocol):
    """The API's read of the manifest (its status: dead letters, what is absorbed, gaps)."""

    async def segments(self) -> list[Segment]:
        """Every committed segment, by generation and id."""
        ...


@dataclass(frozen=True)
class LeaseRecord:
    """The batch run's lease as stored (batch_layer.lease keeps the protocol)."""

    token: str | None
    fence: int
    owner: str | None
    since: datetime | None
    expires_at: datetime | None
    """None: never set (taken as released)."""


class StoreUnavailable(RuntimeError):
    """A store could not be reached for now: the caller may try again later."""


class LeaseStore(Protocol):
    """The batch run's lease: one record, every write a single atomic conditional write."""

    def read(self) -> LeaseRecord | None: ...

    def create(self, record: LeaseRecord) -> bool:
        """Store ``record`` if there is no lease record yet; False if there is one."""
        ...

    def replace(self, token: str | None, record: LeaseRecord) -> bool:
        """Replace the record only if it still carries ``token``; whether it did."""
        ...

    def extend(self, token: str, expires_at: datetime) -> bool:
        """Set the expiry of the record carrying ``token``; False if none does. Raises
        :class:`StoreUnavailable` when the store cannot be reached."""
        ...


class BatchViewWriter(Protocol):
    """The batch layer's side of the batch views: insert-only, one generation at a time."""

    def write(self, gen: int, rows: Any, days: Mapping[str, Iterable[str]]) -> WrittenViews:
        """Store the view rows (views.rows plus ``view``; a Spark DataFrame or any iterable of
        rows) of every view in ``days`` as documents of ``gen``, each view only for its days."""
        ...

    def write_rankings(self, view: str, gen: int, written: Iterable[Entry], days: Iterable[str] = ()) -> None:
        """One ranking per day of ``view`` from the entries :meth:`write` returned; every day of
        ``days`` gets one, with or without rows."""
        ...

    def documents_in(self, gen: int, views: Iterable[str]) -> int:
        """Documents stored for ``gen`` so far (a progress line while they fill)."""
        ...

    def read_ranking(self, view: str, gen: int, day: str) -> list[tuple[str, int]] | None:
        """A day's keys by page views as stored by ``gen``; None without one."""
        ...

    def read_all(self, view: str, day_map: dict[str, int]) -> Iterator[dict[str, Any]]:
        """Every document of a view as a generation with this day map sees it, its hours as
        ``h_pv``, ``h_uv``, ``h_sk`` lists (diffs, tests)."""
        ...

    def collections(self) -> list[tuple[str, int]]:
        """(view, generation) of every stored batch view."""
        ...

    def drop_generation(self, gen: int) -> None:
        """Delete every batch view a generation wrote (a failed or abandoned one)."""
        ...

    def garbage_collect(self, referenced: Set[tuple[str, int]], protected_gens: Set[int]) -> list[str]:
        """Delete the batch views no retained generation references (never those of
        ``protected_gens``); returns what went."""
        ...


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


class BatchReader(Protocol):
    """The serving layer's side of the batch views: published generations and their documents."""

    async def generation(self, gen: int) -> Generation:
        """A published generation (raises BatchUnavailable if it cannot be read)."""
        ...

    async def served_generation(self) -> Generation | None:
        """The served generation from the durable registry (used when Redis cannot say)."""
        ...

    async def documents(
        self, view: str, refs: Sequence[DocRef], hour_sketches: Sequence[bool] = ()
    ) -> list[BatchDoc | None]:
        """The documents of ``refs``, in order; None where a key had no traffic that day.

        Hour sketches stored apart (stores.mongo.codec.row_to_documents) are read only where
        ``hour_sketches[i]`` is true (empty: nowhere); elsewhere such a document's ``h_sk`` may be
        None.
        """
        ...

    async def ranking(self, view: str, holder: int, day: str) -> list[tuple[str, int]]:
        """The day's keys by page views, descending, from the documents of ``holder``."""
        ...

    async def ping(self) -> None: ...


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

    async def snapshot(self, hashes: Sequence[HashRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
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
