"""POST /api/event through the whole app on the real services: CORS for the collected sites'
origins only, the refusals that produce nothing, a page view produced once Kafka acknowledged it,
and the outcomes counted in /metrics."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from config.settings import Settings
from contract import decode
from ingest.topics import log_end_offsets
from tests.integration.ingest.test_ingest_kafka import consume_all
from tests.integration.serving_fixtures import WIDE

SITE = "collect.example.com"
ORIGIN = f"https://{SITE}"
VIEW = {
    "n": "pageview",
    "u": f"{ORIGIN}/pricing?plan=pro",
    "d": SITE,
    "r": "https://duckduckgo.com/",
    "w": 390,
}
PHONE = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148"


@pytest.fixture(scope="module")
def api(bare: Settings) -> Iterator[TestClient]:
    settings = bare.model_copy(update={"collect_sites": [SITE]})
    with TestClient(create_app(settings)) as client:
        yield client


def test_a_page_view_is_acknowledged_with_cors_for_its_site_only(bare: Settings, api: TestClient) -> None:
    before = log_end_offsets(bare)
    answer = api.post(
        "/api/event",
        content=orjson.dumps(VIEW),
        headers={"Content-Type": "text/plain", "Origin": ORIGIN, "User-Agent": PHONE},
    )
    assert answer.status_code == 202, answer.text
    assert answer.headers["access-control-allow-origin"] == ORIGIN
    body = answer.json()
    assert body["result"] == "counted"
    [event] = [
        decode(m.value() or b"", WIDE)
        for m in consume_all(bare, bare.events_topic)
        if (m.offset() or 0) >= before.get(m.partition() or 0, 0)
    ]
    assert event.event_id == body["event_id"] and event.url == f"{ORIGIN}/pricing?plan=pro"
    assert event.referrer == "https://duckduckgo.com/" and event.user_agent == PHONE

    preflight = api.options("/api/event", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == ORIGIN
    assert api.options("/api/event", headers={"Origin": "https://evil.example"}).status_code == 403


def test_refusals_name_what_is_wrong_and_produce_nothing(bare: Settings, api: TestClient) -> None:
    before = log_end_offsets(bare)
    other = api.post("/api/event", content=orjson.dumps({**VIEW, "d": "other.example"}))
    assert other.status_code == 403 and other.json()["detail"].startswith("d: ")
    evil = api.post("/api/event", content=orjson.dumps(VIEW), headers={"Origin": "https://evil.example"})
    assert evil.status_code == 403 and "Origin" in evil.json()["detail"]
    assert "access-control-allow-origin" not in evil.headers
    bad = api.post("/api/event", content=b'{"n": "pageview", "d": 3}')
    assert bad.status_code == 422 and {tuple(e["loc"]) for e in bad.json()["detail"]} == {
        ("body", "u"),
        ("body", "d"),
    }
    big = api.post("/api/event", content=b" " * (bare.collect_max_body_bytes + 1))
    assert big.status_code == 413
    assert log_end_offsets(bare) == before
    metrics = api.get("/metrics").text
    assert 'lambda_collect_events_total{result="refused"}' in metrics
