"""Views as data on the real services: every shipped dimension through the generic endpoints equals
the recount, and a dimension declared at test time is computed and served with no other change."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from api.app import create_app
from api.schemas import BreakdownResponse, DimensionsResponse, TimeseriesResponse
from batch_layer.job import BatchJob
from config.settings import Settings
from contract import PageView, site_of
from speed_layer.job import SpeedJob
from tests.integration.conftest import produce, traffic
from tests.integration.serving_fixtures import Served, read_log
from tests.oracle import DIMENSION_KEYS, dedup
from tests.serving_support import assert_estimate
from views import Dimension, declared

SITE = "shop.example.com"


def hour_floor(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def day_floor(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


def recount_of(
    events: list[PageView], key_of: Callable[[PageView], str], start: datetime, end: datetime
) -> dict[str, tuple[int, set[str]]]:
    out: dict[str, tuple[int, set[str]]] = {}
    for e in dedup(events):
        if start <= e.ts < end:
            pv, visitors = out.get(key_of(e), (0, set()))
            visitors.add(e.visitor_id)
            out[key_of(e)] = (pv + 1, visitors)
    return out


def check_dimension(
    api: TestClient,
    events: list[PageView],
    dimension: str,
    key_of: Callable[[PageView], str],
    per_site: bool,
    timeseries_values: int = 2,
) -> None:
    """/v1/breakdown and /v1/timeseries of one dimension against the recount of ``events``."""
    start = day_floor(min(e.ts for e in events))
    end = day_floor(max(e.ts for e in events)) + timedelta(days=1)
    window = {"from": start.isoformat(), "to": end.isoformat()}
    expected = {
        k: v
        for k, v in recount_of(events, key_of, start, end).items()
        if (k.startswith(f"{SITE}|") if per_site else site_of(k) == SITE)
    }
    body = api.get("/v1/breakdown", params={"dimension": dimension, "site": SITE, "limit": 50, **window})
    assert body.status_code == 200, body.text
    answer = BreakdownResponse.model_validate(body.json())
    prefix = f"{SITE}|" if per_site else ""
    ranked = sorted(expected.items(), key=lambda kv: (-kv[1][0], kv[0]))[:50]
    assert [(f"{prefix}{e.value}", e.pageviews) for e in answer.entries] == [(k, v[0]) for k, v in ranked]
    for entry in answer.entries:
        assert entry.visitors is not None and entry.visits is None
        assert_estimate(entry.visitors.model_dump(), len(expected[f"{prefix}{entry.value}"][1]))
    assert answer.totals.pageviews == sum(v[0] for v in expected.values())
    assert not answer.partial and answer.metrics == ["visitors", "pageviews"]
    assert answer.exactness["pageviews"].exact

    # The top values hour by hour over the last day with traffic, and per day over the range.
    last = hour_floor(max(e.ts for e in events)) + timedelta(hours=1)
    for entry in answer.entries[:timeseries_values]:
        key = f"{prefix}{entry.value}"
        for granularity, a, b in (("hour", last - timedelta(hours=24), last), ("day", start, end)):
            params = {"dimension": dimension, "site": SITE, "value": entry.value, "granularity": granularity}
            body = api.get("/v1/timeseries", params={**params, "from": a.isoformat(), "to": b.isoformat()})
            assert body.status_code == 200, body.text
            series = TimeseriesResponse.model_validate(body.json())
            step = timedelta(hours=1) if granularity == "hour" else timedelta(days=1)
            for point in series.series:
                got = recount_of(events, key_of, point.start, point.start + step).get(key, (0, set()))
                assert point.pageviews == got[0], (dimension, key, point.start)
                assert point.visitors is not None
                assert_estimate(point.visitors.model_dump(), len(got[1]))
            assert series.total.pageviews == recount_of(events, key_of, a, b).get(key, (0, set()))[0]


def test_every_shipped_dimension_through_the_generic_endpoints_equals_the_recount(served: Served) -> None:
    with TestClient(create_app(served.settings)) as api:
        listed = DimensionsResponse.model_validate(api.get("/v1/dimensions").json())
        assert {d.name: d.ready for d in listed.dimensions} == {
            "page": True,
            "site": True,
            "referrer": True,
            "country": True,
            "device": True,
            "entry_page": True,
            "exit_page": True,
            "utm_source": True,
            "utm_medium": True,
            "utm_campaign": True,
            "channel": True,
        }
        for name in (n for n in DIMENSION_KEYS if n != "site"):  # the site: by the tests of sites
            check_dimension(api, served.events, name, DIMENSION_KEYS[name], per_site=name != "page")
        sites = api.get("/v1/breakdown", params={"dimension": "site", "from": "2020-01-01T00:00:00Z"})
        assert sites.status_code == 422  # the range is over the maximum: the error names a parameter
        bad = api.get("/v1/breakdown", params={"dimension": "nope", "site": SITE})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "dimension"]
        missing = api.get("/v1/timeseries", params={"dimension": "country", "site": SITE})
        assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["query", "value"]


def path_prefix(e: PageView) -> str:
    """The oracle's twin of the test dimension: the first path segment of the URL, per site."""
    path = "/" + e.url.split("/", 3)[3] if e.url.count("/") >= 3 else "/"
    return f"{site_of(e.url)}|/{path.split('?')[0].split('/')[1]}"


