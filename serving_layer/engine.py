"""The query engine: one generation's batch views merged with its realtime views, exactly.

Every query follows the same steps:

1. One Redis transaction returns the served generation ``g``, the speed layer's commit and the
   realtime values of ``g`` the query needs (serving_layer.redis_realtime). That fixes the answer's
   generation once: everything below comes from ``g``.
2. Batch values come from ``g``'s batch documents: for each day, the collection that
   ``g.day_map[view][day]`` names. They are immutable, so reading them after the transaction is
   safe (a retired generation's data is deleted only after a grace period).
3. Batch (events below ``g``'s cut) plus realtime (events at or above it) counts every committed
   event exactly once: pageviews are summed, unique visitors are sketch unions, never sums.

If Redis cannot be read, the served generation comes from MongoDB's registry and the answer is
the batch views alone, flagged ``partial`` with ``missing=["realtime"]`` and the offsets it covers.
If MongoDB cannot be read, no answer is given (BatchUnavailable): a realtime-only number would be
silently wrong.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from contract import site_of
from generations.keys import PV, SKETCH, hour_field
from serving_layer.consistency import pending
from serving_layer.model import (
    BatchDoc,
    ConsistencyTimeout,
    GenerationInfo,
    HashRead,
    InvalidQuery,
    NothingServed,
    Offsets,
    RankRead,
    RealtimeUnavailable,
    SpeedCommit,
)
from serving_layer.readers import BatchReader, DocRef, RealtimeReader
from serving_layer.tiling import (
    DAY,
    Granularity,
    Tile,
    buckets,
    days_covering,
    floor_day,
    is_hour_aligned,
    tile,
)
from views import sketches

log = logging.getLogger(__name__)

URL_VIEW = "url_traffic"
SITE_VIEW = "site_traffic"
REALTIME = "realtime"
PV_HOURS = tuple(hour_field(PV, h) for h in range(24))
SK_HOURS = tuple(hour_field(SKETCH, h) for h in range(24))


# --- queries ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SeriesQuery:
    """A key's values over ``[start, end)`` (UTC, whole hours), one point per hour or day."""

    view: str
    key: str
    start: datetime
    end: datetime
    granularity: Granularity


@dataclass(frozen=True)
class TopQuery:
    """The ``limit`` keys with the most page views over the UTC days ``[start, end)`` touches."""

    view: str
    start: datetime
    end: datetime
    limit: int
    site: str | None = None


@dataclass(frozen=True)
class ReadAfter:
    """Answer only from a snapshot that includes these end offsets; wait up to ``wait_s``."""

    offsets: Offsets
    wait_s: float


def check_range(start: datetime, end: datetime, max_days: int) -> None:
    """Raise InvalidQuery naming the parameter if ``[start, end)`` cannot be answered exactly."""
    for param, t in (("from", start), ("to", end)):
        if t.tzinfo is None or t.utcoffset() != timedelta(0):
            raise InvalidQuery(param, "must be in UTC")
        if not is_hour_aligned(t):
            raise InvalidQuery(param, "must be a whole hour (minutes and seconds 0): the finest bucket")
    if start >= end:
        raise InvalidQuery("from", "must be before to")
    if end - start > timedelta(days=max_days):
        raise InvalidQuery("to", f"the range exceeds the maximum of {max_days} days")


# --- answers ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Coverage:
    """Which events an answer includes: every event of the log below ``batch_offsets`` (the
    generation's cut, taken at ``batch_as_of``) and, unless realtime is missing, every event below
    ``realtime_offsets`` (the speed layer's last commit)."""

    generation: int
    batch_offsets: Offsets
    batch_as_of: datetime
    realtime_offsets: Offsets | None
    partial: bool
    missing: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PageviewPoint:
    start: datetime
    pageviews: int


@dataclass(frozen=True, slots=True)
class Distinct:
    """Unique visitors: exact (from exact batch counts alone) or an HLL estimate with 95% bounds."""

    estimate: float
    lower: float
    upper: float
    exact: bool


@dataclass(frozen=True)
class PageviewsAnswer:
    query: SeriesQuery
    series: list[PageviewPoint]
    total: int
    coverage: Coverage


@dataclass(frozen=True)
class UniqueVisitorsAnswer:
    query: SeriesQuery
    series: list[tuple[datetime, Distinct]]
    total: Distinct
    coverage: Coverage


@dataclass(frozen=True)
class TopAnswer:
    query: TopQuery
    start: datetime
    end: datetime
    """The whole UTC days actually ranked (the query's range rounded outwards)."""
    entries: list[tuple[str, int]]
    coverage: Coverage


