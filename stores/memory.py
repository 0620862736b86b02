"""The store interfaces in memory, both halves: fast unit tests of the engine, a backend of the
suite every backend passes, and the reference for a new backend.

The batch store keeps the engine's documents (stores.batch_views.BatchDoc) per (view, holder
generation, key, day) and the rankings per (view, holder, day). The realtime store keeps the
realtime views' shape (per generation, view, key and day a hash of ``pv``/``pv:HH``/``sk``/
``sk:HH``, the layout of stores.realtime_hash, decoded as Redis' are; per generation, view and day
a ranking); its sink flushes into a :class:`MemoryTransaction`, applied whole or not at all, as the
speed layer's commit applies a Redis transaction. The batch run's lease has its twin too
(:class:`MemoryLeaseStore`); the generation registry, its hot copy and the manifest have none:
their protocol is tested on the real stores (tests/integration/generations/).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from generations.model import GENERATION_ZERO, Generation, Served, SpeedCommit
from stores import realtime_hash
from stores.batch_views import BatchDoc, DocRef, Entry, WrittenViews
from stores.errors import BatchUnavailable, RealtimeUnavailable, StoreUnavailable
from stores.lease import LeaseRecord
from stores.realtime_hash import realtime_write
from stores.realtime_views import (
    DayRead,
    FilterRowsBudget,
    FilterRowsSnapshot,
    RankRead,
    RealtimeDay,
    RealtimeSnapshot,
)
from stores.rows import VISIT_FIELDS, ranking_score, row_field, visit_metric
from views.rows import HOURS
from views.sketches import union_bytes

MemoryTransaction = list[Callable[[], None]]
"""Writes queued by a sink's flush; the commit runs them all, one after the other."""


def batch_doc_of(row: Any) -> BatchDoc:
    """A view row (views.rows) as the engine's document: its hours in 24 slots."""
    h_pv, h_uv = [0] * HOURS, [0] * HOURS
    h_sk: list[bytes | None] = [None] * HOURS
    for h in row["hours"]:
        hour = h["hour"]
        h_pv[hour], h_uv[hour] = int(h["pv"]), int(h["uv"])
        h_sk[hour] = None if h["sk"] is None else bytes(h["sk"])
    sk = row["sk"]
    visits: tuple[int, int, int, int] | None = None
    h_visits: list[tuple[int, int, int, int]] | None = None
    if row_field(row, "vi") is not None:
        visits = _visit_values(row)
        h_visits = [(0, 0, 0, 0)] * HOURS
        for h in row["hours"]:
            h_visits[h["hour"]] = _visit_values(h)
    return BatchDoc(
        int(row["pv"]), int(row["uv"]), None if sk is None else bytes(sk), h_pv, h_uv, h_sk, visits, h_visits
    )


def _visit_values(row: Any) -> tuple[int, int, int, int]:
    vi, bo, du, vv = (visit_metric(row, m) for m in VISIT_FIELDS)
    return vi, bo, du, vv


