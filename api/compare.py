"""``compare=`` on /v1/timeseries and /v1/breakdown: the query and its comparison range, answered
side by side.

The comparison is the same query over the range :mod:`serving_layer.comparison` gives, asked of
the engine beside the query itself (two snapshots, each answer with its own coverage and
exactness). A breakdown ranks whole UTC days, so its comparison shifts the days it ranks, not the
range as asked: the two never overlap. Both queries count in the request's cost.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from api import scoping
from api.requests import TimeseriesRequest, TopRequest
from serving_layer import QueryEngine, SeriesAnswer, SeriesQuery, TopAnswer
from serving_layer.comparison import Compared, comparison_range
from serving_layer.tiling import ceil_day, floor_day


def series_comparison(r: TimeseriesRequest) -> SeriesQuery | None:
    """The query of the comparison range (None without ``compare``); InvalidQuery naming
    ``compare`` if that range cannot be asked for."""
    if r.compare is None:
        return None
    start, end = comparison_range(r.query.start, r.query.end, r.compare)
    return replace(r.query, start=start, end=end)


def top_comparison(r: TopRequest) -> TopRequest | None:
    """The request of the comparison range of a breakdown: the whole days it ranks, shifted."""
    if r.compare is None:
        return None
    q = r.query
    start, end = comparison_range(floor_day(q.start), ceil_day(q.end), r.compare)
    return replace(r, query=replace(q, start=start, end=end))


async def series(
    engine: QueryEngine, r: TimeseriesRequest
) -> tuple[SeriesAnswer, Compared[SeriesAnswer] | None]:
    """The answer of ``r`` and, with ``compare``, that of its comparison range."""
    other = series_comparison(r)
    if other is None or r.compare is None:
        return await engine.series(r.query, r.after), None
    answer, compared = await asyncio.gather(engine.series(r.query, r.after), engine.series(other, r.after))
    return answer, Compared(r.compare, compared)


async def ranked(engine: QueryEngine, r: TopRequest) -> tuple[TopAnswer, Compared[TopAnswer] | None]:
    """The ranking of ``r`` and, with ``compare``, that of its comparison range."""
    other = top_comparison(r)
    if other is None or r.compare is None:
        return await scoping.ranked(engine, r), None
    answer, compared = await asyncio.gather(scoping.ranked(engine, r), scoping.ranked(engine, other))
    return answer, Compared(r.compare, compared)
