"""With a store down, the API answers what it can and says so; it never gives a silently wrong number.

Services are stopped and restarted through the test stack's own control (stack.control), and always
restarted, so the tests after these find the stack as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from fastapi.testclient import TestClient

from api.app import create_app
from config.settings import Settings
from stack import control
from tests.integration.serving_fixtures import Served
from tests.serving_support import count


@contextmanager
def stopped(stack: Settings, service: str) -> Iterator[None]:
    control.down(stack, [service])
    try:
        yield
    finally:
        control.up(stack, [service])


def window(served: Served) -> dict[str, str]:
    events = served.events
    start = min(e.ts for e in events).replace(minute=0, second=0, microsecond=0)
    end = max(e.ts for e in events).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return {"from": start.isoformat(), "to": end.isoformat()}


def test_redis_down_gives_a_batch_only_answer_flagged_partial(stack: Settings, served: Served) -> None:
    params = {"site": "shop.example.com", **window(served)}
    start, end = (datetime.fromisoformat(params[k]) for k in ("from", "to"))
    with TestClient(create_app(served.settings)) as api:
        full = api.get("/v1/pageviews", params=params).json()
        assert not full["partial"]
        with stopped(stack, "redis"):
            body = api.get("/v1/pageviews", params=params).json()
            assert body["partial"] is True and body["missing"] == ["realtime"]
            assert body["covers"]["realtime_offsets"] is None
            assert body["covers"]["generation"] == served.generation.gen  # from MongoDB's registry
            assert body["total"] == count(served.below_cut, "site", "shop.example.com", start, end)[0]
            assert body["total"] < full["total"]
            uv = api.get("/v1/unique-visitors", params=params).json()
            assert uv["partial"] is True
            ready = api.get("/readyz")
            assert ready.status_code == 200 and not ready.json()["checks"]["redis"]["ok"]
            status = api.get("/v1/status").json()
            assert "redis" in status["errors"] and status["served"]["generation"] == served.generation.gen
            assert 'lambda_api_store_errors_total{store="redis"}' in api.get("/metrics").text
        again = api.get("/v1/pageviews", params=params).json()
        assert not again["partial"] and again["total"] == full["total"]


def test_mongodb_down_is_a_503_with_retry_after(stack: Settings, served: Served) -> None:
    params = {"site": "blog.example.com", **window(served)}
    with TestClient(create_app(served.settings)) as api, stopped(stack, "ferretdb"):
        response = api.get("/v1/pageviews", params=params)
        assert response.status_code == 503
        assert int(response.headers["Retry-After"]) > 0
        assert "batch views unavailable" in response.json()["detail"]
        ready = api.get("/readyz")
        assert ready.status_code == 503 and not ready.json()["checks"]["mongodb"]["ok"]
    with TestClient(create_app(served.settings)) as api:
        assert api.get("/v1/pageviews", params=params).status_code == 200
