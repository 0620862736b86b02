"""POST /v2/query through the app's route, dependency and error handlers, over fakes: the views
path and the filter table's path, the answer against its model, the 422s naming the body's
parameter, the row and realtime memory limits' 422s, the keys' scope and sites."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.app import _install_error_handlers
from api.auth import Authenticator
from api.credentials import new_key
from api.query_v2 import QueryV2Response
from api.ratelimit import RateLimiter
from api.routes import query_v2
from config.settings import Settings
from contract import utc
from generations.model import Served, SpeedCommit
from serving_layer.answers import Coverage, Distinct, SeriesAnswer, SeriesPoint
from serving_layer.filters.scan import Scanner
from serving_layer.filters.service import FilterService
from serving_layer.queries import SeriesQuery
from tests.unit.api.test_guards import MemoryKeys
from tests.unit.serving_layer.test_filters import (
    SITE,
    FakeBatch,
    FakeRealtime,
    Rows,
    _blob,
    _generation,
    _row,
    _write_batch,
    limits,
)
from views.filter_table import NAME

TODAY = utc.now().date()
DAYS = [TODAY - timedelta(days=i) for i in range(3)]


class Engine:
    """The filter table's fakes plus the series a views-path query asks for."""

    def __init__(self, realtime: Any) -> None:
        self.batch = FakeBatch(_generation(days={d.isoformat(): 3 for d in DAYS}))
        self.realtime = realtime
        self.series_asked: list[SeriesQuery] = []

    def on_degraded(self, store: str, exc: Exception) -> None:
        pass

    async def description(self, view: str) -> dict[str, Any] | None:
        return {"per_site": view != "page"}

    async def series(self, q: SeriesQuery, after: Any = None) -> SeriesAnswer:
        self.series_asked.append(q)
        d = Distinct(3.2, 3.0, 4.0, False)
        points = [
            SeriesPoint(q.start, 5, d),
            SeriesPoint(q.start + timedelta(days=1), 0, Distinct(0, 0, 0, True)),
        ]
        cov = Coverage(3, {0: 100}, datetime(2026, 11, 26, tzinfo=UTC), {0: 120}, False, ())
        return SeriesAnswer(q, points, 5, d, cov)


def make_client(tmp_path: Any, mode: str = "open", **limit_kw: Any) -> tuple[TestClient, MemoryKeys, Engine]:
    settings = Settings(api_auth=mode, api_key_cache_s=0)
    store = MemoryKeys()
    rt = Rows(
        Served(3, {0: 100}),
        SpeedCommit(7, {0: 130}),
        frozenset({f"{NAME}@f1"}),
        [_blob([_row(country="DE", visitor=1, pageviews=4, day=DAYS[0])])],
    )
    engine = Engine(FakeRealtime(rt))
    _write_batch(
        tmp_path,
        [
            _row(country="DE", visitor=1, pageviews=2, day=DAYS[1]),
            _row(country="DE", visitor=2, pageviews=1, day=DAYS[2]),
        ],
        gen=3,
    )
    services = SimpleNamespace(
        settings=settings,
        auth=Authenticator(settings, store),
        rate=RateLimiter(settings.api_rate_limit),
        metrics=None,
        filters=FilterService(engine, Scanner(limits(**limit_kw)), tmp_path.as_uri(), 1000),
    )
    app = FastAPI()
    app.state.services = services
    app.include_router(query_v2.router)
    _install_error_handlers(app, services)
    return TestClient(app), store, engine


BODY = {
    "site_id": SITE,
    "date_range": "7d",
    "metrics": ["visitors", "pageviews"],
    "filters": [["is", "visit:country", ["DE"]], ["contains", "visit:source", ["a"]]],
}


def test_combined_filters_are_answered_by_the_filter_table_exactly(tmp_path: Any) -> None:
    client, _, _ = make_client(tmp_path)
    r = client.post("/v2/query", json=BODY)
    assert r.status_code == 200, r.text
    body = r.json()
    QueryV2Response.model_validate(body)
    assert body["path"] == "filter_table" and body["exact"] == {"visitors": True, "pageviews": True}
    assert body["results"] == [{"metrics": [2, 7], "dimensions": []}]
    assert body["generation"] == 3 and body["covers"]["realtime_offsets"] == {"0": 130}
    assert body["query"]["filters"][0] == ["is", "country", ["DE"]] and not body["partial"]
    by_day = client.post("/v2/query", json={**BODY, "dimensions": ["time:day"]}).json()
    assert [row["dimensions"] for row in by_day["results"]] == [[d.isoformat()] for d in sorted(DAYS)]