def test_a_dimension_declared_at_test_time_is_computed_and_served_exactly(
    platform: Settings, spark: Any
) -> None:
    """One declaration, no other file: batch and speed layers compute it, the API serves it; on a
    running platform only from the first generation both layers counted it from its cut."""
    from pyspark.sql import functions as F

    prefix = Dimension(
        "path_prefix",
        lambda: F.regexp_extract(F.col("url"), r"^[a-z]+://[^/]+(/[^/?]*)", 1),
        "The first segment of the page's path.",
    )
    produce(platform, traffic(seed=31, total=3_000, span_hours=30))
    old_speed = SpeedJob(platform, spark)  # a speed layer started before the declaration
    old_speed.run(available_now=True)
    with declared(prefix):
        job = BatchJob(platform, spark)
        try:
            first = job.run()  # generation 1 has batch views of path_prefix ...
            assert "path_prefix" in first.view_days_recomputed
            produce(platform, traffic(seed=32, total=600, span_hours=2))
            SpeedJob(platform, spark).run(available_now=True)  # (a restarted speed layer)
            with TestClient(create_app(platform)) as api:
                listed = DimensionsResponse.model_validate(api.get("/v1/dimensions").json())
                ready = {d.name: d.ready for d in listed.dimensions}
                assert ready["path_prefix"] is True and all(ready.values())
            produce(platform, traffic(seed=33, total=600, span_hours=2))
            job.run()
            produce(platform, traffic(seed=34, total=600, span_hours=2))
            SpeedJob(platform, spark).run(available_now=True)
        finally:
            job.close()
        events = [x.event for x in read_log(platform)]
        with TestClient(create_app(platform)) as api:
            check_dimension(api, events, "path_prefix", path_prefix, per_site=True, timeseries_values=3)
    del old_speed


def test_a_dimension_the_speed_layer_does_not_count_is_not_served(platform: Settings, spark: Any) -> None:
    from pyspark.sql import functions as F

    prefix = Dimension(
        "path_prefix", lambda: F.regexp_extract(F.col("url"), r"^[a-z]+://[^/]+(/[^/?]*)", 1), "x"
    )
    produce(platform, traffic(seed=41, total=2_000, span_hours=10))
    old_speed = SpeedJob(platform, spark)  # constructed before the declaration: counts without it
    with declared(prefix):
        job = BatchJob(platform, spark)
        try:
            job.run()
        finally:
            job.close()
        produce(platform, traffic(seed=42, total=300, span_hours=1))
        old_speed.run(available_now=True)  # counts generation 1 without path_prefix
        with TestClient(create_app(platform)) as api:
            body = api.get("/v1/breakdown", params={"dimension": "path_prefix", "site": SITE})
            assert body.status_code == 409 and body.json()["dimension"] == "path_prefix"
            assert "not ready" in body.json()["detail"]
            listed = {d["name"]: d for d in api.get("/v1/dimensions").json()["dimensions"]}
            assert listed["path_prefix"]["ready"] is False and listed["country"]["ready"] is True
            assert api.get("/v1/breakdown", params={"dimension": "country", "site": SITE}).status_code == 200
