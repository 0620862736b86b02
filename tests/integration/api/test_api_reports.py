"""Weeks and months, comparison ranges and CSV answers on the real services (the ``served``
platform: a Spark batch generation plus realtime views of the traffic after its cut).

- week and month buckets equal the recount of the log, visitors included (the union of the days'
  sketches: a week's visitors are not the sum of its days');
- ``compare=`` gives, beside the answer, exactly the answer the same query gives for the
  comparison range without it, and the totals' change in percent;
- every query endpoint's CSV has the JSON answer's rows, coverage and exactness.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api import cost
from api.app import create_app
from api.schemas import BreakdownResponse, TimeseriesResponse
from serving_layer import Granularity, SeriesQuery
from serving_layer.comparison import percent_change
from serving_layer.tiling import DAY, HOUR, buckets, ceil_day, floor_day
from tests.integration.serving_fixtures import Served
from tests.serving_support import assert_estimate, count

SITE = "shop.example.com"


@pytest.fixture(scope="module")
def api(served: Served) -> Iterator[TestClient]:
    with TestClient(create_app(served.settings)) as client:
        yield client


def span(served: Served) -> tuple[datetime, datetime]:
    """The whole hours the log's events lie in."""
    events = served.events
    first = min(e.ts for e in events).replace(minute=0, second=0, microsecond=0)
    return first, max(e.ts for e in events).replace(minute=0, second=0, microsecond=0) + HOUR


def window(start: datetime, end: datetime) -> dict[str, str]:
    return {"from": start.isoformat(), "to": end.isoformat()}


def get(api: TestClient, path: str, **params: Any) -> Any:
    response = api.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize("granularity", [Granularity.WEEK, Granularity.MONTH])
def test_week_and_month_buckets_equal_the_recount(
    served: Served, api: TestClient, granularity: Granularity
) -> None:
    first, last = span(served)
    # From the middle of a day weeks before the traffic to after it: both edge buckets are cut.
    start, end = floor_day(first) - 40 * DAY + 13 * HOUR, ceil_day(last) + 9 * DAY + 5 * HOUR
    body = get(api, "/v1/timeseries", site=SITE, granularity=granularity.value, **window(start, end))
    answer = TimeseriesResponse.model_validate(body)
    expected = buckets(start, end, granularity)
    assert [p.start for p in answer.series] == [b.start for b in expected]
    for point, b in zip(answer.series, expected, strict=True):
        pageviews, visitors = count(served.events, "site", SITE, b.start, b.end)
        assert point.pageviews == pageviews, (granularity, b.start)
        assert point.visitors is not None
        assert_estimate(point.visitors.model_dump(), len(visitors))
    assert answer.total.pageviews == count(served.events, "site", SITE, start, end)[0]

    # The visitors of a bucket are the union of its days', never their sum.
    days = get(api, "/v1/timeseries", site=SITE, granularity="day", **window(start, end))
    busiest = max(answer.series, key=lambda p: p.pageviews or 0)
    bucket = next(b for b in expected if b.start == busiest.start)
    in_bucket = [p for p in days["series"] if bucket.start <= datetime.fromisoformat(p["start"]) < bucket.end]
    assert sum(p["pageviews"] for p in in_bucket) == busiest.pageviews
    union = len(count(served.events, "site", SITE, bucket.start, bucket.end)[1])
    day_by_day = sum(
        len(count(served.events, "site", SITE, t, min(bucket.end, floor_day(t) + DAY))[1])
        for t in (datetime.fromisoformat(p["start"]) for p in in_bucket)
    )
    assert busiest.visitors is not None
    if union < day_by_day:  # visitors seen on two days of the bucket: a sum would count them twice
        assert busiest.visitors.estimate < sum(p["visitors"]["estimate"] for p in in_bucket)


def comparison_ranges(served: Served) -> tuple[datetime, datetime, datetime]:
    """A range over the last 16 hours of traffic and its previous period, both with traffic."""
    _, last = span(served)
    return last - 32 * HOUR, last - 16 * HOUR, last


def without_comparison(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("comparison", "change")}


