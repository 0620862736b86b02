"""What a read-your-writes wait costs Redis: a query waiting for offsets polls the served pointer
and the speed layer's commit only, at growing intervals (50 ms doubling up to 250 ms), and reads
its own values once; measured in Redis commands on the real Redis."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from api.app import create_app
from config.settings import Settings
from serving_layer.consistency import encode_token

WAIT_S = 3.0
QUERY = {"site": "shop.example.com", "from": "2026-11-01T05:00Z", "to": "2026-11-08T05:00Z"}  # 7 days, hourly


@pytest.fixture
def api(bare: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(bare)) as client:
        yield client


def commands(r: redis.Redis) -> int:
    """Commands Redis processed so far (less the INFO that asks)."""
    return int(r.info("stats")["total_commands_processed"])


def test_a_wait_polls_the_commit_not_the_query(api: TestClient, bare: Settings) -> None:
    r = redis.Redis(host=bare.redis_host, port=bare.redis_port)
    try:
        api.get("/v1/pageviews", params=QUERY)  # warm: the generation is cached
        before = commands(r)
        assert api.get("/v1/pageviews", params=QUERY).status_code == 200
        one_query = commands(r) - before - 1

        never = encode_token({0: 10**12})
        before = commands(r)
        started = time.monotonic()
        waited = api.get("/v1/pageviews", params={**QUERY, "after": never, "wait_ms": int(WAIT_S * 1000)})
        elapsed = time.monotonic() - started
        waiting = commands(r) - before - 1
    finally:
        r.close()
    assert waited.status_code == 504 and WAIT_S <= elapsed < WAIT_S + 1.0
    polled_before = int(WAIT_S / 0.05) * one_query  # one whole query every 50 ms, as it was
    print(
        f"one 7-day hourly query: {one_query} Redis commands; a {WAIT_S:.0f} s wait: {waiting} commands "
        f"(polling the whole query every 50 ms: about {polled_before})"
    )
    assert waiting <= polled_before / 5