@dataclass(frozen=True)
class ServingState:
    """What /v1/status reports of the serving side: the served generation and the speed layer."""

    generation: GenerationInfo
    commit: SpeedCommit | None
    """None when Redis could not be read."""
    speed_stats: dict[str, object] | None
    realtime_error: str | None


@dataclass
class _Snapshot:
    gen: GenerationInfo
    hashes: list[dict[str, bytes]]
    ranks: list[list[tuple[str, float]]]
    coverage: Coverage


class QueryEngine:
    def __init__(
        self,
        batch: BatchReader,
        realtime: RealtimeReader,
        *,
        on_degraded: Callable[[str, Exception], None] | None = None,
        poll_s: float = 0.05,
    ) -> None:
        self.batch = batch
        self.realtime = realtime
        self.on_degraded = on_degraded or (lambda store, exc: None)
        self.poll_s = poll_s

    # --- the consistent read every query starts with --------------------------------------------
    async def _snapshot(
        self, hashes: Sequence[HashRead], ranks: Sequence[RankRead], after: ReadAfter | None
    ) -> _Snapshot:
        started = time.monotonic()
        while True:
            snap = await self._snapshot_once(hashes, ranks)
            if after is None:
                return snap
            cov = snap.coverage
            missing = pending(after.offsets, cov.batch_offsets, cov.realtime_offsets)
            if not missing:
                return snap
            waited = time.monotonic() - started
            if waited >= after.wait_s:
                raise ConsistencyTimeout(missing, waited)
            await asyncio.sleep(min(self.poll_s, after.wait_s - waited))

    async def _snapshot_once(self, hashes: Sequence[HashRead], ranks: Sequence[RankRead]) -> _Snapshot:
        try:
            rt = await self.realtime.snapshot(hashes, ranks)
        except RealtimeUnavailable as exc:
            log.warning("answering from the batch views alone: %s", exc)
            self.on_degraded("redis", exc)
            rt = None
        if rt is not None and rt.served is not None:
            gen = await self.batch.generation(rt.served.gen)
            coverage = Coverage(gen.gen, gen.cut, gen.started_at, rt.commit.offsets, False, ())
            return _Snapshot(gen, rt.hashes, rt.ranks, coverage)
        # Redis is down or has lost its data: the durable registry names the served generation.
        served = await self.batch.served_generation()
        if served is None:
            raise NothingServed("no generation has been published yet")
        coverage = Coverage(served.gen, served.cut, served.started_at, None, True, (REALTIME,))
        return _Snapshot(served, [{} for _ in hashes], [[] for _ in ranks], coverage)

    async def _documents(
        self, view: str, key: str, days: list[str], gen: GenerationInfo
    ) -> dict[str, BatchDoc]:
        holders = gen.day_map.get(view, {})
        refs: list[DocRef] = [(holders[d], key, d) for d in days if d in holders]
        docs = await self.batch.documents(view, refs)
        return {ref[2]: doc for ref, doc in zip(refs, docs, strict=True) if doc is not None}

    async def _series_data(
        self, q: SeriesQuery, kind: str, after: ReadAfter | None
    ) -> tuple[_Snapshot, dict[str, BatchDoc], dict[str, dict[str, bytes]]]:
        """The realtime fields (``kind`` "pv" or "sk") and batch documents a series query needs."""
        plan = _read_plan(q.start, q.end, q.granularity, kind)
        days = [day for day, _ in plan]
        reads = [HashRead(q.view, q.key, day, fields) for day, fields in plan]
        snap = await self._snapshot(reads, (), after)
        docs = await self._documents(q.view, q.key, days, snap.gen)
        return snap, docs, dict(zip(days, snap.hashes, strict=True))

    async def state(self) -> ServingState:
        """The served generation (from Redis' pointer, or MongoDB's when Redis is down) and the
        speed layer's last commit and report."""
        try:
            rt = await self.realtime.snapshot((), ())
            stats = await self.realtime.speed_stats()
        except RealtimeUnavailable as exc:
            self.on_degraded("redis", exc)
            served = await self.batch.served_generation()
            if served is None:
                raise NothingServed("no generation has been published yet") from None
            return ServingState(served, None, None, str(exc))
        if rt.served is not None:
            return ServingState(await self.batch.generation(rt.served.gen), rt.commit, stats, None)
        gen = await self.batch.served_generation()  # Redis lost its copy of the pointer
        if gen is None:
            raise NothingServed("no generation has been published yet")
        return ServingState(gen, rt.commit, stats, None)

    # --- queries --------------------------------------------------------------------------------
    async def pageviews(self, q: SeriesQuery, after: ReadAfter | None = None) -> PageviewsAnswer:
        snap, docs, rt = await self._series_data(q, PV, after)
        # Per day, batch + realtime: the day's total and its 24 hours; then each tile is one lookup.
        day_total: dict[str, int] = {}
        day_hours: dict[str, list[int]] = {}
        for day, values in rt.items():
            doc = docs.get(day)
            total = doc.pv if doc else 0
            hours = list(doc.h_pv) if doc else [0] * 24
            for name, raw in values.items():
                if name == PV:
                    total += int(raw)
                else:
                    hours[int(name[len(PV) + 1 :])] += int(raw)
            day_total[day], day_hours[day] = total, hours
        series = []
        for b in buckets(q.start, q.end, q.granularity):
            n = 0
            for t in b.tiles:
                n += day_total[t.day] if t.hour is None else day_hours[t.day][t.hour]
            series.append(PageviewPoint(b.start, n))
        return PageviewsAnswer(q, series, sum(p.pageviews for p in series), snap.coverage)

    async def unique_visitors(self, q: SeriesQuery, after: ReadAfter | None = None) -> UniqueVisitorsAnswer:
        series_buckets = buckets(q.start, q.end, q.granularity)
        whole = tile(q.start, q.end)
        snap, docs, rt = await self._series_data(q, SKETCH, after)
        series = [(b.start, _distinct(b.tiles, docs, rt)) for b in series_buckets]
        return UniqueVisitorsAnswer(q, series, _distinct(whole, docs, rt), snap.coverage)

    async def top(self, q: TopQuery, after: ReadAfter | None = None) -> TopAnswer:
        days = days_covering(q.start, q.end)
        snap = await self._snapshot((), [RankRead(q.view, d) for d in days], after)
        holders = snap.gen.day_map.get(q.view, {})
        batch_days = [d for d in days if d in holders]
        rankings = await asyncio.gather(*(self.batch.ranking(q.view, holders[d], d) for d in batch_days))
        totals: dict[str, int] = {}
        for ranking in rankings:
            for key, pv in ranking:
                totals[key] = totals.get(key, 0) + pv
        for entries in snap.ranks:
            for key, score in entries:
                totals[key] = totals.get(key, 0) + int(score)
        items = totals.items()
        if q.site is not None:
            items = {k: v for k, v in items if site_of(k) == q.site}.items()
        best = heapq.nsmallest(q.limit, items, key=lambda kv: (-kv[1], kv[0]))
        start = floor_day(q.start)
        end = floor_day(q.end) + (DAY if q.end != floor_day(q.end) else timedelta(0))
        return TopAnswer(q, start, end, [(k, v) for k, v in best if v > 0], snap.coverage)


