"""The REST API on the real services: answers, writes read back, errors that name the parameter."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from api.app import create_app
from api.schemas import (
    EventsAccepted,
    PageviewsResponse,
    StatusResponse,
    TopUrlsResponse,
    UniqueVisitorsResponse,
)
from config.settings import Settings
from ingest.topics import log_end_offsets
from speed_layer.job import SpeedJob
from tests.integration.serving_fixtures import Served
from tests.oracle import DIMENSION_KEYS
from tests.serving_support import assert_estimate, count, end_offsets


def hour_floor(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


@pytest.fixture(scope="module")
def client(bare: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(bare)) as c:
        yield c


JSON = {"Content-Type": "application/json"}


def event(url: str = "https://shop.example.com/api-test", **overrides: Any) -> dict[str, Any]:
    return {
        "event_id": f"api-{uuid.uuid4().hex[:12]}",
        "ts": datetime.now(UTC).isoformat(),
        "visitor_id": "v-api",
        "url": url,
        **overrides,
    }


def test_answers_match_the_recount_and_the_response_models(served: Served) -> None:
    events = served.events
    start = hour_floor(min(e.ts for e in events))
    end = hour_floor(max(e.ts for e in events)) + timedelta(hours=1)
    window = {"from": start.isoformat(), "to": end.isoformat()}
    with TestClient(create_app(served.settings)) as api:
        body = api.get("/v1/pageviews", params={"site": "https://shop.example.com", **window}).json()
        PageviewsResponse.model_validate(body)
        assert body["key"] == "shop.example.com" and body["view"] == "site_traffic"
        assert body["total"] == count(events, "site", "shop.example.com", start, end)[0]
        assert body["covers"]["batch_offsets"] == {str(p): o for p, o in served.cut.items()}

        # A landing page's URL as sent, campaign parameters included: the page without them.
        landing = next(e for e in events if "utm_" in e.url)
        page = DIMENSION_KEYS["page"](landing)
        body = api.get(
            "/v1/unique-visitors", params={"url": landing.url, "granularity": "day", **window}
        ).json()
        UniqueVisitorsResponse.model_validate(body)
        assert body["key"] == page != landing.url
        assert_estimate(body["total"], len(count(events, "page", page, start, end)[1]))

        body = api.get("/v1/top-urls", params={"limit": 5, **window}).json()
        TopUrlsResponse.model_validate(body)
        assert [u["rank"] for u in body["urls"]] == [1, 2, 3, 4, 5]

        status = api.get("/v1/status").json()
        StatusResponse.model_validate(status)
        assert status["served"]["generation"] == served.generation.gen
        assert status["speed"]["committed_offsets"] == {
            str(p): o for p, o in end_offsets(served.logged).items()
        }
        assert set(status["speed"]["lag"].values()) == {0}
        assert status["log"]["dlq_records"] > 0  # the generator sends malformed records
        in_dlq = status["dead_letters"]["in_dlq"]
        assert (
            in_dlq["test"] and sum(sum(r.values()) for r in in_dlq.values()) == status["log"]["dlq_records"]
        )
        assert status["errors"] == {}
        assert status["served"]["stalled"] is False and status["repaired_pointer"] is False
        assert status["master"]["absorbed_until"] == {str(p): o for p, o in served.cut.items()}
        assert status["master"]["gaps"] == [] and status["master"]["retention"]["at_risk"] is False
        assert status["master"]["retention"]["retention_s"] == served.settings.topic_retention_ms / 1000
        assert status["redis"]["used_memory_bytes"] > 0


def test_status_repairs_a_pointer_left_behind_and_flags_a_stalled_batch_layer(served: Served) -> None:
    """A batch run that died between the switch's two writes leaves Redis on an older generation:
    the next status read brings it forward. A cut older than batch_stalled_after_s is flagged."""
    import redis as redis_client

    from stores.redis import keys

    settings = served.settings.model_copy(update={"batch_stalled_after_s": 0.001})
    r = redis_client.Redis.from_url(settings.redis_url)
    behind = r.get(keys.SERVED)
    r.set(keys.SERVED, keys.encode_served(keys.Served(0, {})))
    try:
        with TestClient(create_app(settings)) as api:
            status = api.get("/v1/status").json()
            StatusResponse.model_validate(status)
            assert status["repaired_pointer"] is True
            assert keys.decode_served(r.get(keys.SERVED)).gen == served.generation.gen
            assert status["served"]["generation"] == served.generation.gen and status["served"]["stalled"]
            assert api.get("/v1/status").json()["repaired_pointer"] is False
            metrics = api.get("/metrics").text
            assert "lambda_batch_stalled 1.0" in metrics and "lambda_master_gaps 0.0" in metrics
            assert (
                "lambda_served_cut_age_seconds " in metrics and "lambda_redis_used_memory_bytes " in metrics
            )
    finally:
        r.set(keys.SERVED, behind or b"")
        r.close()


def test_posted_events_are_read_back_with_the_offsets_token(
    bare: Settings, client: TestClient, spark: Any
) -> None:
    url = f"https://shop.example.com/ryw-{uuid.uuid4().hex[:6]}"
    response = client.post("/v1/events", json=[event(url), event(url, visitor_id="v-2"), event(url)])
    assert response.status_code == 202, response.text
    accepted = EventsAccepted.model_validate(response.json())
    assert accepted.accepted == 3 and len({(e.partition, e.offset) for e in accepted.events}) == 3
    params = {"url": url, "after": accepted.token}

    # Nothing has committed these events yet: the wait runs out, and the answer says so.
    late = client.get("/v1/pageviews", params={**params, "wait_ms": 50})
    assert late.status_code == 504
    assert late.json()["pending"]

    # The query waits while the speed layer counts the events (a fresh job rebuilds its states
    # first: on a loaded two-core machine that alone can take most of the default's 30 s).
    answers: list[Any] = []
    with TestClient(create_app(bare.model_copy(update={"api_max_wait_ms": 180_000}))) as patient:
        waiting = threading.Thread(
            target=lambda: answers.append(patient.get("/v1/pageviews", params={**params, "wait_ms": 180_000}))
        )
        waiting.start()
        SpeedJob(bare, spark).run(available_now=True)
        waiting.join()
    assert answers[0].status_code == 200, answers[0].text
    body = answers[0].json()
    assert body["total"] == 3
    visitors = client.get("/v1/unique-visitors", params={**params, "wait_ms": 1000}).json()
    assert visitors["total"]["estimate"] == 2


def test_invalid_events_are_rejected_with_every_field_and_nothing_is_produced(
    bare: Settings, client: TestClient
) -> None:
    before = log_end_offsets(bare)
    bad = [
        event(),
        event(visitor_id="", country="Germany"),
        event(url="ftp://x.example.com/"),
        "not an object",
    ]
    response = client.post("/v1/events", json=bad)
    assert response.status_code == 422
    locs = {tuple(e["loc"]) for e in response.json()["detail"]}
    assert locs == {("body", 1, "visitor_id"), ("body", 1, "country"), ("body", 2, "url"), ("body", 3)}
    assert client.post("/v1/events", content=b"{nope", headers=JSON).status_code == 422
    assert client.post("/v1/events", json=[]).status_code == 422
    # A text/plain or form POST needs no CORS preflight: any web page could send one. Refused.
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"Content-Type": content_type} if content_type else {}
        refused = client.post("/v1/events", content=orjson.dumps(event()), headers=headers)
        assert refused.status_code == 415 and "application/json" in refused.json()["detail"], refused.text
    assert log_end_offsets(bare) == before


def test_payload_limits_and_the_api_key(bare: Settings) -> None:
    settings = bare.model_copy(
        update={"api_max_body_bytes": 2048, "api_max_events": 3, "api_key": SecretStr("s3cret")}
    )
    with TestClient(create_app(settings)) as api:
        key = {"X-API-Key": "s3cret"}
        assert api.post("/v1/events", json=event()).status_code == 401
        assert api.post("/v1/events", json=event(), headers={"X-API-Key": "nope"}).status_code == 401
        assert api.post("/v1/events", json=event(), headers=key).status_code == 202
        big = orjson.dumps([event(user_agent="x" * 500) for _ in range(3)] * 2)
        assert api.post("/v1/events", content=big, headers={**key, **JSON}).status_code == 413
        assert api.post("/v1/events", json=[event() for _ in range(4)], headers=key).status_code == 413


@pytest.mark.parametrize(
    ("params", "loc"),
    [
        (
            {"url": "https://a.example.com/", "from": "2026-11-20T05:00:00Z", "to": "2026-11-20T04:00:00Z"},
            "from",
        ),
        ({"url": "https://a.example.com/", "granularity": "year"}, "granularity"),
        (
            {"url": "https://a.example.com/", "from": "2026-01-01T00:00:00Z", "to": "2026-11-01T00:00:00Z"},
            "to",
        ),
        ({"url": "https://a.example.com/", "from": "2026-11-20T05:30:00Z"}, "from"),
        ({"url": "not a url"}, "url"),
        ({"url": "ftp://a.example.com/"}, "url"),
        ({}, "url"),
        ({"url": "https://a.example.com/", "site": "a.example.com"}, "site"),
        ({"site": "https://a.example.com/page"}, "site"),
        ({"url": "https://a.example.com/", "after": "garbage"}, "after"),
        ({"url": "https://a.example.com/", "after": "o1.e30", "wait_ms": 10**9}, "wait_ms"),
        ({"url": "https://a.example.com/", "from": "yesterday"}, "from"),
    ],
)
def test_bad_parameters_get_a_422_naming_them(client: TestClient, params: dict[str, Any], loc: str) -> None:
    response = client.get("/v1/pageviews", params=params)
    assert response.status_code == 422, response.text
    assert loc in [e["loc"][-1] for e in response.json()["detail"]]


EXTREME_RANGES = [
    ({"to": "0001-01-01T00:00Z"}, "to"),
    ({"from": "9999-12-30T00:00Z", "to": "9999-12-31T23:00Z"}, "to"),
    ({"from": "0001-01-01T00:00Z", "to": "1970-01-02T00:00Z"}, "from"),
    ({"from": "1969-12-31T00:00Z", "to": "1970-01-02T00:00Z"}, "from"),
]


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/v1/pageviews", {"site": "shop.example.com", "granularity": "day"}),
        ("/v1/pageviews", {"site": "shop.example.com"}),
        ("/v1/unique-visitors", {"site": "shop.example.com", "granularity": "day"}),
        ("/v1/top-urls", {}),
        ("/v1/breakdown", {"dimension": "country", "site": "shop.example.com"}),
        ("/v1/timeseries", {"dimension": "site", "site": "shop.example.com", "granularity": "day"}),
    ],
)
@pytest.mark.parametrize(("times", "loc"), EXTREME_RANGES)
def test_extreme_dates_get_a_422_naming_the_parameter(
    client: TestClient, path: str, extra: dict[str, Any], times: dict[str, str], loc: str
) -> None:
    response = client.get(path, params={**extra, **times})
    assert response.status_code == 422, response.text
    assert loc in [e["loc"][-1] for e in response.json()["detail"]], response.text


@pytest.mark.parametrize(("limit", "ok"), [(0, False), (1, True), (1000, True), (1001, False), ("x", False)])
def test_top_urls_limit_is_checked(client: TestClient, limit: Any, ok: bool) -> None:
    response = client.get("/v1/top-urls", params={"limit": limit})
    assert response.status_code == (200 if ok else 422), response.text
    if not ok:
        assert response.json()["detail"][0]["loc"] == ["query", "limit"]


def test_operations_endpoints(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and all(c["ok"] for c in ready.json()["checks"].values())
    client.get("/v1/pageviews", params={"site": "shop.example.com"})
    metrics = client.get("/metrics").text
    assert (
        'lambda_api_request_seconds_bucket{le="0.005",method="GET",route="/v1/pageviews",status="200"}'
        in metrics
    )
    assert "lambda_api_batch_cache_bytes" in metrics
    spec = client.get("/openapi.json").json()
    for name in (
        "PageviewsResponse",
        "UniqueVisitorsResponse",
        "TopUrlsResponse",
        "StatusResponse",
        "EventsAccepted",
    ):
        assert spec["components"]["schemas"][name].get("examples"), name
    assert "PageView" in spec["components"]["schemas"]


def test_cors_answers_only_the_origins_a_setting_lists(bare: Settings, client: TestClient) -> None:
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    listed, other = "https://shop.example.com", "https://evil.example.net"
    assert (
        "access-control-allow-origin"
        not in client.options("/v1/events", headers={"Origin": listed, **preflight}).headers
    )  # none listed by default
    settings = bare.model_copy(update={"api_cors_origins": [listed]})
    with TestClient(create_app(settings)) as api:
        allowed = api.options("/v1/events", headers={"Origin": listed, **preflight})
        assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == listed
        refused = api.options("/v1/events", headers={"Origin": other, **preflight})
        assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers
        read = api.get("/healthz", headers={"Origin": other})
        assert read.status_code == 200 and "access-control-allow-origin" not in read.headers
