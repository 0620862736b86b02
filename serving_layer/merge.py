"""The merge arithmetic: batch documents plus realtime days, per tile, bucket and range.

Batch values hold the events below the generation's cut and realtime values those at or above it,
so page views add up and unique visitors are the union of the sketches, never a sum. Pure
functions over what one snapshot read; nothing here does I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from datetime import datetime

from config.memo import memo
from serving_layer.answers import Distinct, Visits
from serving_layer.model import BatchDoc, Cell, Measure, RealtimeDay
from serving_layer.tiling import Granularity, Tile, buckets, tile
from views import sketches
from views.scopes import scope_of


def pageviews_by_day(
    docs: dict[str, BatchDoc], rt: dict[str, RealtimeDay]
) -> tuple[dict[str, int], dict[str, list[int]]]:
    """Per day, batch + realtime: the day's total and its 24 hours (each tile is then one lookup)."""
    day_total: dict[str, int] = {}
    day_hours: dict[str, list[int]] = {}
    for day, values in rt.items():
        doc = docs.get(day)
        total = doc.pv if doc else 0
        hours = list(doc.h_pv) if doc else [0] * 24
        day_total[day] = total + values.pv
        day_hours[day] = [h + r for h, r in zip(hours, values.h_pv, strict=True)]
    return day_total, day_hours


def visits_by_day(
    docs: dict[str, BatchDoc], rt: dict[str, RealtimeDay]
) -> tuple[dict[str, Visits], dict[str, list[Visits]]]:
    """Per day, batch + realtime visits (realtime values may be negative: retractions): the day's
    total and its 24 hours."""
    day_total: dict[str, Visits] = {}
    day_hours: dict[str, list[Visits]] = {}
    for day, values in rt.items():
        doc = docs.get(day)
        total = Visits(*doc.visits) if doc is not None and doc.visits else Visits()
        hours = [Visits(*v) for v in doc.h_visits] if doc is not None and doc.h_visits else [Visits()] * 24
        total = total + Visits(*values.visits)
        hours = [h + Visits(*r) for h, r in zip(hours, values.h_visits, strict=True)]
        day_total[day], day_hours[day] = total, hours
    return day_total, day_hours


def visits(tiles: Sequence[Tile], day_total: dict[str, Visits], day_hours: dict[str, list[Visits]]) -> Visits:
    out = Visits()
    for t in tiles:
        out = out + (day_total[t.day] if t.hour is None else day_hours[t.day][t.hour])
    return out


def pageviews(tiles: Sequence[Tile], day_total: dict[str, int], day_hours: dict[str, list[int]]) -> int:
    return sum(day_total[t.day] if t.hour is None else day_hours[t.day][t.hour] for t in tiles)


@memo("api_read_plan_cache_bytes")
def read_plan(
    start: datetime, end: datetime, granularity: Granularity, measures: tuple[Measure, ...]
) -> tuple[tuple[str, tuple[Cell, ...]], ...]:
    """Per day, the realtime cells a series query reads: the series' tiles, plus for unique
    visitors the coarsest tiling of the whole range (its union). Cached like the tiling."""
    series_tiles = [t for b in buckets(start, end, granularity) for t in b.tiles]
    cells: dict[str, set[Cell]] = {}
    for measure in measures:
        tiles = [*series_tiles, *tile(start, end)] if measure is Measure.VISITORS else series_tiles
        for t in tiles:
            cells.setdefault(t.day, set()).add((measure, t.hour))
    return tuple((day, tuple(sorted(cells[day], key=_cell_order))) for day in sorted(cells))


def _cell_order(cell: Cell) -> tuple[str, int]:
    measure, hour = cell
    return measure.value, -1 if hour is None else hour


def hourly_uniques(cells: tuple[Cell, ...]) -> bool:
    """Whether ``cells`` read the visitors of some hour (the day's batch hour sketches are then
    needed too)."""
    return any(measure is Measure.VISITORS and hour is not None for measure, hour in cells)


def distinct(tiles: Sequence[Tile], docs: dict[str, BatchDoc], rt: dict[str, RealtimeDay]) -> Distinct:
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
            rt_sk = values.sk
        else:
            if doc is not None and doc.h_pv[t.hour]:
                batch_hours.setdefault(t.day, []).append(t.hour)
                exact.append(doc.h_uv[t.hour])
            rt_sk = values.h_sk[t.hour]
        if rt_sk is not None:
            found.append(rt_sk)
            realtime = True
    if not realtime and len(exact) <= 1:
        n = float(exact[0]) if exact else 0.0
        return Distinct(n, n, n, True)
    found += [docs[day].hours_union(tuple(hours)) for day, hours in batch_hours.items()]
    e = sketches.estimate(found)
    return Distinct(e.estimate, e.lower, e.upper, False)


def summed_rankings(
    rankings: list[list[tuple[str, int]]], realtime: list[list[tuple[str, int]]]
) -> dict[str, int]:
    """Page views per key over the days: the batch day rankings plus the realtime ranking sets."""
    totals: dict[str, int] = {}
    for ranking in rankings:
        for key, pv in ranking:
            totals[key] = totals.get(key, 0) + pv
    for entries in realtime:
        for key, score in entries:
            totals[key] = totals.get(key, 0) + score
    return totals


def scoped(
    totals: dict[str, int], site: str | None, scoped_by_site: bool, on_bad_key: Callable[[str], None]
) -> dict[str, int]:
    """Only the keys of ``site`` (all of them without one). A stored key that does not parse as the
    view's key format is left out and reported (``on_bad_key``): one bad record must not take an
    endpoint down."""
    if site is None:
        return totals
    kept = {}
    for key, pv in totals.items():
        scope = scope_of(key, scoped_by_site)
        if scope is None:
            on_bad_key(key)
        elif scope == site:
            kept[key] = pv
    return kept


def top_keys(totals: dict[str, int], limit: int) -> list[tuple[str, int]]:
    """The ``limit`` keys with the most page views (ties by key), none with zero."""
    return [kv for kv in heapq.nsmallest(limit, totals.items(), key=lambda kv: (-kv[1], kv[0])) if kv[1] > 0]