def test_a_comparison_is_the_uncompared_answer_of_its_range(served: Served, api: TestClient) -> None:
    before, start, end = comparison_ranges(served)
    metrics = "visitors,visits,pageviews,views_per_visit,bounce_rate,visit_duration"
    params = {"site": SITE, "granularity": "hour", "metrics": metrics}
    body = get(api, "/v1/timeseries", compare="previous_period", **params, **window(start, end))
    TimeseriesResponse.model_validate(body)
    plain = get(api, "/v1/timeseries", **params, **window(start, end))
    earlier = get(api, "/v1/timeseries", **params, **window(before, start))
    assert without_comparison(body) == without_comparison(plain)
    assert plain["comparison"] is None and plain["change"] is None
    comparison = body["comparison"]
    assert comparison["compare"] == "previous_period"
    assert {k: comparison[k] for k in comparison if k != "compare"} == {
        k: earlier[k] for k in comparison if k != "compare"
    }
    assert comparison["total"]["pageviews"] == count(served.events, "site", SITE, before, start)[0] > 0
    for name, value in body["change"].items():
        now, then = body["total"][name], comparison["total"][name]
        if isinstance(now, dict):
            now, then = now["estimate"], then["estimate"]
        assert value == percent_change(now, then), name

    # A breakdown ranks whole days: its comparison is the same number of whole days before them.
    ranked = get(
        api,
        "/v1/breakdown",
        dimension="page",
        site=SITE,
        limit=5,
        compare="previous_period",
        **window(start, end),
    )
    BreakdownResponse.model_validate(ranked)
    days = ceil_day(end) - floor_day(start)
    shifted = get(
        api,
        "/v1/breakdown",
        dimension="page",
        site=SITE,
        limit=5,
        **window(floor_day(start) - days, floor_day(start)),
    )
    comparison = ranked["comparison"]
    assert (comparison["from"], comparison["to"]) == (shifted["from"], shifted["to"])
    assert {k: comparison[k] for k in comparison if k != "compare"} == {
        k: shifted[k] for k in comparison if k != "compare"
    }
    assert without_comparison(ranked) == without_comparison(
        get(api, "/v1/breakdown", dimension="page", site=SITE, limit=5, **window(start, end))
    )

    # A year earlier there is no traffic: zero page views, and no percentage of growth from nothing.
    yoy = get(
        api, "/v1/breakdown", dimension="country", site=SITE, compare="year_over_year", **window(start, end)
    )
    assert yoy["comparison"]["entries"] == [] and yoy["comparison"]["totals"]["pageviews"] == 0
    assert yoy["change"]["pageviews"] is None and yoy["totals"]["pageviews"] > 0


def test_a_comparison_counts_in_the_cost_and_a_bad_one_names_compare(served: Served, api: TestClient) -> None:
    before, start, end = comparison_ranges(served)
    alone = cost.series_cost(SeriesQuery("site", SITE, start, end, Granularity.HOUR))
    both = alone + cost.series_cost(SeriesQuery("site", SITE, before, start, Granularity.HOUR))
    settings = served.settings.model_copy(update={"api_max_cost": (alone + both) // 2})
    with TestClient(create_app(settings)) as limited:
        params = {"site": SITE, **window(start, end)}
        assert limited.get("/v1/timeseries", params=params).status_code == 200
        refused = limited.get("/v1/timeseries", params={**params, "compare": "previous_period"})
        assert refused.status_code == 422 and refused.json()["detail"][0]["ctx"]["cost"] == both
    bad = api.get("/v1/timeseries", params={"site": SITE, "compare": "last_week"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "compare"]
    early = api.get(
        "/v1/breakdown",
        params={
            "dimension": "site",
            "compare": "year_over_year",
            **window(
                datetime.fromisoformat("1970-01-02T00:00:00+00:00"),
                datetime.fromisoformat("1970-01-03T00:00:00+00:00"),
            ),
        },
    )
    assert early.status_code == 422 and early.json()["detail"][0]["loc"] == ["query", "compare"]


def csv_rows(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.text, newline="")))


def test_every_query_endpoint_answers_csv_with_the_json_rows(served: Served, api: TestClient) -> None:
    _, start, end = comparison_ranges(served)
    url = served.events[0].url
    asked = [
        ("/v1/pageviews", {"site": SITE, "granularity": "hour"}, "series", "pageviews"),
        ("/v1/unique-visitors", {"url": url, "granularity": "day"}, "series", "estimate"),
        ("/v1/top-urls", {"limit": 5}, "urls", "pageviews"),
        (
            "/v1/timeseries",
            {"site": SITE, "granularity": "week", "compare": "previous_period"},
            "series",
            "pageviews",
        ),
        ("/v1/breakdown", {"dimension": "referrer", "site": SITE, "limit": 5}, "entries", "pageviews"),
    ]
    for path, params, items, figure in asked:
        params = {**params, **window(start, end)}
        body = get(api, path, **params)
        by_accept = csv_rows(api.get(path, params=params, headers={"Accept": "text/csv"}))
        assert by_accept == csv_rows(api.get(path, params={**params, "format": "csv"}))
        current = [r for r in by_accept if r["period"] == "current"]
        points = current[: len(body[items])]
        assert [r[figure] for r in points] == [str(item[figure]) for item in body[items]], path
        assert {r["generation"] for r in by_accept} == {str(served.generation.gen)}
        assert {r["partial"] for r in current} == {"false"}
        if "total" in body or "totals" in body:
            totals = body.get("total", body.get("totals"))
            figure_total = (
                totals if not isinstance(totals, dict) else totals.get(figure, totals.get("estimate"))
            )
            assert current[-1]["row"] in ("total", "totals") and current[-1][figure] == str(figure_total)
        if body.get("comparison") is not None:
            compared = [r for r in by_accept if r["period"] == "comparison"]
            assert [r[figure] for r in compared[:-1]] == [str(p[figure]) for p in body["comparison"][items]]
        for metric, e in body.get("exactness", {}).items():
            assert {r[f"exact_{metric}"] for r in current} == {"true" if e["exact"] else "false"}
    assert api.get("/v1/pageviews", params={"site": SITE, "format": "xml"}).json()["detail"][0]["loc"] == [
        "query",
        "format",
    ]
    # format=json wins over an Accept that prefers CSV
    forced = api.get("/v1/pageviews", params={"site": SITE, "format": "json"}, headers={"Accept": "text/csv"})
    assert forced.headers["content-type"] == "application/json"
