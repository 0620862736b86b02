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
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from generations.keys import PV, SKETCH, hour_field, view_mark
from serving_layer.consistency import pending
from serving_layer.model import (
    BatchDoc,
    ConsistencyTimeout,
    GenerationInfo,
    HashRead,
    InvalidQuery,
    NothingServed,
    NotReady,
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
from views import all_views, describe, get_view, sketches
from views.scopes import scope_of

log = logging.getLogger(__name__)

URL_VIEW = "page"
SITE_VIEW = "site"
REALTIME = "realtime"
PV_HOURS = tuple(hour_field(PV, h) for h in range(24))
SK_HOURS = tuple(hour_field(SKETCH, h) for h in range(24))
SK_HOURS_SET = frozenset(SK_HOURS)


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
    """The ``limit`` keys with the most page views over the UTC days ``[start, end)`` touches,
    of one site (``site``) or of all; with ``visitors``, each key's unique visitors too."""

    view: str
    start: datetime
    end: datetime
    limit: int
    site: str | None = None
    visitors: bool = False


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
    visitors: list[Distinct | None] | None = None
    """With ``query.visitors``: each entry's unique visitors over the days."""
    total_pageviews: int = 0
    """Page views of every key in scope (not only the listed ones)."""
    total_visitors: Distinct | None = None
    """With ``query.visitors`` and a site: the site's unique visitors over the days."""


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    start: datetime
    pageviews: int
    visitors: Distinct


@dataclass(frozen=True)
class SeriesAnswer:
    """Page views and unique visitors of one key, per bucket and over the range, one snapshot."""

    query: SeriesQuery
    series: list[SeriesPoint]
    pageviews: int
    visitors: Distinct
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
    views: frozenset[str] | None = None
    """What the speed layer counted the generation with (None: nothing counted, or Redis down)."""


def per_site(gen: GenerationInfo, view: str) -> bool:
    """Whether a view's keys are ``site|value`` (from the generation's description of it, else
    from this process' declarations)."""
    info = gen.views.get(view)
    if info is not None:
        return bool(info.get("per_site"))
    try:
        return get_view(view).per_site
    except KeyError:
        return False


def readiness(view: str, gen: GenerationInfo, realtime_views: frozenset[str] | None) -> str | None:
    """Why ``view`` cannot be answered exactly from ``gen`` (None: it can).

    Exact needs both parts: batch views of the generation computed by the current code, and a
    realtime part that counted the view with the same code from the generation's cut on. A view
    declared while the platform runs is therefore served from the first generation opened after
    both the batch layer and the speed layer know it.
    """
    if any(gen.cut.values()) and view not in gen.day_map:
        return f"the served generation {gen.gen} has no batch views of it; the next batch run computes them"
    if realtime_views is not None:
        fp = gen.fingerprints.get(view)
        counted = any(m.partition("@")[0] == view for m in realtime_views)
        if not counted or (fp is not None and view_mark(view, fp) not in realtime_views):
            return (
                f"the speed layer has not counted it since generation {gen.gen}'s cut with the code of "
                "its batch views; it is served from the first generation opened after the speed layer "
                "runs with it"
            )
    return None


class QueryEngine:
    def __init__(
        self,
        batch: BatchReader,
        realtime: RealtimeReader,
        *,
        on_degraded: Callable[[str, Exception], None] | None = None,
        on_bad_key: Callable[[str, str], None] | None = None,
        poll_s: float = 0.05,
    ) -> None:
        self.batch = batch
        self.realtime = realtime
        self.on_degraded = on_degraded or (lambda store, exc: None)
        self.on_bad_key = on_bad_key or (
            lambda view, key: log.warning("skipped malformed %s key %r", view, key)
        )
        self.poll_s = poll_s
        self._described: dict[str, dict[str, Any]] = {}
        """Views as the generations seen so far describe them (views.scopes.describe)."""

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
            if gen.views:
                self._described.update(gen.views)
            coverage = Coverage(gen.gen, gen.cut, gen.started_at, rt.commit.offsets, False, ())
            return _Snapshot(gen, rt.hashes, rt.ranks, coverage, rt.views)
        # Redis is down or has lost its data: the durable registry names the served generation.
        served = await self.batch.served_generation()
        if served is None:
            raise NothingServed("no generation has been published yet")
        coverage = Coverage(served.gen, served.cut, served.started_at, None, True, (REALTIME,))
        return _Snapshot(served, [{} for _ in hashes], [[] for _ in ranks], coverage)

    async def _documents(
        self,
        view: str,
        key: str,
        days: list[str],
        gen: GenerationInfo,
        hourly_uniques: Set[str] = frozenset(),
    ) -> dict[str, BatchDoc]:
        """The batch documents of ``key`` on ``days``; those of ``hourly_uniques`` with their hour
        sketches (only a union of hours needs them, and they can be most of a document)."""
        holders = gen.day_map.get(view, {})
        refs: list[DocRef] = [(holders[d], key, d) for d in days if d in holders]
        docs = await self.batch.documents(view, refs, [ref[2] in hourly_uniques for ref in refs])
        return {ref[2]: doc for ref, doc in zip(refs, docs, strict=True) if doc is not None}

    def _check_ready(self, snap: _Snapshot, *views: str) -> None:
        for view in views:
            problem = readiness(view, snap.gen, snap.views)
            if problem is not None:
                raise NotReady(view, problem)

    async def _series_data(
        self, q: SeriesQuery, kinds: tuple[str, ...], after: ReadAfter | None
    ) -> tuple[_Snapshot, dict[str, BatchDoc], dict[str, dict[str, bytes]]]:
        """The realtime fields (``kinds``: "pv", "sk") and batch documents a series query needs."""
        plan = _read_plan(q.start, q.end, q.granularity, kinds)
        days = [day for day, _ in plan]
        reads = [HashRead(q.view, q.key, day, fields) for day, fields in plan]
        snap = await self._snapshot(reads, (), after)
        self._check_ready(snap, q.view)
        hourly_uniques = {day for day, fields in plan if not SK_HOURS_SET.isdisjoint(fields)}
        docs = await self._documents(q.view, q.key, days, snap.gen, hourly_uniques)
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
    async def series(self, q: SeriesQuery, after: ReadAfter | None = None) -> SeriesAnswer:
        """Page views and unique visitors of one key, from one snapshot."""
        snap, docs, rt = await self._series_data(q, (PV, SKETCH), after)
        day_total, day_hours = _pageviews_by_day(docs, rt)
        series = []
        total = 0
        for b in buckets(q.start, q.end, q.granularity):
            n = _pageviews(b.tiles, day_total, day_hours)
            total += n
            series.append(SeriesPoint(b.start, n, _distinct(b.tiles, docs, rt)))
        return SeriesAnswer(q, series, total, _distinct(tile(q.start, q.end), docs, rt), snap.coverage)

    async def pageviews(self, q: SeriesQuery, after: ReadAfter | None = None) -> PageviewsAnswer:
        snap, docs, rt = await self._series_data(q, (PV,), after)
        day_total, day_hours = _pageviews_by_day(docs, rt)
        series = [
            PageviewPoint(b.start, _pageviews(b.tiles, day_total, day_hours))
            for b in buckets(q.start, q.end, q.granularity)
        ]
        return PageviewsAnswer(q, series, sum(p.pageviews for p in series), snap.coverage)

    async def unique_visitors(self, q: SeriesQuery, after: ReadAfter | None = None) -> UniqueVisitorsAnswer:
        series_buckets = buckets(q.start, q.end, q.granularity)
        whole = tile(q.start, q.end)
        snap, docs, rt = await self._series_data(q, (SKETCH,), after)
        series = [(b.start, _distinct(b.tiles, docs, rt)) for b in series_buckets]
        return UniqueVisitorsAnswer(q, series, _distinct(whole, docs, rt), snap.coverage)

    async def top(self, q: TopQuery, after: ReadAfter | None = None) -> TopAnswer:
        """The keys of a view (of one site, or all) ranked by page views over whole UTC days.

        Without visitors: one snapshot (batch day rankings + realtime ranking sets). With them,
        the snapshot also reads the listed keys' realtime sketches, which are known only once the
        ranking is: it is read again with the keys of the previous ranking until the ranking and
        the keys read agree, so every number of the answer comes from the same snapshot.
        """
        days = days_covering(q.start, q.end)
        whole_days = [Tile(d, None) for d in days]
        rank_reads = [RankRead(q.view, d) for d in days]
        site_totals = q.visitors and q.site is not None and q.view != SITE_VIEW
        guess: list[str] = []
        rankings: dict[int, list[list[tuple[str, int]]]] = {}
        for attempt in range(4):
            reads = [HashRead(q.view, k, d, (SKETCH,)) for k in guess for d in days]
            if site_totals:
                assert q.site is not None
                reads += [HashRead(SITE_VIEW, q.site, d, (SKETCH,)) for d in days]
            snap = await self._snapshot(reads, rank_reads, after)
            self._check_ready(snap, q.view, *((SITE_VIEW,) if site_totals else ()))
            gen = snap.gen
            if gen.gen not in rankings:
                holders = gen.day_map.get(q.view, {})
                batch_days = [d for d in days if d in holders]
                rankings[gen.gen] = list(
                    await asyncio.gather(*(self.batch.ranking(q.view, holders[d], d) for d in batch_days))
                )
            totals = self._scoped_totals(q, per_site(gen, q.view), rankings[gen.gen], snap.ranks)
            best = [
                kv
                for kv in heapq.nsmallest(q.limit, totals.items(), key=lambda kv: (-kv[1], kv[0]))
                if kv[1] > 0
            ]
            if not q.visitors or {k for k, _ in best} <= set(guess) or attempt == 3:
                break
            guess = [k for k, _ in best]
        start = floor_day(q.start)
        end = floor_day(q.end) + (DAY if q.end != floor_day(q.end) else timedelta(0))
        total_pv = sum(totals.values())
        if not q.visitors:
            return TopAnswer(q, start, end, best, snap.coverage, None, total_pv)
        rt_by_key: dict[str, dict[str, dict[str, bytes]]] = {}
        for read, values in zip(reads, snap.hashes, strict=True):
            rt_by_key.setdefault(f"{read.view}\0{read.key}", {})[read.day] = values
        keys = [k for k, _ in best if f"{q.view}\0{k}" in rt_by_key]
        docs = await asyncio.gather(*(self._documents(q.view, k, days, gen) for k in keys))
        by_key = {
            k: _distinct(whole_days, d, rt_by_key[f"{q.view}\0{k}"]) for k, d in zip(keys, docs, strict=True)
        }
        total_visitors = None
        if site_totals:
            assert q.site is not None
            site_docs = await self._documents(SITE_VIEW, q.site, days, gen)
            total_visitors = _distinct(whole_days, site_docs, rt_by_key[f"{SITE_VIEW}\0{q.site}"])
        return TopAnswer(
            q, start, end, best, snap.coverage, [by_key.get(k) for k, _ in best], total_pv, total_visitors
        )

    def _scoped_totals(
        self,
        q: TopQuery,
        scoped_by_site: bool,
        rankings: list[list[tuple[str, int]]],
        realtime: list[list[tuple[str, float]]],
    ) -> dict[str, int]:
        """Page views per key over the days (batch + realtime), only the keys of ``q.site``.

        A stored key that does not parse as the view's key format is left out and reported
        (``on_bad_key``): one bad record must not take an endpoint down.
        """
        totals: dict[str, int] = {}
        for ranking in rankings:
            for key, pv in ranking:
                totals[key] = totals.get(key, 0) + pv
        for entries in realtime:
            for key, score in entries:
                totals[key] = totals.get(key, 0) + int(score)
        if q.site is None:
            return totals
        scoped = {}
        for key, pv in totals.items():
            scope = scope_of(key, scoped_by_site)
            if scope is None:
                self.on_bad_key(q.view, key)
            elif scope == q.site:
                scoped[key] = pv
        return scoped

    async def views(self) -> tuple[GenerationInfo, dict[str, dict[str, Any]], dict[str, str | None]]:
        """The served generation, the views it, the speed layer or this process know with their
        descriptions, and per view why it is not ready (None: ready)."""
        snap = await self._snapshot((), (), None)
        described = {v.name: describe(v) for v in all_views()}
        described.update(snap.gen.views)
        for mark in snap.views or ():
            described.setdefault(mark.split("@", 1)[0], {"description": "", "per_site": False})
        self._described.update(described)
        return snap.gen, described, {v: readiness(v, snap.gen, snap.views) for v in described}

    async def description(self, view: str) -> dict[str, Any] | None:
        """How ``view`` is served (``per_site`` ...), or None if no generation or declaration names it."""
        if view not in self._described:
            await self.views()
        return self._described.get(view)


def _pageviews_by_day(
    docs: dict[str, BatchDoc], rt: dict[str, dict[str, bytes]]
) -> tuple[dict[str, int], dict[str, list[int]]]:
    """Per day, batch + realtime: the day's total and its 24 hours (each tile is then one lookup)."""
    day_total: dict[str, int] = {}
    day_hours: dict[str, list[int]] = {}
    for day, values in rt.items():
        doc = docs.get(day)
        total = doc.pv if doc else 0
        hours = list(doc.h_pv) if doc else [0] * 24
        for name, raw in values.items():
            if name == PV:
                total += int(raw)
            elif name.startswith(PV):
                hours[int(name[len(PV) + 1 :])] += int(raw)
        day_total[day], day_hours[day] = total, hours
    return day_total, day_hours


def _pageviews(tiles: Sequence[Tile], day_total: dict[str, int], day_hours: dict[str, list[int]]) -> int:
    return sum(day_total[t.day] if t.hour is None else day_hours[t.day][t.hour] for t in tiles)


@lru_cache(maxsize=4096)
def _read_plan(
    start: datetime, end: datetime, granularity: Granularity, kinds: tuple[str, ...]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Per day, the realtime fields a series query reads: the series' tiles, plus for unique
    visitors the coarsest tiling of the whole range (its union). Cached like the tiling."""
    series_tiles = [t for b in buckets(start, end, granularity) for t in b.tiles]
    fields: dict[str, set[str]] = {}
    for kind in kinds:
        tiles = [*series_tiles, *tile(start, end)] if kind == SKETCH else series_tiles
        hourly = SK_HOURS if kind == SKETCH else PV_HOURS
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
            if doc is not None and doc.h_pv[t.hour]:
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
