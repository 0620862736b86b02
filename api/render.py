"""Answers of the serving layer as JSON bytes, written by hand in the shape of api.schemas.

The response models in api.schemas are the one definition of every answer's shape; this module
writes the same JSON as plain dicts encoded by orjson because that is several times cheaper than
building the answer as validated models and serialising them with pydantic's serializer, which a
large answer pays on every request (``python -m bench.render`` measures both; docs/design.md
quotes its result). That each renderer writes
exactly its model (same keys, values and key order) is checked for every endpoint in
tests/unit/api/test_render.py, so the two cannot drift.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from fastapi import Response

from api.events import Accepted
from api.metric_names import (
    BOUNCE_RATE,
    PAGEVIEWS,
    VIEWS_PER_VISIT,
    VISIT_DURATION,
    VISIT_METRICS,
    VISITORS,
    VISITS,
    answered_by,
)
from serving_layer import Coverage, Distinct, PageviewsAnswer, SeriesAnswer, TopAnswer, UniqueVisitorsAnswer
from serving_layer.answers import Visits, VisitsExactness
from serving_layer.comparison import Compared, percent_change
from serving_layer.current_visitors import CurrentAnswer
from serving_layer.queries import URL_VIEW
from views.scopes import value_of

LEGACY_VIEW_NAMES = {"page": "url_traffic", "site": "site_traffic"}
"""The names /v1/pageviews and /v1/unique-visitors have always answered with."""

JSON_OPTIONS = orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS


class JsonBytes(Response):
    """A response whose body is already JSON bytes (or a value orjson encodes)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return content if isinstance(content, bytes) else orjson.dumps(content, option=JSON_OPTIONS)


def _meta(c: Coverage, start: datetime) -> dict[str, Any]:
    return {
        "partial": c.partial,
        "missing": list(c.missing),
        "covers": {
            "generation": c.generation,
            "batch_offsets": c.batch_offsets,
            "batch_as_of": c.batch_as_of,
            "realtime_offsets": c.realtime_offsets,
            "lost_to_retention": c.lost_for(start),
        },
    }


def _distinct(d: Distinct) -> dict[str, Any]:
    return {
        "estimate": round(d.estimate, 2),
        "lower": round(d.lower, 2),
        "upper": round(d.upper, 2),
        "exact": d.exact,
    }


def _series_head(a: PageviewsAnswer | UniqueVisitorsAnswer) -> dict[str, Any]:
    q = a.query
    view = LEGACY_VIEW_NAMES.get(q.view, q.view)
    return {"view": view, "key": q.key, "from": q.start, "to": q.end, "granularity": q.granularity.value}


def pageviews(a: PageviewsAnswer) -> dict[str, Any]:
    return {
        **_series_head(a),
        "series": [{"start": p.start, "pageviews": p.pageviews} for p in a.series],
        "total": a.total,
        **_meta(a.coverage, a.query.start),
    }


def unique_visitors(a: UniqueVisitorsAnswer) -> dict[str, Any]:
    return {
        **_series_head(a),
        "series": [{"start": start, **_distinct(d)} for start, d in a.series],
        "total": _distinct(a.total),
        **_meta(a.coverage, a.query.start),
    }


def pageviews_bytes(a: PageviewsAnswer) -> bytes:
    return encoded(pageviews(a))


def unique_visitors_bytes(a: UniqueVisitorsAnswer) -> bytes:
    return encoded(unique_visitors(a))


def top(a: TopAnswer) -> dict[str, Any]:
    return {
        "from": a.start,
        "to": a.end,
        "limit": a.query.limit,
        "site": a.query.site,
        "urls": [{"rank": i, "url": k, "pageviews": v} for i, (k, v) in enumerate(a.entries, 1)],
        **_meta(a.coverage, a.query.start),
    }


class _Asked:
    """Which of the six figures an answer gives (api.schemas.Figures): worked out once per answer,
    not per bucket."""

    __slots__ = ("bounce_rate", "pageviews", "views_per_visit", "visit_duration", "visitors", "visits")

    def __init__(self, metrics: tuple[str, ...]) -> None:
        self.pageviews = PAGEVIEWS in metrics
        self.visitors = VISITORS in metrics
        self.visits = VISITS in metrics
        self.views_per_visit = VIEWS_PER_VISIT in metrics
        self.bounce_rate = BOUNCE_RATE in metrics
        self.visit_duration = VISIT_DURATION in metrics


def _figures(
    asked: _Asked, pageviews: int | None, visitors: Distinct | None, v: Visits | None
) -> dict[str, Any]:
    """The six figures of api.schemas.Figures: those asked for, null for the others."""
    if v is None:
        return {
            "pageviews": pageviews if asked.pageviews else None,
            "visitors": _distinct(visitors) if asked.visitors and visitors is not None else None,
            "visits": None,
            "views_per_visit": None,
            "bounce_rate": None,
            "visit_duration": None,
        }
    return {
        "pageviews": pageviews if asked.pageviews else None,
        "visitors": _distinct(visitors) if asked.visitors and visitors is not None else None,
        "visits": v.visits if asked.visits else None,
        "views_per_visit": v.views_per_visit if asked.views_per_visit else None,
        "bounce_rate": v.bounce_rate if asked.bounce_rate else None,
        "visit_duration": v.visit_duration if asked.visit_duration else None,
    }


HLL_REASON = "HLL estimates: a figure not marked exact has 95% bounds"
EXACT: dict[str, Any] = {"exact": True, "reason": None, "days": []}


