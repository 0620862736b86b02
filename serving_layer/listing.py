"""A ranking of named sites: what a key limited to some sites sees of the site listing
(``/v1/breakdown?dimension=site``), from one snapshot like every answer.

The engine's ranking reads every site's ranking entries; a caller that may see only a few sites
gets them read by name instead: each site's day totals and sketches (batch documents plus realtime
days, the arithmetic of :mod:`serving_layer.merge`), ranked by page views, ties by name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

from serving_layer import merge
from serving_layer.answers import TopAnswer, Visits, VisitsExactness
from serving_layer.engine import QueryEngine, visits_exactness
from serving_layer.model import DayRead, Measure
from serving_layer.queries import SITE_VIEW, ReadAfter, TopQuery
from serving_layer.tiling import DAY, Tile, days_covering, floor_day


def cost(q: TopQuery, sites: Sequence[str]) -> int:
    """Stored values read: each site's realtime hash and batch document on each day."""
    return 2 * len(sites) * len(days_covering(q.start, q.end))


async def top_sites(
    engine: QueryEngine, q: TopQuery, sites: Sequence[str], after: ReadAfter | None = None
) -> TopAnswer:
    """The sites of ``sites`` ranked by page views over the UTC days of ``q``'s range, with
    their unique visitors (and visits, with ``q.visits``); ``total_pageviews`` is over these sites
    only."""
    days = days_covering(q.start, q.end)
    whole_days = [Tile(d, None) for d in days]
    measures = (Measure.PAGEVIEWS, Measure.VISITORS, *((Measure.VISITS,) if q.visits else ()))
    cells = tuple((measure, None) for measure in measures)
    reads = [DayRead(SITE_VIEW, site, day, cells) for site in sites for day in days]
    snap = await engine._snapshot(reads, (), after)
    engine._check_ready(snap, SITE_VIEW)
    docs = await asyncio.gather(*(engine._documents(SITE_VIEW, site, days, snap.gen) for site in sites))
    rows = []
    visits: dict[str, Visits] = {}
    for i, site in enumerate(sites):
        rt = dict(zip(days, snap.days[i * len(days) : (i + 1) * len(days)], strict=True))
        day_total, _ = merge.pageviews_by_day(docs[i], rt)
        pv = sum(day_total.values())
        if pv > 0:
            visits[site] = merge.visits(whole_days, *merge.visits_by_day(docs[i], rt))
            rows.append((site, pv, merge.distinct(whole_days, docs[i], rt)))
    rows.sort(key=lambda row: (-row[1], row[0]))
    best = rows[: q.limit]
    start = floor_day(q.start)
    end = floor_day(q.end) + (DAY if q.end != floor_day(q.end) else timedelta(0))
    return TopAnswer(
        q,
        start,
        end,
        [(site, pv) for site, pv, _ in best],
        snap.coverage,
        [d for _, _, d in best],
        sum(pv for _, pv, _ in rows),
        visits=[visits[site] for site, _, _ in best] if q.visits else None,
        visits_exactness=(
            visits_exactness(snap.visit_flags, set(sites), days) if q.visits else VisitsExactness()
        ),
    )
