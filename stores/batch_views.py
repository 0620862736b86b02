"""The batch views' store: its write half (the batch layer) and its read half (the serving layer),
and the values they exchange. Backends: ``stores.mongo`` (writer.py, reader.py), ``stores.memory``.

A generation's batch views are insert-only and copy-free across generations: a generation writes
only the (key, day) documents it recomputed, and its day map names, per view and day, the generation
whose documents hold it (docs/design.md, "Storage shapes"). The writers run in the batch job and are
synchronous; the reader is async (the API serves many queries per worker).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from views import sketches

if TYPE_CHECKING:
    from generations.model import Generation

DocRef = tuple[int, str, str]
"""(generation holding the document, key, day)."""
Entry = tuple[str, str, int]
"""(day, key, page views) of one written (key, day) document: what a day's ranking is built from."""


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
