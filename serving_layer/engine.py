"""The query engine: one generation's batch views merged with its realtime views, exactly.

Every query follows the same steps:

1. One atomic Redis read returns the served generation ``g``, the speed layer's commit and the
   realtime values of ``g`` the query needs (:mod:`serving_layer.snapshot`). That fixes the answer's
   generation once: everything below comes from ``g``.
2. Batch values come from ``g``'s batch documents: for each day, the collection that
   ``g.day_map[view][day]`` names. They are immutable, so reading them after the Redis read is
   safe (a retired generation's data is deleted only after a grace period).
3. Batch (events below ``g``'s cut) plus realtime (events at or above it) counts every committed
   event exactly once: pageviews are summed, unique visitors are sketch unions, never sums
   (:mod:`serving_layer.merge`).

If Redis cannot be read, the served generation comes from MongoDB's registry and the answer is
the batch views alone, flagged ``partial`` with ``missing=["realtime"]`` and the offsets it covers.
If MongoDB cannot be read, no answer is given (BatchUnavailable): a realtime-only number would be
silently wrong. A view is answered only where the generation answers it exactly
(:mod:`serving_layer.readiness`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence, Set
from typing import Any

from serving_layer import merge
from serving_layer.answers import (
    PageviewPoint,
    PageviewsAnswer,
    SeriesAnswer,
    SeriesPoint,
    ServingState,
    TopAnswer,
    UniqueVisitorsAnswer,
    Visits,
    VisitsExactness,
)
from serving_layer.model import (
    BatchDoc,
    DayRead,
    GenerationInfo,
    InvalidQuery,
    Measure,
    NothingServed,
    NotReady,
    RankRead,
    RealtimeDay,
    RealtimeUnavailable,
)
from serving_layer.queries import SITE_VIEW, ReadAfter, SeriesQuery, TopQuery
from serving_layer.readiness import per_site, readiness
from serving_layer.snapshot import Snapshot, Snapshots
from serving_layer.tiling import Tile, buckets, ceil_day, days_covering, floor_day, tile
from stores.batch_views import BatchReader, DocRef
from stores.realtime_views import RealtimeReader
from views import all_views, describe, filter_table
from views.scopes import scope_of

log = logging.getLogger(__name__)


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
        self._described: dict[str, dict[str, Any]] = {}
        """Views as the generations seen so far describe them (views.scopes.describe)."""
        self._snapshots = Snapshots(batch, realtime, self.on_degraded, self._learn, poll_s)

    def _learn(self, gen: GenerationInfo) -> None:
        if gen.views:
            self._described.update(gen.views)

    async def _snapshot(
        self, days: Sequence[DayRead], ranks: Sequence[RankRead], after: ReadAfter | None
    ) -> Snapshot:
        return await self._snapshots.take(days, ranks, after)

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

    def _check_ready(self, snap: Snapshot, *views: str) -> None:
        for view in views:
            problem = readiness(view, snap.gen, snap.views)
            if problem is not None:
                raise NotReady(view, problem)

    async def _series_data(
        self, q: SeriesQuery, measures: tuple[Measure, ...], after: ReadAfter | None
    ) -> tuple[Snapshot, dict[str, BatchDoc], dict[str, RealtimeDay]]:
        """The realtime days (their cells of ``measures``) and batch documents a series query needs."""
        plan = merge.read_plan(q.start, q.end, q.granularity, measures)
        days = [day for day, _ in plan]
        reads = [DayRead(q.view, q.key, day, cells) for day, cells in plan]
        snap = await self._snapshot(reads, (), after)
        self._check_ready(snap, q.view)
        hourly_uniques = {day for day, cells in plan if merge.hourly_uniques(cells)}
        docs = await self._documents(q.view, q.key, days, snap.gen, hourly_uniques)
        return snap, docs, dict(zip(days, snap.days, strict=True))

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
        """Page views and unique visitors of one key, with ``q.visits`` its visits too, from one
        snapshot."""
        if q.visits:
            await self._check_visits(q.view)
        measures = (Measure.PAGEVIEWS, Measure.VISITORS, *((Measure.VISITS,) if q.visits else ()))
        snap, docs, rt = await self._series_data(q, measures, after)
        day_total, day_hours = merge.pageviews_by_day(docs, rt)
        v_total, v_hours = merge.visits_by_day(docs, rt) if q.visits else ({}, {})
        series = []
        total = 0
        for b in buckets(q.start, q.end, q.granularity):
            n = merge.pageviews(b.tiles, day_total, day_hours)
            total += n
            v = merge.visits(b.tiles, v_total, v_hours) if q.visits else None
            series.append(SeriesPoint(b.start, n, merge.distinct(b.tiles, docs, rt), v))
        whole = tile(q.start, q.end)
        if not q.visits:
            return SeriesAnswer(q, series, total, merge.distinct(whole, docs, rt), snap.coverage)
        sites = self._sites_of(snap.gen, q.view, [q.key])
        return SeriesAnswer(
            q,
            series,
            total,
            merge.distinct(whole, docs, rt),
            snap.coverage,
            merge.visits(whole, v_total, v_hours),
            visits_exactness(snap.visit_flags, sites, days_covering(q.start, q.end)),
        )

    async def _check_visits(self, view: str) -> None:
        """Raises InvalidQuery unless ``view`` counts visits (views.sessions)."""
        described = await self.description(view)
        if described is not None and not described.get("visits", False):
            raise InvalidQuery(
                "metrics",
                f"dimension {view!r} counts no visits (visits are counted by the site, referrer, "
                "country, device, entry_page and exit_page dimensions)",
            )

    def _sites_of(self, gen: GenerationInfo, view: str, keys: Sequence[str]) -> set[str]:
        """The sites the stored ``keys`` of ``view`` belong to."""
        if view == SITE_VIEW:
            return set(keys)
        scoped = per_site(gen, view)
        return {site for key in keys if (site := scope_of(key, scoped)) is not None}

    async def pageviews(self, q: SeriesQuery, after: ReadAfter | None = None) -> PageviewsAnswer:
        snap, docs, rt = await self._series_data(q, (Measure.PAGEVIEWS,), after)
        day_total, day_hours = merge.pageviews_by_day(docs, rt)
        series = [
            PageviewPoint(b.start, merge.pageviews(b.tiles, day_total, day_hours))
            for b in buckets(q.start, q.end, q.granularity)
        ]
        return PageviewsAnswer(q, series, sum(p.pageviews for p in series), snap.coverage)

    async def unique_visitors(self, q: SeriesQuery, after: ReadAfter | None = None) -> UniqueVisitorsAnswer:
        series_buckets = buckets(q.start, q.end, q.granularity)
        whole = tile(q.start, q.end)
        snap, docs, rt = await self._series_data(q, (Measure.VISITORS,), after)
        series = [(b.start, merge.distinct(b.tiles, docs, rt)) for b in series_buckets]
        return UniqueVisitorsAnswer(q, series, merge.distinct(whole, docs, rt), snap.coverage)

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
        if q.visits:
            await self._check_visits(q.view)
        site_totals = (q.visitors or q.visits) and q.site is not None and q.view != SITE_VIEW
        needs: tuple[tuple[Measure, None], ...] = (
            *(((Measure.VISITORS, None),) if q.visitors else ()),
            *(((Measure.VISITS, None),) if q.visits else ()),
        )
        guess: list[str] = []
        rankings: dict[int, list[list[tuple[str, int]]]] = {}
        for attempt in range(4):
            reads = [DayRead(q.view, k, d, needs) for k in guess for d in days]
            if site_totals:
                assert q.site is not None
                reads += [DayRead(SITE_VIEW, q.site, d, needs) for d in days]
            snap = await self._snapshot(reads, rank_reads, after)
            self._check_ready(snap, q.view, *((SITE_VIEW,) if site_totals else ()))
            gen = snap.gen
            if gen.gen not in rankings:
                holders = gen.day_map.get(q.view, {})
                batch_days = [d for d in days if d in holders]
                rankings[gen.gen] = list(
                    await asyncio.gather(*(self.batch.ranking(q.view, holders[d], d) for d in batch_days))
                )
            totals = merge.scoped(
                merge.summed_rankings(rankings[gen.gen], snap.ranks),
                q.site,
                per_site(gen, q.view),
                lambda key: self.on_bad_key(q.view, key),
            )
            best = merge.top_keys(totals, q.limit)
            if not needs or {k for k, _ in best} <= set(guess) or attempt == 3:
                break
            guess = [k for k, _ in best]
        start, end = floor_day(q.start), ceil_day(q.end)
        total_pv = sum(totals.values())
        if not needs:
            return TopAnswer(q, start, end, best, snap.coverage, None, total_pv)
        rt_by_key: dict[str, dict[str, RealtimeDay]] = {}
        for read, values in zip(reads, snap.days, strict=True):
            rt_by_key.setdefault(f"{read.view}\0{read.key}", {})[read.day] = values
        keys = [k for k, _ in best if f"{q.view}\0{k}" in rt_by_key]
        docs = await asyncio.gather(*(self._documents(q.view, k, days, gen) for k in keys))
        by_key = {
            k: merge.distinct(whole_days, d, rt_by_key[f"{q.view}\0{k}"])
            for k, d in zip(keys, docs, strict=True)
        }
        visits_by_key = {
            k: merge.visits(whole_days, *merge.visits_by_day(d, rt_by_key[f"{q.view}\0{k}"]))
            for k, d in zip(keys, docs, strict=True)
        }
        total_visitors, total_visits = None, None
        if site_totals:
            assert q.site is not None
            site_docs = await self._documents(SITE_VIEW, q.site, days, gen)
            site_rt = rt_by_key[f"{SITE_VIEW}\0{q.site}"]
            if q.visitors:
                total_visitors = merge.distinct(whole_days, site_docs, site_rt)
            if q.visits:
                total_visits = merge.visits(whole_days, *merge.visits_by_day(site_docs, site_rt))
        visits: list[Visits] | None = None
        exactness = VisitsExactness()
        if q.visits:
            visits = [visits_by_key.get(k, Visits()) for k, _ in best]
            sites = {q.site} if q.site is not None else self._sites_of(gen, q.view, [k for k, _ in best])
            exactness = visits_exactness(snap.visit_flags, sites, days)
        return TopAnswer(
            q,
            start,
            end,
            best,
            snap.coverage,
            [by_key.get(k) for k, _ in best] if q.visitors else None,
            total_pv,
            total_visitors,
            visits,
            total_visits,
            exactness,
        )

    async def views(self) -> tuple[GenerationInfo, dict[str, dict[str, Any]], dict[str, str | None]]:
        """The served generation, the views it, the speed layer or this process know with their
        descriptions, and per view why it is not ready (None: ready)."""
        snap = await self._snapshot((), (), None)
        described = {v.name: describe(v) for v in all_views()}
        described.update(snap.gen.views)
        for mark in snap.views or ():
            name = mark.split("@", 1)[0]
            if name != filter_table.NAME:  # the filter table is counted like a view, not one
                described.setdefault(name, {"description": "", "per_site": False})
        self._described.update(described)
        return snap.gen, described, {v: readiness(v, snap.gen, snap.views) for v in described}

    async def description(self, view: str) -> dict[str, Any] | None:
        """How ``view`` is served (``per_site`` ...), or None if no generation or declaration names it."""
        if view not in self._described:
            await self.views()
        return self._described.get(view)


LATE_REASON = (
    "a page view of {days} arrived later than the speed layer's visit horizon (or a visitor's views "
    "came from two Kafka partitions): its realtime visits may be off until the next batch run "
    "recomputes the day"
)


def visits_exactness(
    flags: frozenset[tuple[str, str]], sites: Set[str], days: Sequence[str]
) -> VisitsExactness:
    """Not exact where the realtime part flagged a (site, day) of the answer
    (stores.realtime_views.RealtimeSnapshot.visit_flags)."""
    if not flags:
        return VisitsExactness()
    flagged = tuple(sorted({day for site in sites for day in days if (site, day) in flags}))
    if not flagged:
        return VisitsExactness()
    return VisitsExactness(False, LATE_REASON.format(days=", ".join(flagged)), flagged)