@dataclass
class MemoryBatchStore:
    """Batch views in memory: the write half (stores.batch_views.BatchViewWriter) and the read half
    (stores.batch_views.BatchReader)."""

    generations: dict[int, Generation] = field(default_factory=dict)
    served: int | None = None
    docs: dict[tuple[str, int, str, str], BatchDoc] = field(default_factory=dict)
    """(view, holder generation, key, day) -> document."""
    rankings: dict[tuple[str, int, str], list[tuple[str, int]]] = field(default_factory=dict)
    down: bool = False
    reads: int = 0

    def _check(self) -> None:
        if self.down:
            raise BatchUnavailable("memory batch reader is down")

    async def generation(self, gen: int) -> Generation:
        self._check()
        if gen not in self.generations and gen == GENERATION_ZERO.gen:
            return GENERATION_ZERO
        try:
            return self.generations[gen]
        except KeyError:
            raise BatchUnavailable(f"generation {gen} is not in the registry") from None

    async def served_generation(self) -> Generation | None:
        self._check()
        return None if self.served is None else self.generations[self.served]

    async def documents(
        self, view: str, refs: Sequence[DocRef], hour_sketches: Sequence[bool] = ()
    ) -> list[BatchDoc | None]:
        """Documents as stored, but without their hour sketches unless asked: the strictest store,
        one that keeps every document's apart, so a query that forgets to ask fails its tests."""
        self._check()
        self.reads += len(refs)
        wanted = list(hour_sketches) or [False] * len(refs)
        out = [self.docs.get((view, *ref)) for ref in refs]
        return [
            d if d is None or w else BatchDoc(d.pv, d.uv, d.sk, d.h_pv, d.h_uv, None)
            for d, w in zip(out, wanted, strict=True)
        ]

    async def ranking(self, view: str, holder: int, day: str) -> list[tuple[str, int]]:
        self._check()
        try:
            return self.rankings[(view, holder, day)]
        except KeyError:
            raise BatchUnavailable(f"no ranking for {view} {day} in generation {holder}") from None

    async def ping(self) -> None:
        self._check()

    # --- the write half --------------------------------------------------------------------------
    def write(self, gen: int, rows: Iterable[Any], days: Mapping[str, Iterable[str]]) -> WrittenViews:
        wanted = {view: frozenset(d) for view, d in days.items()}
        entries: dict[str, list[Entry]] = {view: [] for view in days}
        for row in rows:
            view = row["view"]
            if row["day"] not in wanted[view]:
                continue
            self.docs[(view, gen, row["key"], row["day"])] = batch_doc_of(row)
            entries[view].append((row["day"], row["key"], ranking_score(row)))
        return WrittenViews(entries, 0.0, sum(len(e) for e in entries.values()))

    def write_rankings(self, view: str, gen: int, written: Iterable[Entry], days: Iterable[str] = ()) -> None:
        by_day: dict[str, list[tuple[str, int]]] = {day: [] for day in days}
        for day, key, pv in written:
            by_day.setdefault(day, []).append((key, pv))
        for day, counts in by_day.items():
            self.rankings[(view, gen, day)] = sorted(counts, key=lambda kv: (-kv[1], kv[0]))

    def documents_in(self, gen: int, views: Iterable[str]) -> int:
        wanted = set(views)
        return sum(1 for view, holder, _, _ in self.docs if holder == gen and view in wanted)

    def read_ranking(self, view: str, gen: int, day: str) -> list[tuple[str, int]] | None:
        return self.rankings.get((view, gen, day))

    def read_all(self, view: str, day_map: dict[str, int]) -> Iterator[dict[str, Any]]:
        for (v, holder, key, day), doc in sorted(self.docs.items(), key=lambda kv: kv[0]):
            if v == view and day_map.get(day) == holder:
                yield {
                    "key": key,
                    "day": day,
                    "pv": doc.pv,
                    "uv": doc.uv,
                    "sk": doc.sk,
                    "h_pv": doc.h_pv,
                    "h_uv": doc.h_uv,
                    "h_sk": doc.h_sk,
                }

    def collections(self) -> list[tuple[str, int]]:
        held = {(view, holder) for view, holder, _, _ in self.docs}
        held |= {(view, holder) for view, holder, _ in self.rankings}
        return sorted(held)

    def _drop(self, view: str, gen: int) -> None:
        self.docs = {k: d for k, d in self.docs.items() if (k[0], k[1]) != (view, gen)}
        self.rankings = {k: r for k, r in self.rankings.items() if (k[0], k[1]) != (view, gen)}

    def drop_generation(self, gen: int) -> None:
        for view, holder in self.collections():
            if holder == gen:
                self._drop(view, gen)

    def garbage_collect(self, referenced: Set[tuple[str, int]], protected_gens: Set[int]) -> list[str]:
        dropped = []
        for view, gen in self.collections():
            if (view, gen) not in referenced and gen not in protected_gens:
                self._drop(view, gen)
                dropped.append(f"{view}@{gen}")
        return dropped


@dataclass
class MemoryRealtimeSink:
    """The speed layer's sink on :class:`MemoryRealtimeStore` (stores.realtime_views.RealtimeSink): page
    views add up, sketches are unions with the stored ones, as on Redis."""

    store: MemoryRealtimeStore
    _pv: dict[tuple[int, str, str, str], dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int))
    )
    _sketches: dict[tuple[int, str, str, str], dict[str, list[bytes]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    _ranks: dict[tuple[int, str, str], dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int))
    )

    def add(self, gen: int, view: str, row: Any) -> None:
        at = (gen, view, row["key"], row["day"])
        write = realtime_write(row)
        for f, n in write.increments.items():
            self._pv[at][f] += n
        for f, sketch in write.sketches.items():
            self._sketches[at][f].append(sketch)
        self._ranks[(gen, view, row["day"])][row["key"]] += write.score

    def prepare(self) -> None:
        """Nothing to read ahead: the flush's writes read the store when they run."""

    def flush(self, txn: MemoryTransaction) -> int:
        txn.append(self._apply)
        return len(self._pv)

    def _apply(self) -> None:
        for at, counts in self._pv.items():
            stored = self.store.hashes.setdefault(at, {})
            for f, n in counts.items():
                stored[f] = str(int(stored.get(f, b"0")) + n).encode()
            for f, parts in self._sketches[at].items():
                stored[f] = union_bytes([stored.get(f), *parts]) or b""
        for (gen, view, day), counts in self._ranks.items():
            ranks = self.store.ranks.setdefault((gen, view, day), {})
            for member, n in counts.items():
                ranks[member] = ranks.get(member, 0.0) + n


