"""The visit metrics of /v1/timeseries and /v1/breakdown on the real stack.

A fresh site gets a handful of page views whose visits are worked out by hand (below): some below
a batch generation's cut, the rest after it, counted by the speed layer; one of those is a late
view that joins two visits the batch views already counted into one, so the answers are right
only if the realtime views retract what the batch views hold. A second site gets a view later
than the speed layer's visit horizon: its answers must say their visits are not exact, and why.
The generated traffic of the ``served`` platform checks what holds for any traffic (every visit
has one entry page, one exit page, one referrer source...), and the default metrics keep the
answers as they were.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.schemas import BreakdownResponse, DimensionsResponse, TimeseriesResponse
from batch_layer.job import BatchJob
from config.settings import Settings
from speed_layer.job import SpeedJob
from tests.integration.conftest import isolated_platform, produce
from tests.integration.serving_fixtures import Served

ALL = "visitors,visits,pageviews,views_per_visit,bounce_rate,visit_duration"
VISIT_METRICS = "visits,views_per_visit,bounce_rate,visit_duration"
MIN = timedelta(minutes=1)


@dataclass(frozen=True)
class Visited:
    settings: Settings
    site: str
    late_site: str
    t0: datetime
    """The hour of the first views (all on one UTC day, at most 2 hours long)."""

    @property
    def day(self) -> dict[str, str]:
        start = self.t0.replace(hour=0)
        return {"from": start.isoformat(), "to": (start + timedelta(days=1)).isoformat()}


def first_hour() -> datetime:
    """An hour 6 to 9 hours ago whose next two hours are on the same UTC day: within the speed
    layer's visit horizon (12 h), and no visit crosses a midnight."""
    t0 = (datetime.now(UTC) - timedelta(hours=6)).replace(minute=0, second=0, microsecond=0)
    return t0.replace(hour=min(t0.hour, 21))


def view(site: str, visitor: str, ts: datetime, path: str, country: str) -> dict[str, Any]:
    return {
        "event_id": f"visit-{uuid.uuid4().hex[:12]}",
        "ts": ts.isoformat(),
        "visitor_id": visitor,
        "url": f"https://{site}{path}",
        "country": country,
    }


@pytest.fixture(scope="module")
def visited(stack: Settings, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Visited]:
    """The views, by hand (t0 = first_hour()):

    below the cut (batch views)     a: /, +10 min /pricing, +20 min /signup      one visit, 3 views, 1200 s
                                    b: /blog                                     one visit, a bounce
                                    c: /, +60 min /pricing                       two visits (the gap
                                                                                 is 30 min), two bounces
    after the cut (realtime views)  c: +30 min /docs   joins c's two visits: one visit of 3 views,
                                                       3600 s, from / to /pricing, in hour t0
                                    d: +90 min /, +95 min /pricing               one visit, 2 views,
                                                                                 300 s, in hour t0+1
    and in each layer a view sent twice (same event_id): counted once.

    So: 4 visits (3 in hour t0, 1 in t0+1), 1 bounce, 5100 s, 9 views; a and b from DE, c and d
    from US; entry pages / (a, c, d) and /blog (b); exit pages /signup, /blog, /pricing (c, d).

    A dedup window of one second starts the speed layer at the generation's cut: its visit state
    is seeded from the master dataset (c's two visits) with the watermark of the views below the
    cut, so a view 14 hours old is past the visit horizon (12 h) in its first micro-batch.
    """
    unique = uuid.uuid4().hex[:8]
    site, late_site = f"visits-{unique}.example.com", f"late-{unique}.example.com"
    t0 = first_hour()
    root = tmp_path_factory.mktemp("visits")
    with isolated_platform(stack, root, redis_db=10, speed_dedup_window_s=1) as settings:
        twice = view(site, "a", t0 + 10 * MIN, "/pricing", "DE")
        produce(
            settings,
            [
                view(site, "a", t0, "/", "DE"),
                twice,
                twice,
                view(site, "a", t0 + 20 * MIN, "/signup", "DE"),
                view(site, "b", t0, "/blog", "DE"),
                view(site, "c", t0, "/", "US"),
                view(site, "c", t0 + 60 * MIN, "/pricing", "US"),
                view(late_site, "x", t0, "/", "FR"),
            ],
        )
        time.sleep(2)  # past the dedup window: the generation's cut is where the stream starts
        job = BatchJob(settings, spark)
        try:
            job.run()
        finally:
            job.close()
        twice = view(site, "d", t0 + 95 * MIN, "/pricing", "US")
        produce(
            settings,
            [
                view(site, "c", t0 + 30 * MIN, "/docs", "US"),
                view(site, "d", t0 + 90 * MIN, "/", "US"),
                twice,
                twice,
                view(late_site, "y", datetime.now(UTC) - timedelta(hours=14), "/", "FR"),
            ],
        )
        SpeedJob(settings, spark).run(available_now=True)
        yield Visited(settings, site, late_site, t0)