def _exactness(
    metrics: tuple[str, ...], visitors: list[Distinct | None], visits: VisitsExactness
) -> dict[str, Any]:
    """Per metric: whether every figure of it in the answer is exact (api.schemas.Exactness)."""
    out: dict[str, Any] = {}
    for m in metrics:
        if m == VISITORS:
            exact = all(d is None or d.exact for d in visitors)
            out[m] = EXACT if exact else {"exact": False, "reason": HLL_REASON, "days": []}
        elif m in VISIT_METRICS:
            out[m] = {"exact": visits.exact, "reason": visits.reason, "days": list(visits.days)}
        else:
            out[m] = EXACT
    return out


def _series_figures(a: SeriesAnswer, metrics: tuple[str, ...]) -> dict[str, Any]:
    """A series answer's ``series``, ``total`` and ``exactness`` (also those of its comparison)."""
    asked = _Asked(metrics)
    return {
        "series": [
            {"start": p.start, **_figures(asked, p.pageviews, p.visitors, p.visits)} for p in a.series
        ],
        "total": _figures(asked, a.pageviews, a.visitors, a.visits),
        "exactness": _exactness(metrics, [a.visitors, *(p.visitors for p in a.series)], a.visits_exactness),
    }


def timeseries(
    a: SeriesAnswer,
    site: str | None,
    value: str,
    metrics: tuple[str, ...],
    compared: Compared[SeriesAnswer] | None = None,
) -> dict[str, Any]:
    q = a.query
    figures = _series_figures(a, metrics)
    comparison, change = None, None
    if compared is not None:
        c = compared.answer
        other = _series_figures(c, metrics)
        comparison = {
            "compare": compared.compare.value,
            "from": c.query.start,
            "to": c.query.end,
            **other,
            **_meta(c.coverage, c.query.start),
        }
        change = _change(figures["total"], other["total"])
    return {
        "dimension": q.view,
        "site": site,
        "value": value,
        "from": q.start,
        "to": q.end,
        "granularity": q.granularity.value,
        "metrics": list(metrics),
        **figures,
        "comparison": comparison,
        "change": change,
        **_meta(a.coverage, a.query.start),
    }


def _breakdown_figures(a: TopAnswer, per_site: bool, metrics: tuple[str, ...]) -> dict[str, Any]:
    """A breakdown's ``entries``, ``totals`` and ``exactness`` (also those of its comparison)."""
    n = len(a.entries)
    asked = _Asked(metrics)
    visitors = a.visitors or [None] * n
    visits: list[Visits] | list[None] = a.visits or [None] * n
    return {
        "entries": [
            {"rank": i, "value": value_of(k, per_site), **_figures(asked, count, d, v)}
            for i, ((k, count), d, v) in enumerate(zip(a.entries, visitors, visits, strict=True), 1)
        ],
        "totals": _figures(asked, a.total_pageviews, a.total_visitors, a.total_visits),
        "exactness": _exactness(metrics, [*visitors, a.total_visitors], a.visits_exactness),
    }


def breakdown(
    a: TopAnswer, per_site: bool, metrics: tuple[str, ...], compared: Compared[TopAnswer] | None = None
) -> dict[str, Any]:
    figures = _breakdown_figures(a, per_site, metrics)
    comparison, change = None, None
    if compared is not None:
        c = compared.answer
        other = _breakdown_figures(c, per_site, metrics)
        comparison = {
            "compare": compared.compare.value,
            "from": c.start,
            "to": c.end,
            **other,
            **_meta(c.coverage, c.query.start),
        }
        change = _change(figures["totals"], other["totals"])
    return {
        "dimension": a.query.view,
        "site": a.query.site,
        "from": a.start,
        "to": a.end,
        "limit": a.query.limit,
        "metrics": list(metrics),
        **figures,
        "comparison": comparison,
        "change": change,
        **_meta(a.coverage, a.query.start),
    }


def _figure(value: Any) -> float | None:
    """A figure as a number: a visitors figure by its estimate."""
    figure = value["estimate"] if isinstance(value, dict) else value
    return None if figure is None else float(figure)


def _change(total: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Per figure of two totals (api.schemas.Change): the change in percent of the comparison's."""
    return {name: percent_change(_figure(v), _figure(base[name])) for name, v in total.items()}


def dimensions(
    gen: int, described: dict[str, dict[str, Any]], problems: dict[str, str | None]
) -> dict[str, Any]:
    return {
        "generation": gen,
        "dimensions": [
            {
                "name": name,
                "description": str(info.get("description", "")),
                "per_site": bool(info.get("per_site")),
                "examples": [str(x) for x in info.get("examples", [])],
                "metrics": answered_by(info),
                "ready": problems.get(name) is None,
                "problem": problems.get(name),
            }
            for name, info in sorted(described.items())
        ],
    }


def accepted(a: Accepted) -> dict[str, Any]:
    return {
        "accepted": len(a.events),
        "events": [{"event_id": e, "partition": p, "offset": o} for e, p, o in a.events],
        "token": a.token,
    }


def current_visitors(a: CurrentAnswer) -> dict[str, Any]:
    q = a.query
    return {
        "site": q.site,
        "page": q.key if q.view == URL_VIEW else None,
        "minutes": q.minutes,
        "from": a.window.start,
        "to": a.window.end,
        "as_of": a.as_of,
        "visitors": None if a.visitors is None else _distinct(a.visitors),
        "covered": a.covered,
        "counted_before": a.counted_before,
        "reason": a.reason,
        "realtime_offsets": a.realtime_offsets,
        "committed_at": a.committed_at,
    }


def encoded(content: dict[str, Any]) -> bytes:
    """``content`` as the API's JSON bytes."""
    return orjson.dumps(content, option=JSON_OPTIONS)


def json_response(
    content: dict[str, Any], status_code: int = 200, headers: dict[str, str] | None = None
) -> JsonBytes:
    return JsonBytes(encoded(content), status_code=status_code, headers=headers)
