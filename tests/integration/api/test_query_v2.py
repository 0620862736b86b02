"""``POST /v2/query`` on the real stack, across the batch/realtime cut: a batch generation over
traffic with late and out-of-order events and duplicates, then more traffic and re-sends of events
the batch holds, counted by the speed layer; random filter trees then answer exactly what the
recount of the log's first copies says (tests.integration.filters_check)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from api.app import create_app
from batch_layer.job import BatchJob
from config.settings import Settings
from contract import encode
from speed_layer.job import SpeedJob
from tests.integration.conftest import produce
from tests.integration.filters_check import assert_filters_match
from tests.integration.speed_layer.test_speed_layer import live, served_cut
from tests.oracle import first_copies, read_log


def test_combined_filters_answer_the_recount_across_the_cut(platform: Settings, spark: Any) -> None:
    first = produce(platform, live(seed=31, total=3_000, late_fraction=0.1))
    batch = BatchJob(platform, spark)
    try:
        gen = batch.run().gen
    finally:
        batch.close()
    produce(platform, live(seed=32, total=3_000, late_fraction=0.1))
    produce(platform, [encode(e) for e in first[:300]])  # re-sends of events the batch holds
    SpeedJob(platform, spark).run(available_now=True)
    served, cut = served_cut(platform)
    assert served == gen and cut

    log = read_log(platform.kafka_bootstrap, platform.events_topic)
    events = [r.event for r in first_copies(log) if r.event]
    assert any(r.offset >= cut.get(r.partition, 0) for r in first_copies(log)), "nothing past the cut"
    assert_filters_match(platform, events, examples=40)

    with TestClient(create_app(platform)) as api:
        site = events[0].url.split("/")[2]
        # Parameters are never SQL: a hostile value is a value that matches nothing.
        hostile = api.post(
            "/v2/query",
            json={
                "site_id": site,
                "date_range": "30d",
                "metrics": ["pageviews"],
                "filters": [["is", "country", ["'); DROP TABLE x; --"]], ["contains", "page", ["%"]]],
            },
        )
        assert hostile.status_code == 200, hostile.text
        assert hostile.json()["results"] == [{"metrics": [0], "dimensions": []}]
        bad = api.post(
            "/v2/query",
            json={
                "site_id": site,
                "date_range": "30d",
                "metrics": ["visits"],
                "filters": [["is", "x", ["y"]]],
            },
        )
        assert bad.status_code == 422 and "filters" in bad.text
        # The table is counted by both layers like a view, but is not one.
        listed = {d["name"] for d in api.get("/v1/dimensions").json()["dimensions"]}
        assert "filters" not in listed and {"page", "country", "channel"} <= listed
