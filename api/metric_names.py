"""The metrics a query of /v1/timeseries or /v1/breakdown may ask for, with the names and meanings
of Plausible's Stats API, and which of them a dimension can answer.

- ``visitors``: unique visitors (HLL estimates with 95% bounds, exact when marked);
- ``pageviews``: page views (exact);
- ``visits``: visits (views.sessions: a visitor's views on a site at most the session gap apart,
  never across a UTC midnight);
- ``views_per_visit``: page views in visits over visits;
- ``bounce_rate``: visits with one view, in percent of visits;
- ``visit_duration``: average visit duration in seconds (last view's time minus first view's).

A dimension that counts page views answers ``visitors`` and ``pageviews`` (and ``page`` answers
nothing else); one that counts visits answers the four visit metrics; ``entry_page`` and
``exit_page`` count visits only. A name that is not a metric, a metric named twice, or a metric the
dimension cannot answer is an InvalidQuery naming ``metrics`` and the names at fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from serving_layer import InvalidQuery

VISITORS = "visitors"
PAGEVIEWS = "pageviews"
VISITS = "visits"
VIEWS_PER_VISIT = "views_per_visit"
BOUNCE_RATE = "bounce_rate"
VISIT_DURATION = "visit_duration"

PAGE_VIEW_METRICS = (VISITORS, PAGEVIEWS)
"""Counted from page views: what every answer gave before visits, and the default."""
VISIT_METRICS = (VISITS, VIEWS_PER_VISIT, BOUNCE_RATE, VISIT_DURATION)
"""Counted from visits (views.sessions)."""
METRICS = (VISITORS, VISITS, PAGEVIEWS, VIEWS_PER_VISIT, BOUNCE_RATE, VISIT_DURATION)
"""Every metric, in the order a dashboard shows them."""

DEFAULT_VISIT_ONLY = (VISITS,)
"""The default of a dimension that counts visits only (entry_page, exit_page)."""


def _quoted(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names)


def counts_page_views(info: Mapping[str, Any]) -> bool:
    """Whether the dimension described by ``info`` (QueryEngine.description) counts page views."""
    return bool(info.get("pageviews", True))


def counts_visits(info: Mapping[str, Any]) -> bool:
    return bool(info.get("visits", False))


def metrics_of(raw: str | None, dimension: str, info: Mapping[str, Any]) -> tuple[str, ...]:
    """The metrics of a comma-separated ``raw`` list, checked against the dimension; the default
    (None): ``visitors,pageviews``, or ``visits`` for a dimension that counts visits only."""
    if raw is None:
        return PAGE_VIEW_METRICS if counts_page_views(info) else DEFAULT_VISIT_ONLY
    names = [n.strip() for n in raw.split(",")]
    if not any(names):
        raise InvalidQuery("metrics", f"name at least one metric of {', '.join(METRICS)}")
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise InvalidQuery(
            "metrics", f"no metric named {_quoted(unknown)} (the metrics are {', '.join(METRICS)})"
        )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InvalidQuery("metrics", f"{_quoted(twice)} named twice")
    if not counts_page_views(info):
        wrong = [n for n in names if n in PAGE_VIEW_METRICS]
        if wrong:
            raise InvalidQuery(
                "metrics",
                f"{_quoted(wrong)} not counted by the dimension {dimension!r}: it counts visits only "
                f"(ask for {', '.join(VISIT_METRICS)})",
            )
    if not counts_visits(info):
        wrong = [n for n in names if n in VISIT_METRICS]
        if wrong:
            raise InvalidQuery(
                "metrics",
                f"{_quoted(wrong)} not counted by the dimension {dimension!r}: it counts no visits "
                "(GET /v1/dimensions lists each dimension's metrics)",
            )
    return tuple(names)


def answered_by(info: Mapping[str, Any]) -> list[str]:
    """The metrics the dimension described by ``info`` answers, in the order of METRICS."""
    counted = (PAGE_VIEW_METRICS if counts_page_views(info) else ()) + (
        VISIT_METRICS if counts_visits(info) else ()
    )
    return [m for m in METRICS if m in counted]


def asks_visits(metrics: tuple[str, ...]) -> bool:
    return any(m in VISIT_METRICS for m in metrics)
