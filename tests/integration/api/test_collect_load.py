"""POST /api/event under load: tracker page views at 2,000 requests/s for 10 s against one uvicorn
worker (``python -m api``), and nothing accepted is lost: every event answered ``counted`` is in the
events topic, once, and nothing else is; no address reaches Kafka.

The load is vegeta's open loop (bench/vegeta.py), built by ``make setup``; the same load with the
figures kept is ``make bench-collect``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from bench.collect_load import ADDRESSES, SITE, tracker_posts
from bench.vegeta import OpenLoop, installed
from config.settings import Settings
from contract import decode
from tests.integration.api.test_api_schema import start_api, stop_api
from tests.integration.ingest.test_ingest_kafka import consume_all
from tests.integration.serving_fixtures import WIDE, closed_port

RATE = 2000
SECONDS = 10


@pytest.fixture(scope="module")
def api(bare: Settings) -> Iterator[str]:
    port = closed_port()
    proc = start_api(
        bare,
        port,
        LAMBDA_COLLECT_SITES=json.dumps([SITE]),
        LAMBDA_COLLECT_TRUSTED_PROXIES=json.dumps(["127.0.0.1"]),
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_api(proc)


def test_2000_tracker_requests_a_second_lose_nothing(bare: Settings, api: str, tmp_path: Path) -> None:
    vegeta = OpenLoop(installed(bare.cache_dir))
    results = tmp_path / "results.bin"
    vegeta.attack(tracker_posts(f"{api}/api/event"), RATE, SECONDS, results)
    answers = vegeta.answers(results)
    figures = vegeta.report(results)
    print(f"/api/event at {RATE}/s for {SECONDS} s: {figures}")

    codes = {code for code, _ in answers}
    # Refused (a worker past its concurrency limit: 503 + Retry-After) or unanswered (vegeta gave up
    # waiting: 0) is not lost: the client knows it was not accepted. Nothing else may happen.
    assert codes <= {202, 503, 0}, codes
    accepted = [orjson.loads(body) for code, body in answers if code == 202]
    unanswered = sum(code == 0 for code, _ in answers)
    assert len(accepted) >= 1000, figures
    assert {a["result"] for a in accepted} == {"counted"}

    logged = [decode(m.value(), WIDE) for m in consume_all(bare, bare.events_topic)]
    ids = [e.event_id for e in logged if e.site == SITE]
    assert len(ids) == len(set(ids))  # nothing twice
    missing = {a["event_id"] for a in accepted} - set(ids)
    assert not missing, f"{len(missing)} accepted events are not in Kafka"
    # A request vegeta stopped waiting for may still have been produced, and nothing else was.
    assert len(ids) - len(accepted) <= unanswered
    countries = {e.country for e in logged if e.site == SITE}
    assert {"GB", "US", "DE"} <= countries and None in countries  # 203.0.113.9 is nobody's
    raw = b"".join(m.value() or b"" for m in consume_all(bare, bare.events_topic))
    raw += b"".join(m.value() or b"" for m in consume_all(bare, bare.dlq_topic))
    assert not any(address.encode() in raw for address in ADDRESSES)
