"""Which path answers a query, and the answer of today's views.

A query with no filter, or one ``is`` filter of one value, whose dimensions are none, one time
dimension, or (without a filter) one dimension the views rank by site, is what today's engine
answers: a series of the site or of the filtered key (serving_layer.engine.QueryEngine.series), or a
breakdown (QueryEngine.top, ranked by page views). That path also answers the visit metrics; its
visitors are the views' sketch unions (``exact`` says when they are estimates). Everything else is
a scan of the filter table, which answers page views and visitors, both exactly.

Both paths give the same rows for the same query: groups with page views only (empty buckets of a
series are left out, as the scan has no row for them), in the query's order, cut to its page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from serving_layer.answers import Distinct, SeriesAnswer, TopAnswer, Visits
from serving_layer.engine import QueryEngine
from serving_layer.filters.model import (
    PAGEVIEWS,
    TIME_DAY,
    TIME_DIMENSIONS,
    TIME_HOUR,
    VISIT_METRICS,
    VISITORS,
    Condition,
    FilterQuery,
    QueryAnswer,
    Row,
)
from serving_layer.queries import SITE_VIEW, URL_VIEW, SeriesQuery, TopQuery
from serving_layer.tiling import Granularity
from views.scopes import scope_of, stored_key


@dataclass(frozen=True)
class ViewsPlan:
    """A query as the engine answers it: a series of ``view``'s ``key`` or a ranking of ``view``."""

    kind: str
    """``series`` or ``breakdown``."""
    view: str
    key: str = ""
    per_site: bool = False
    granularity: Granularity = Granularity.DAY


async def views_plan(engine: QueryEngine, q: FilterQuery, max_top: int) -> ViewsPlan | None:
    """How today's views answer ``q``; None when they do not (the filter table does). A query that
    names an entry or exit page is about visits only (its page views are those of the visits), which
    the views of visits do not rank or count page views for: the table answers it."""
    if q.per_visit:
        return None
    cond = q.filter
    if cond is not None and not (isinstance(cond, Condition) and cond.op == "is" and len(cond.values) == 1):
        return None
    time_dims = [d for d in q.dimensions if d in TIME_DIMENSIONS]
    other = [d for d in q.dimensions if d not in TIME_DIMENSIONS]
    if other:
        if cond is not None or time_dims or len(other) > 1 or q.order_by[0] != (PAGEVIEWS, "desc"):
            return None
        if q.limit + q.offset > max_top:
            return None
        per_site = await _per_site(engine, other[0])
        if per_site is None:
            return None
        return ViewsPlan("breakdown", other[0], per_site=per_site)
    granularity = Granularity.HOUR if TIME_HOUR in time_dims else Granularity.DAY
    if cond is None:
        return ViewsPlan("series", SITE_VIEW, q.site, granularity=granularity)
    per_site = await _per_site(engine, cond.dimension)
    if per_site is None:
        return None
    value = cond.values[0]
    if not per_site and scope_of(value, False) != q.site:
        return None  # a page of another site: the scan, cut to the site, finds nothing
    return ViewsPlan("series", cond.dimension, stored_key(q.site, value, per_site), per_site, granularity)


async def _per_site(engine: QueryEngine, view: str) -> bool | None:
    """Whether ``view``'s keys are ``site|value``; None for a view the engine cannot cut to one
    site (its keys belong to no site), or does not know."""
    info = await engine.description(view)
    if info is None:
        return None
    if info.get("per_site"):
        return True
    return False if view == URL_VIEW or info.get("url_keys") else None


CostCheck = Callable[[SeriesQuery | TopQuery], None]
"""Raises when the engine's query would read more than the API allows (api.cost)."""


async def answer_from_views(
    engine: QueryEngine, q: FilterQuery, plan: ViewsPlan, check: CostCheck = lambda query: None
) -> QueryAnswer:
    start, end = q.start, q.end
    visits = any(m in VISIT_METRICS for m in q.metrics)
    if plan.kind == "series":
        series_query = SeriesQuery(plan.view, plan.key, start, end, plan.granularity, visits)
        check(series_query)
        series = await engine.series(series_query)
        rows, exact = _series_rows(q, series)
        return _page(q, rows, exact, series.coverage, series.visits_exactness.reason)
    asked = q.offset + q.limit
    top_query = TopQuery(plan.view, start, end, asked, q.site, visitors=VISITORS in q.metrics, visits=visits)
    check(top_query)
    top = await engine.top(top_query)
    rows, exact = _top_rows(q, top, plan.per_site)
    return _page(q, rows, exact, top.coverage, top.visits_exactness.reason)


