"""The check of combined filters on the real stack: ``POST /v2/query`` against the recount.

:func:`assert_filters_match` asks the API (in process, on the real stores) random filter trees
drawn by hypothesis over the values the events hold, with and without dimensions, and compares
every group's page views and visitors with tests.oracle_filters' evaluation of the same tree on
the deduplicated events: exactly, across the batch/realtime cut. It also holds the filter table to
the 1-D views where both answer: one ``is`` on a page through the views, the same condition
through the table (page views equal, the views' visitors within their sketch's error).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, seed
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from api.app import create_app
from config.settings import Settings
from contract import PageView
from tests import oracle_filters as oracle

DIMENSION_CHOICES: tuple[tuple[str, ...], ...] = (
    (),
    ("country",),
    ("time:hour",),
    ("page", "device"),
    ("referrer",),
    ("channel", "time:day"),
)


def _answered(found: dict[str, Any]) -> dict[tuple[Any, ...], tuple[int, int]]:
    """(dimension values...) -> (page views, visitors) of an answer."""
    metrics = found["query"]["metrics"]
    out = {}
    for r in found["results"]:
        values = dict(zip(metrics, r["metrics"], strict=True))
        out[tuple(r["dimensions"])] = (int(values["pageviews"]), int(values["visitors"]))
    assert len(out) == len(found["results"]), "a group answered twice"
    return out


def assert_filters_match(
    settings: Settings, events: Iterable[PageView], examples: int = 20, at: int = 0
) -> None:
    """``examples`` random filter trees per site of the two busiest, each with a random choice of
    dimensions, answered by the filter table exactly as the recount of ``events`` (first copies:
    tests.oracle.first_copies) says; ``at`` seeds the draw (print it on failure to replay it)."""
    events = list(events)
    rows = oracle.rows(events)
    days = (min(r.day for r in rows), max(r.day for r in rows))
    sites = [s for s, _ in Counter(r.site for r in rows).most_common(2)]
    with TestClient(create_app(settings)) as api:

        def ask(body: dict[str, Any]) -> dict[str, Any]:
            answer = api.post("/v2/query", json=body)
            assert answer.status_code == 200, (body, answer.text)
            found: dict[str, Any] = answer.json()
            return found

        visits = oracle.visit_rows(events)
        for site in sites:
            _assert_trees_match(ask, rows, site, days, examples, at)
            _assert_visit_trees_match(ask, rows, visits, site, days, examples, at)
            _assert_views_agree(ask, rows, site, days, settings.hll_lg_k)


def _assert_trees_match(
    ask: Any, rows: list[oracle.Row], site: str, days: tuple[str, str], examples: int, at: int
) -> None:
    """``examples`` random filter trees of ``site``'s values through the table, against the recount."""
    values = oracle.values_by_dimension(rows, site)
    trees = st.lists(oracle.filter_trees(values), min_size=1, max_size=2)

    @seed(at)
    @hypothesis_settings(
        max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(filters=trees, dimensions=st.sampled_from(DIMENSION_CHOICES))
    def check(filters: list[Any], dimensions: tuple[str, ...]) -> None:
        body = {
            "site_id": site,
            "date_range": list(days),
            "metrics": ["pageviews", "visitors"],
            "dimensions": list(dimensions),
            # a condition every row passes: the table's path even for a single `is`
            "filters": [*filters, ["is_not", "country", ["--"]]],
            "pagination": {"limit": 10_000},
        }
        found = ask(body)
        assert found["path"] == "filter_table", found["path"]
        assert found["exact"] == {"pageviews": True, "visitors": True}
        expected = oracle.answer(rows, site, days, filters, dimensions)
        if not dimensions and not expected:
            expected = {(): (0, 0)}  # totals are one row, zeros when nothing passes
        assert _answered(found) == expected, (at, body)

    check()


def _assert_views_agree(
    ask: Any, rows: list[oracle.Row], site: str, days: tuple[str, str], lg_k: int
) -> None:
    """The busiest page of ``site`` through today's views and through the table: the same page
    views per day, and the views' visitors (sketch unions) within 3 standard errors of the table's."""
    page = Counter(r.values["page"] for r in rows if r.site == site).most_common(1)[0][0]
    base = {
        "site_id": site,
        "date_range": list(days),
        "metrics": ["pageviews", "visitors"],
        "dimensions": ["time:day"],
        "pagination": {"limit": 10_000},
    }
    through_views = ask({**base, "filters": [["is", "page", [page]]]})
    through_table = ask({**base, "filters": [["is", "page", [page]], ["is_not", "country", ["--"]]]})
    assert (through_views["path"], through_table["path"]) == ("views", "filter_table")
    views = _answered(through_views)
    table = _answered(through_table)
    assert {d: pv for d, (pv, _) in views.items()} == {d: pv for d, (pv, _) in table.items()}
    error = 3 * 1.04 / math.sqrt(2**lg_k)
    for day, (_, exact) in table.items():
        estimate = views[day][1]
        assert abs(estimate - exact) <= max(1.0, error * exact), (page, day, estimate, exact)


VISIT_DIMENSION_CHOICES: tuple[tuple[str, ...], ...] = (
    (),
    ("country",),
    ("entry_page",),
    ("time:hour",),
    ("channel", "exit_page"),
    ("referrer", "time:day"),
)
ALL_METRICS = ["pageviews", "visitors", *oracle.VISIT_FIGURES]


def _assert_visit_trees_match(
    ask: Any,
    rows: list[oracle.Row],
    visits: list[oracle.VisitRow],
    site: str,
    days: tuple[str, str],
    examples: int,
    at: int,
) -> None:
    """``examples`` random filter trees over the visits' values (their first view's, their entry
    and exit pages) with every metric, against the reference sessioniser's visits."""
    values = oracle.values_by_dimension(visits, site)
    trees = st.lists(oracle.filter_trees(values), min_size=1, max_size=2)

    @seed(at)
    @hypothesis_settings(
        max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(filters=trees, dimensions=st.sampled_from(VISIT_DIMENSION_CHOICES))
    def check(filters: list[Any], dimensions: tuple[str, ...]) -> None:
        body = {
            "site_id": site,
            "date_range": list(days),
            "metrics": ALL_METRICS,
            "dimensions": list(dimensions),
            "filters": [*filters, ["is_not", "country", ["--"]]],
            "pagination": {"limit": 10_000},
        }
        found = ask(body)
        assert found["path"] == "filter_table", found["path"]
        assert found["exact"] == dict.fromkeys(ALL_METRICS, True), found
        expected = oracle.answer_visits(rows, visits, site, days, filters, dimensions)
        if not dimensions and not expected:
            expected = {(): {**dict.fromkeys(ALL_METRICS, None), "pageviews": 0, "visitors": 0, "visits": 0}}
        answered = {
            tuple(r["dimensions"]): dict(zip(ALL_METRICS, r["metrics"], strict=True))
            for r in found["results"]
        }
        assert answered == expected, (at, body)

    check()