def test_no_filter_is_answered_by_todays_views(tmp_path: Any) -> None:
    client, _, engine = make_client(tmp_path)
    r = client.post(
        "/v2/query",
        json={**BODY, "filters": [], "metrics": ["pageviews", "visitors"], "dimensions": ["time:day"]},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    QueryV2Response.model_validate(body)
    assert body["path"] == "views" and body["exact"] == {"pageviews": True, "visitors": False}
    assert body["results"] == [{"metrics": [5, 3], "dimensions": [(TODAY - timedelta(days=6)).isoformat()]}]
    assert engine.series_asked[0].view == "site" and engine.series_asked[0].key == SITE
    one = client.post("/v2/query", json={**BODY, "filters": [["is", "visit:country", ["DE"]]]}).json()
    assert one["path"] == "views" and engine.series_asked[1].key == f"{SITE}|DE"


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"metrics": ["pageviews", "nope"]}, "metrics"),
        ({"date_range": "1y"}, "date_range"),
        ({"filters": [["is", "visit:browser", ["x"]]]}, "filters"),
        # a visit metric per page: visits are kept by their entry and exit pages only
        ({"metrics": ["visitors", "visit_duration"], "dimensions": ["event:page"]}, "dimensions"),
        (
            {
                "metrics": ["visits"],
                "filters": [["is", "event:page", ["/"]], ["is", "visit:country", ["DE"]]],
            },
            "filters",
        ),
        ({"pagination": {"limit": "ten"}}, "pagination"),
    ],
)
def test_a_bad_body_is_a_422_naming_the_parameter(tmp_path: Any, change: dict[str, Any], param: str) -> None:
    client, _, _ = make_client(tmp_path)
    r = client.post("/v2/query", json={**BODY, **change})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", param]
    r = client.post("/v2/query", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "body"]


def test_a_scan_over_the_row_limit_is_a_422_with_the_estimate(tmp_path: Any) -> None:
    client, _, _ = make_client(tmp_path, max_rows=1)
    r = client.post("/v2/query", json=BODY)
    assert r.status_code == 422
    detail = r.json()["detail"][0]
    assert detail["type"] == "cost_limit" and detail["ctx"] == {"rows": 3, "limit": 1}
    assert "LAMBDA_API_FILTER_MAX_ROWS" in detail["msg"]


def test_realtime_rows_over_the_memory_limit_are_a_422_naming_it(tmp_path: Any) -> None:
    client, _, _ = make_client(tmp_path, max_realtime_bytes=100)
    r = client.post("/v2/query", json=BODY)
    assert r.status_code == 422
    detail = r.json()["detail"][0]
    assert detail["type"] == "cost_limit" and detail["loc"] == ["body", "date_range"]
    assert detail["ctx"]["limit"] == 100 and detail["ctx"]["bytes"] > 100
    assert "LAMBDA_API_FILTER_MAX_REALTIME_MB" in detail["msg"]


def test_keys_need_the_read_scope_and_query_their_sites_only(tmp_path: Any) -> None:
    client, store, _ = make_client(tmp_path, mode="keys")
    assert client.post("/v2/query", json=BODY).status_code == 401
    mine, record = new_key("dash", {"read"}, (SITE,))
    other, other_record = new_key("dash", {"read"}, ("other.example.com",))
    writer, writer_record = new_key("ingest", {"write"}, None)
    for rec in (record, other_record, writer_record):
        asyncio.run(store.insert(rec))
    assert client.post("/v2/query", json=BODY, headers={"Authorization": f"Bearer {mine}"}).status_code == 200
    assert client.post("/v2/query", json=BODY, headers={"X-API-Key": other}).status_code == 403
    assert client.post("/v2/query", json=BODY, headers={"X-API-Key": writer}).status_code == 403


def test_the_document_describes_the_body_and_the_answer(tmp_path: Any) -> None:
    client, _, _ = make_client(tmp_path)
    op = client.get("/openapi.json").json()["paths"]["/v2/query"]["post"]
    assert "site_id" in op["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert op["security"] and {"200", "422", "429", "504"} <= set(op["responses"])


def test_the_views_path_keeps_the_cost_limit_of_the_engines_queries(tmp_path: Any) -> None:
    from api.app import filter_service

    client, _, engine = make_client(tmp_path)
    service = filter_service(Settings(api_max_cost=100), engine)
    client.app.state.services.filters = service
    hourly = {**BODY, "filters": [], "dimensions": ["time:hour"], "date_range": "30d"}
    r = client.post("/v2/query", json=hourly)
    assert r.status_code == 422
    assert (
        r.json()["detail"][0]["loc"] == ["body", "date_range"]
        and r.json()["detail"][0]["type"] == "cost_limit"
    )
    assert client.post("/v2/query", json={**hourly, "date_range": "day"}).status_code == 200
