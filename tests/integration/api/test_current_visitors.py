"""GET /v1/current-visitors on the real stack: Kafka, the speed layer's Spark job, Redis, the API.

Page views stamped over the last minutes (some older than any window, some re-sent) go through
ingest; the speed layer counts them; at that quiescent point every answer equals the recount of
the produced events in the answer's own window: exactly while its minutes are small, within the
bounds of its HLL estimate past the exact limit. Then more views come while the speed layer is
stopped: the answer has no number and says the window is not covered; once the speed layer has
run again it equals the recount with them.
"""

from __future__ import annotations

import csv
import io
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.schemas import CurrentVisitorsResponse
from config.settings import Settings
from contract import PageView
from speed_layer.job import SpeedJob
from tests.integration.api.test_api_keys import add_key, bearer
from tests.integration.conftest import isolated_platform, produce

LIMIT = 6
"""The exact limit of the test platform: the small site stays under it, the busy one goes past."""


@dataclass
class Live:
    settings: Settings
    small: str
    busy: str
    events: list[PageView]
    spark: Any

    def count(self) -> None:
        SpeedJob(self.settings, self.spark).run(available_now=True)


def views(site: str, visitors: list[str], ages_s: list[float], path: str = "/") -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    return [
        {
            "event_id": f"cv-{uuid.uuid4().hex[:12]}",
            "ts": (now - timedelta(seconds=age)).isoformat(),
            "visitor_id": visitor,
            "url": f"https://{site}{path}",
        }
        for visitor, age in zip(visitors, ages_s, strict=True)
    ]


@pytest.fixture(scope="module")
def live(stack: Settings, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    unique = uuid.uuid4().hex[:8]
    small, busy = f"small-{unique}.example.com", f"busy-{unique}.example.com"
    root = tmp_path_factory.mktemp("current")
    with isolated_platform(
        stack,
        root,
        redis_db=12,
        current_visitors_exact_limit=LIMIT,
        current_visitors_lag_s=1.0,
        api_key_cache_s=0.0,
    ) as settings:
        again = views(small, ["a"], [30])
        records = [
            *views(small, ["a", "b", "c"], [10, 40, 70]),
            *views(small, ["b", "d"], [20, 50], "/pricing"),
            *views(small, ["e"], [15 * 60]),  # older than the default window
            *again,
            *again,  # a re-send: counted once
            *views(busy, [f"v{i}" for i in range(60)], [(i * 7) % 120 for i in range(60)]),
        ]
        events = produce(settings, records)
        job = Live(settings, small, busy, events, spark)
        job.count()
        yield job


def recount(events: list[PageView], body: dict[str, Any], site: str, page: str | None = None) -> int:
    start, end = datetime.fromisoformat(body["from"]), datetime.fromisoformat(body["to"])
    return len(
        {
            e.visitor_id
            for e in events
            if start <= e.ts < end and e.url.split("/")[2] == site and (page is None or e.url == page)
        }
    )


def ask(api: TestClient, **params: Any) -> dict[str, Any]:
    response = api.get("/v1/current-visitors", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    CurrentVisitorsResponse.model_validate(body)
    return body


def test_current_visitors_equal_the_recount_and_say_when_not_covered(live: Live) -> None:
    small, busy = live.small, live.busy
    with TestClient(create_app(live.settings)) as api:
        body = ask(api, site=small)
        assert body["covered"] and body["reason"] is None
        start, end = datetime.fromisoformat(body["from"]), datetime.fromisoformat(body["to"])
        assert end - start == timedelta(minutes=6) and start.second == 0
        assert body["visitors"]["exact"] is True
        assert body["visitors"]["estimate"] == recount(live.events, body, small) >= 3
        as_csv = api.get("/v1/current-visitors", params={"site": small, "format": "csv"})
        assert as_csv.status_code == 200 and as_csv.headers["content-type"].startswith("text/csv")
        [row] = list(csv.DictReader(io.StringIO(as_csv.text)))  # its own window: the minute may turn
        assert row["covered"] == row["visitors_exact"] == "true"
        assert float(row["visitors"]) == recount(live.events, row, small)

        page = f"https://{small}/pricing"
        body = ask(api, site=small, page=page, minutes=10)  # the views are seconds old when counted
        assert body["page"] == page and body["visitors"]["exact"] is True
        assert body["visitors"]["estimate"] == recount(live.events, body, small, page) >= 1

        body = ask(api, site=small, minutes=30)
        assert body["visitors"]["estimate"] == recount(live.events, body, small) >= 4

        body = ask(api, site=busy)  # 60 visitors, minutes past the exact limit: an HLL union
        exact = recount(live.events, body, busy)
        v = body["visitors"]
        assert exact >= 30 and v["exact"] is False and v["lower"] <= exact <= v["upper"]

        # The speed layer is not running: new views are in the log, not counted.
        live.events += produce(live.settings, views(small, ["f", "g"], [5, 5]))
        time.sleep(live.settings.current_visitors_lag_s + 1)
        body = ask(api, site=small)
        assert body["covered"] is False and body["visitors"] is None
        assert "not covered" in body["reason"]

        live.count()
        body = ask(api, site=small)
        assert body["covered"] and body["visitors"]["estimate"] == recount(live.events, body, small) >= 2


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"minutes": 31}, "minutes"),
        ({"minutes": 0}, "minutes"),
        ({"page": "https://elsewhere.example.com/"}, "page"),
        ({"page": "not a url"}, "page"),
        ({"site": "a.example.com/path"}, "site"),
    ],
)
def test_bad_parameters_get_a_422_naming_them(live: Live, params: dict[str, Any], named: str) -> None:
    with TestClient(create_app(live.settings)) as api:
        response = api.get("/v1/current-visitors", params={"site": live.small, **params})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["query", named]


def test_a_key_reads_the_current_visitors_of_its_sites_only(live: Live) -> None:
    settings = live.settings.model_copy(update={"api_auth": "keys"})
    key = add_key(settings, "--name", "small-only", "--scope", "read", "--site", live.small)
    with TestClient(create_app(settings)) as api:
        assert api.get("/v1/current-visitors", params={"site": live.small}).status_code == 401
        mine = api.get("/v1/current-visitors", params={"site": live.small}, headers=bearer(key))
        assert mine.status_code == 200, mine.text
        other = api.get("/v1/current-visitors", params={"site": live.busy}, headers=bearer(key))
        assert other.status_code == 403 and live.small in other.json()["detail"]