@dataclass
class MemoryRealtimeStore:
    """Realtime views in memory: the read half (stores.realtime_views.RealtimeReader); :meth:`sink` gives
    the write half of one micro-batch."""

    served: Served | None = None
    commit: SpeedCommit = field(default_factory=SpeedCommit)
    hashes: dict[tuple[int, str, str, str], dict[str, bytes]] = field(default_factory=dict)
    """(generation, view, key, day) -> field -> value."""
    ranks: dict[tuple[int, str, str], dict[str, float]] = field(default_factory=dict)
    stats: dict[str, object] | None = None
    views: dict[int, frozenset[str]] = field(default_factory=dict)
    """generation -> the views (``name@fingerprint``) the speed layer counted it with."""
    visit_flags: dict[int, set[tuple[str, str]]] = field(default_factory=dict)
    """generation -> (site, day) whose realtime visits may not be exact."""
    filter_rows: dict[tuple[int, str, str], list[bytes]] = field(default_factory=dict)
    """(generation, site, day) -> the filter table's realtime rows, Arrow IPC streams
    (stores.redis.filter_rows: one per micro-batch); append with :meth:`append_filter_rows`."""
    filter_sizes: dict[tuple[int, str, str], tuple[int, int]] = field(default_factory=dict)
    """(generation, site, day) -> the rows and bytes (stores.redis.filter_rows.read_bytes) of its
    streams, counted as they are appended, as Redis' hash of sizes counts them."""
    filter_reads: int = 0
    """How many reads returned streams (a withheld read returns none)."""
    down: bool = False

    def _check(self) -> None:
        if self.down:
            raise RealtimeUnavailable("memory realtime reader is down")

    async def snapshot(self, days: Sequence[DayRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        self._check()
        if self.served is None:
            return RealtimeSnapshot(None, self.commit, [], [])
        g = self.served.gen
        return RealtimeSnapshot(
            self.served,
            self.commit,
            [self._day(g, d) for d in days],
            [[(k, int(v)) for k, v in sorted(self.ranks.get((g, r.view, r.day), {}).items())] for r in ranks],
            self.views.get(g),
            self._flags(g),
        )

    def _day(self, gen: int, d: DayRead) -> RealtimeDay:
        stored = self.hashes.get((gen, d.view, d.key, d.day), {})
        return realtime_hash.decode(d.cells, [stored.get(f) for f in realtime_hash.fields_of(d.cells)])

    def _flags(self, gen: int) -> frozenset[tuple[str, str]]:
        return frozenset(self.visit_flags.get(gen, ()))

    async def speed_stats(self) -> dict[str, object] | None:
        self._check()
        return self.stats

    def append_filter_rows(self, gen: int, site: str, day: str, blob: bytes) -> None:
        """Append one stream (stores.redis.filter_rows.encode) to the list of (``gen``, ``site``,
        ``day``) and count its rows and bytes, as a speed layer's commit does."""
        import pyarrow as pa

        from stores.redis.filter_rows import read_bytes

        table = pa.ipc.open_stream(pa.py_buffer(blob)).read_all()
        at = (gen, site, day)
        self.filter_rows.setdefault(at, []).append(blob)
        rows, nbytes = self.filter_sizes.get(at, (0, 0))
        self.filter_sizes[at] = (rows + table.num_rows, nbytes + read_bytes(blob, table))

    async def filter_rows_snapshot(
        self, site: str, days: Sequence[str], budget: FilterRowsBudget | None = None
    ) -> FilterRowsSnapshot:
        self._check()
        if self.served is None:
            return FilterRowsSnapshot(None, self.commit, None, [])
        g = self.served.gen
        sizes = [self.filter_sizes.get((g, site, day), (0, 0)) for day in days]
        rows, nbytes = sum(r for r, _ in sizes), sum(b for _, b in sizes)
        views = self.views.get(g)
        flags = self._flags(g)
        if budget is not None and not budget.allows(g, rows, nbytes):
            return FilterRowsSnapshot(self.served, self.commit, views, [], None, rows, nbytes, True, flags)
        blobs = [b for day in days for b in self.filter_rows.get((g, site, day), [])]
        self.filter_reads += bool(blobs)
        return FilterRowsSnapshot(self.served, self.commit, views, blobs, None, rows, nbytes, False, flags)

    async def ping(self) -> None:
        self._check()

    def sink(self) -> MemoryRealtimeSink:
        return MemoryRealtimeSink(self)


@dataclass
class MemoryLeaseStore:
    """The batch run's lease in memory (stores.lease.LeaseStore): each write atomic under a lock,
    as each is one single-document write on MongoDB. ``down`` makes :meth:`extend` fail as a
    store that cannot be reached."""

    record: LeaseRecord | None = None
    down: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def read(self) -> LeaseRecord | None:
        with self._lock:
            return self.record

    def create(self, record: LeaseRecord) -> bool:
        with self._lock:
            if self.record is not None:
                return False
            self.record = record
            return True

    def replace(self, token: str | None, record: LeaseRecord) -> bool:
        with self._lock:
            if self.record is None or self.record.token != token:
                return False
            self.record = record
            return True

    def extend(self, token: str, expires_at: datetime) -> bool:
        with self._lock:
            if self.down:
                raise StoreUnavailable("memory lease store is down")
            if self.record is None or self.record.token != token:
                return False
            self.record = replace(self.record, expires_at=expires_at)
            return True