def get(api: TestClient, path: str, **params: Any) -> dict[str, Any]:
    response = api.get(path, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def figures(entry: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(entry[m] for m in ("visits", "views_per_visit", "bounce_rate", "visit_duration"))


def test_visits_equal_the_hand_count_after_a_late_view_joined_two_counted_visits(visited: Visited) -> None:
    site, t0 = visited.site, visited.t0
    window = {"from": t0.isoformat(), "to": (t0 + timedelta(hours=2)).isoformat()}
    with TestClient(create_app(visited.settings)) as api:
        body = get(api, "/v1/timeseries", dimension="site", site=site, metrics=ALL, **window)
        answer = TimeseriesResponse.model_validate(body)
        assert answer.metrics == ALL.split(",") and not answer.partial
        total = body["total"]
        assert figures(total) == (4, 2.25, 25.0, 1275.0)
        assert total["pageviews"] == 9 and round(total["visitors"]["estimate"]) == 4
        # Hour t0: a (3 views, 1200 s), b (a bounce), c (3 views, 3600 s); hour t0+1: d.
        assert [figures(p) for p in body["series"]] == [(3, 2.333, 33.33, 1600.0), (1, 2.0, 0.0, 300.0)]
        assert [p["pageviews"] for p in body["series"]] == [6, 3]
        exact: dict[str, Any] = {"exact": True, "reason": None, "days": []}
        assert {m: body["exactness"][m] for m in VISIT_METRICS.split(",")} == dict.fromkeys(
            VISIT_METRICS.split(","), exact
        )
        assert body["exactness"]["pageviews"] == exact

        # Only what is asked for, in the order asked.
        body = get(api, "/v1/timeseries", dimension="site", site=site, metrics="bounce_rate,visits", **window)
        assert body["metrics"] == ["bounce_rate", "visits"] and list(body["exactness"]) == [
            "bounce_rate",
            "visits",
        ]
        assert (body["total"]["visits"], body["total"]["bounce_rate"]) == (4, 25.0)
        assert body["total"]["pageviews"] is None and body["total"]["visitors"] is None
        assert body["total"]["visit_duration"] is None

        # A day's breakdowns: per country, entry and exit page (ranked by visits).
        countries = get(api, "/v1/breakdown", dimension="country", site=site, metrics=ALL, **visited.day)
        BreakdownResponse.model_validate(countries)
        assert [(e["value"], e["pageviews"], *figures(e)) for e in countries["entries"]] == [
            ("US", 5, 2, 2.5, 0.0, 1950.0),
            ("DE", 4, 2, 2.0, 50.0, 600.0),
        ]
        assert (
            figures(countries["totals"]) == (4, 2.25, 25.0, 1275.0) and countries["totals"]["pageviews"] == 9
        )
        entries = get(
            api, "/v1/breakdown", dimension="entry_page", site=site, metrics=VISIT_METRICS, **visited.day
        )
        BreakdownResponse.model_validate(entries)
        assert [(e["value"], *figures(e)) for e in entries["entries"]] == [
            (f"https://{site}/", 3, 2.667, 0.0, 1700.0),
            (f"https://{site}/blog", 1, 1.0, 100.0, 0.0),
        ]
        assert all(e["pageviews"] is None and e["visitors"] is None for e in entries["entries"])
        assert figures(entries["totals"]) == (4, 2.25, 25.0, 1275.0)
        exits = get(api, "/v1/breakdown", dimension="exit_page", site=site, **visited.day)
        assert exits["metrics"] == ["visits"]  # the default of a dimension that counts visits only
        assert [(e["value"], e["visits"]) for e in exits["entries"]] == [
            (f"https://{site}/pricing", 2),
            (f"https://{site}/blog", 1),
            (f"https://{site}/signup", 1),
        ]
        # One entry page over its day, hour by hour.
        body = get(
            api,
            "/v1/timeseries",
            dimension="entry_page",
            value=f"https://{site}/",
            metrics="visits,visit_duration",
            **window,
        )
        assert [(p["visits"], p["visit_duration"]) for p in body["series"]] == [(2, 2400.0), (1, 300.0)]
        # Its URL as a client may write it finds the same key (normalised as ingest normalises).
        loose = get(
            api,
            "/v1/timeseries",
            dimension="entry_page",
            value=f"HTTPS://{site.upper()}",
            metrics="visits,visit_duration",
            **window,
        )
        assert loose["series"] == body["series"]


def test_visits_past_the_horizon_are_flagged_with_the_reason_and_the_day(visited: Visited) -> None:
    late_day = (datetime.now(UTC) - timedelta(hours=14)).strftime("%Y-%m-%d")
    start = min(visited.t0, datetime.now(UTC) - timedelta(hours=14)).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    window = {"from": start.isoformat(), "to": (start + timedelta(days=2)).isoformat()}
    with TestClient(create_app(visited.settings)) as api:
        body = get(
            api,
            "/v1/timeseries",
            dimension="site",
            site=visited.late_site,
            granularity="day",
            metrics=ALL,
            **window,
        )
        for metric in VISIT_METRICS.split(","):
            flagged = body["exactness"][metric]
            assert flagged["exact"] is False and flagged["days"] == [late_day], flagged
            assert late_day in flagged["reason"] and "horizon" in flagged["reason"]
        assert body["exactness"]["pageviews"]["exact"] is True
        assert body["total"]["pageviews"] == 2
        # The other site's visits of the same days are exact.
        body = get(api, "/v1/breakdown", dimension="country", site=visited.site, metrics="visits", **window)
        assert body["exactness"]["visits"] == {"exact": True, "reason": None, "days": []}


@pytest.mark.parametrize(
    ("path", "params", "named"),
    [
        ("/v1/timeseries", {"dimension": "site", "metrics": "visits,sessions"}, ["'sessions'"]),
        (
            "/v1/breakdown",
            {"dimension": "country", "metrics": "pageviews,bounces,time"},
            ["'bounces', 'time'"],
        ),
        ("/v1/breakdown", {"dimension": "country", "metrics": ""}, ["at least one"]),
        ("/v1/breakdown", {"dimension": "referrer", "metrics": "visits,visits"}, ["'visits'"]),
        ("/v1/breakdown", {"dimension": "entry_page", "metrics": "visits,pageviews"}, ["'pageviews'"]),
        ("/v1/breakdown", {"dimension": "exit_page", "metrics": "visitors"}, ["'visitors'"]),
        (
            "/v1/timeseries",
            {"dimension": "entry_page", "value": "https://a.example.com/", "metrics": "pageviews,visitors"},
            ["'pageviews', 'visitors'"],
        ),
        (
            "/v1/breakdown",
            {"dimension": "page", "metrics": "pageviews,bounce_rate,visits"},
            ["'bounce_rate', 'visits'"],
        ),
        (
            "/v1/timeseries",
            {"dimension": "page", "value": "https://a.example.com/", "metrics": "visit_duration"},
            ["'visit_duration'"],
        ),
    ],
)
def test_bad_metrics_get_a_422_naming_metrics_and_the_names(
    served: Served, path: str, params: dict[str, str], named: list[str]
) -> None:
    with TestClient(create_app(served.settings)) as api:
        response = api.get(path, params={"site": "shop.example.com", **params})
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", "metrics"]
    for text in named:
        assert text in error["msg"], error["msg"]


def test_visits_of_generated_traffic_add_up_across_dimensions(served: Served) -> None:
    """Every visit has one entry page, one exit page, one referrer source, one country and one
    device, and every page view is in one visit: over whole days the dimensions' visits add up
    to the site's, and its views in visits to its page views."""
    last = max(e.ts for e in served.events).replace(hour=0, minute=0, second=0, microsecond=0)
    window = {"from": (last - timedelta(days=2)).isoformat(), "to": (last + timedelta(days=1)).isoformat()}
    site = "shop.example.com"
    with TestClient(create_app(served.settings)) as api:
        listed = DimensionsResponse.model_validate(get(api, "/v1/dimensions"))
        metrics = {d.name: d.metrics for d in listed.dimensions}
        assert metrics["page"] == ["visitors", "pageviews"]
        assert metrics["entry_page"] == metrics["exit_page"] == VISIT_METRICS.split(",")
        assert metrics["country"] == metrics["site"] == ALL.split(",")

        series = get(
            api, "/v1/timeseries", dimension="site", site=site, granularity="day", metrics=ALL, **window
        )
        total = series["total"]
        assert total["visits"] > 100 and sum(p["visits"] for p in series["series"]) == total["visits"]
        views = total["views_per_visit"] * total["visits"]
        assert abs(views - total["pageviews"]) <= 0.0005 * total["visits"] + 0.5
        dimensions = ("referrer", "country", "device", "channel", "utm_source", "utm_medium", "utm_campaign")
        for dimension in (*dimensions, "entry_page", "exit_page"):
            body = get(
                api,
                "/v1/breakdown",
                dimension=dimension,
                site=site,
                metrics="visits,bounce_rate",
                limit=1000,
                **window,
            )
            assert sum(e["visits"] for e in body["entries"]) == total["visits"], dimension
            assert body["totals"]["visits"] == total["visits"], dimension
            assert body["totals"]["bounce_rate"] == total["bounce_rate"], dimension
            if dimension in ("entry_page", "exit_page"):  # ranked by visits (the others by page views)
                ranked = [e["visits"] for e in body["entries"]]
                assert ranked == sorted(ranked, reverse=True), dimension


def test_the_default_metrics_answer_as_before(served: Served) -> None:
    with TestClient(create_app(served.settings)) as api:
        body = get(api, "/v1/breakdown", dimension="country", site="shop.example.com")
        assert body["metrics"] == ["visitors", "pageviews"]
        assert list(body["exactness"]) == ["visitors", "pageviews"]
        for entry in [*body["entries"], body["totals"]]:
            assert isinstance(entry["pageviews"], int) and entry["visitors"]["estimate"] > 0
            assert figures(entry) == (None, None, None, None)
        body = get(api, "/v1/timeseries", dimension="site", site="shop.example.com")
        assert body["metrics"] == ["visitors", "pageviews"]
        assert all(figures(p) == (None, None, None, None) for p in body["series"])
        assert body["exactness"]["pageviews"] == {"exact": True, "reason": None, "days": []}