def _figures(
    q: FilterQuery, pageviews: int, visitors: Distinct | None, visits: Visits | None
) -> tuple[int | float | None, ...]:
    out: list[int | float | None] = []
    for m in q.metrics:
        if m == PAGEVIEWS:
            out.append(pageviews)
        elif m == VISITORS:
            out.append(None if visitors is None else round(visitors.estimate))
        elif visits is None:
            out.append(None)
        elif m == "visits":
            out.append(visits.visits)
        else:
            out.append(getattr(visits, m))
    return tuple(out)


def _exact(q: FilterQuery, distincts: Sequence[Distinct | None], visits_exact: bool) -> dict[str, bool]:
    exact = {}
    for m in q.metrics:
        if m == VISITORS:
            exact[m] = all(d is not None and d.exact for d in distincts)
        else:
            exact[m] = visits_exact if m in VISIT_METRICS else True
    return exact


def _label(start: datetime, granularity: Granularity) -> str:
    return (
        start.strftime("%Y-%m-%d") if granularity == Granularity.DAY else start.strftime("%Y-%m-%d %H:00:00")
    )


def _series_rows(q: FilterQuery, a: SeriesAnswer) -> tuple[list[Row], dict[str, bool]]:
    if not q.dimensions:
        rows = [Row(_figures(q, a.pageviews, a.visitors, a.visits), (), a.pageviews)]
        return rows, _exact(q, [a.visitors], a.visits_exactness.exact)
    gran = Granularity.DAY if q.dimensions[0] == TIME_DAY else Granularity.HOUR
    rows = [
        Row(_figures(q, p.pageviews, p.visitors, p.visits), (_label(p.start, gran),), p.pageviews)
        for p in a.series
        if p.pageviews > 0
    ]
    return rows, _exact(q, [p.visitors for p in a.series if p.pageviews > 0], a.visits_exactness.exact)


def _top_rows(q: FilterQuery, a: TopAnswer, per_site: bool) -> tuple[list[Row], dict[str, bool]]:
    rows, distincts = [], []
    for i, (key, pageviews) in enumerate(a.entries):
        visitors = a.visitors[i] if a.visitors is not None else None
        visits = a.visits[i] if a.visits is not None else None
        value = key.partition("|")[2] if per_site else key
        rows.append(Row(_figures(q, pageviews, visitors, visits), (value,), pageviews))
        distincts.append(visitors)
    return rows, _exact(q, distincts, a.visits_exactness.exact)


def _page(
    q: FilterQuery, rows: list[Row], exact: dict[str, bool], coverage: object, reason: str | None
) -> QueryAnswer:
    from serving_layer.answers import Coverage

    assert isinstance(coverage, Coverage)
    ordered = order_rows(q, rows)
    notes = () if reason is None else (reason,)
    if VISITORS in exact and not exact[VISITORS]:
        notes = (*notes, "visitors are the views' sketch unions (HyperLogLog estimates)")
    return QueryAnswer(q, "views", ordered[q.offset : q.offset + q.limit], coverage, exact, len(rows), notes)


def order_rows(q: FilterQuery, rows: list[Row]) -> list[Row]:
    """``rows`` in the query's order (then by their dimensions, as the scan orders them)."""
    out = sorted(rows, key=lambda r: r.dimensions)
    for name, direction in reversed(q.order_by):
        out.sort(key=_sort_key(q, name), reverse=direction == "desc")
    return out


def _sort_key(q: FilterQuery, name: str) -> Callable[[Row], tuple[bool, Any]]:
    if name in q.dimensions:
        at = q.dimensions.index(name)
        return lambda r: (True, r.dimensions[at])
    if name == PAGEVIEWS and name not in q.metrics:
        return lambda r: (True, r.pageviews)
    at = q.metrics.index(name)
    return lambda r: (r.metrics[at] is not None, r.metrics[at] or 0)