@lru_cache(maxsize=4096)
def _read_plan(
    start: datetime, end: datetime, granularity: Granularity, kind: str
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Per day, the realtime fields a series query reads: the series' tiles, plus for unique
    visitors the coarsest tiling of the whole range (its union). Cached like the tiling."""
    tiles = [t for b in buckets(start, end, granularity) for t in b.tiles]
    hourly = PV_HOURS
    if kind == SKETCH:
        tiles += tile(start, end)
        hourly = SK_HOURS
    fields: dict[str, set[str]] = {}
    for t in tiles:
        fields.setdefault(t.day, set()).add(kind if t.hour is None else hourly[t.hour])
    return tuple((day, tuple(sorted(fields[day]))) for day in sorted(fields))


def _distinct(tiles: Sequence[Tile], docs: dict[str, BatchDoc], rt: dict[str, dict[str, bytes]]) -> Distinct:
    """Unique visitors over tiles: the union of their sketches, or the exact batch count when a
    single tile holds data and no realtime sketch contributes (a union with empty sets is the set).

    A day's batch hours enter the union as one sketch, their union, which the document memoises
    (it is immutable): the edge hours of a range repeat from query to query.
    """
    found: list[bytes | None] = []
    exact: list[int] = []
    batch_hours: dict[str, list[int]] = {}
    realtime = False
    for t in tiles:
        doc, values = docs.get(t.day), rt[t.day]
        if t.hour is None:
            if doc is not None and doc.sk is not None:
                found.append(doc.sk)
                exact.append(doc.uv)
            rt_sk = values.get(SKETCH)
        else:
            if doc is not None and doc.h_sk[t.hour] is not None:
                batch_hours.setdefault(t.day, []).append(t.hour)
                exact.append(doc.h_uv[t.hour])
            rt_sk = values.get(SK_HOURS[t.hour])
        if rt_sk is not None:
            found.append(rt_sk)
            realtime = True
    if not realtime and len(exact) <= 1:
        n = float(exact[0]) if exact else 0.0
        return Distinct(n, n, n, True)
    found += [docs[day].hours_union(tuple(hours)) for day, hours in batch_hours.items()]
    e = sketches.estimate(found)
    return Distinct(e.estimate, e.lower, e.upper, False)
