"""``POST /v2/query`` on the real stack, across the batch/realtime cut: a batch generation over
traffic with late and out-of-order events and duplicates, then more traffic and re-sends of events
the batch holds, counted by the speed layer; random filter trees then answer exactly what the
recount of the log's first copies says (tests.integration.filters_check). And a query over the row
limit only because of its realtime part is refused before the realtime rows are fetched."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from api.app import create_app
from batch_layer.job import BatchJob
from config.settings import Settings
from contract import encode
from serving_layer.filters import service as filter_service
from speed_layer.job import SpeedJob
from tests.integration.conftest import produce
from tests.integration.filters_check import assert_counts_match_lists, assert_filters_match, filter_keys
from tests.integration.speed_layer.test_speed_layer import live, redis_client, served_cut
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


def _commands(r: redis.Redis) -> Counter[str]:
    """Calls per command since Redis' stats were reset (the commands of functions included)."""
    stats: dict[str, dict[str, int]] = r.info("commandstats")
    return Counter({name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()})


def test_a_realtime_part_over_the_row_limit_is_refused_before_it_is_fetched(
    platform: Settings, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The speed layer counts the rows it appends (a hash beside the lists, in the same commit) and
    the API checks the batch part's estimate plus those counts against LAMBDA_API_FILTER_MAX_ROWS
    before it fetches the realtime rows: over it, a 422 naming the setting, with no LRANGE run by
    Redis and nothing decoded by the API (a spy on the decode); at it, the rows are fetched."""
    produce(platform, live(seed=41, total=1_500))
    batch = BatchJob(platform, spark)
    try:
        gen = batch.run().gen
    finally:
        batch.close()
    produce(platform, live(seed=42, total=1_500))
    SpeedJob(platform, spark).run(available_now=True)
    assert served_cut(platform)[0] == gen

    r = redis_client(platform)
    assert assert_counts_match_lists(r) > 0
    _, counted = filter_keys(r, gen)
    per_site = Counter[str]()
    for (site, _day), sizes in counted.items():
        per_site[site] += sizes["rows"]
    site, realtime_rows = per_site.most_common(1)[0]
    days = sorted(day for (s, day) in counted if s == site)
    body = {
        "site_id": site,
        "date_range": [days[0], days[-1]],
        "metrics": ["pageviews", "visitors"],
        "filters": [["is_not", "country", ["--"]], ["is_not", "device", ["--"]]],
    }
    decoded: list[int] = []
    decode = filter_service.decode_blobs

    def spy(blobs: list[bytes]) -> Any:
        decoded.append(len(blobs))
        return decode(blobs)

    monkeypatch.setattr(filter_service, "decode_blobs", spy)

    def ask(settings: Settings, times: int = 1) -> list[Any]:
        with TestClient(create_app(settings)) as api:
            return [api.post("/v2/query", json=body) for _ in range(times)]

    (answered,) = ask(platform)
    assert answered.status_code == 200, answered.text
    scanned = answered.json()["meta"]["scanned_rows"]
    assert scanned - realtime_rows > 0 and decoded, "a batch part and fetched realtime rows"

    decoded.clear()
    r.config_resetstat()
    limit = scanned - 1  # at or above the batch part's estimate, below it plus the realtime rows
    for refused in ask(platform.model_copy(update={"api_filter_max_rows": limit}), times=2):
        assert refused.status_code == 422, refused.text
        (detail,) = refused.json()["detail"]
        assert detail["type"] == "cost_limit" and detail["ctx"] == {"rows": scanned, "limit": limit}
        assert "LAMBDA_API_FILTER_MAX_ROWS" in detail["msg"]
    commands = _commands(r)
    assert commands["fcall_ro"] >= 2 and commands["hmget"] >= 2, commands  # the counts were read
    assert commands["lrange"] == 0 and decoded == [], (commands, decoded)  # the rows were not

    (at_limit,) = ask(platform.model_copy(update={"api_filter_max_rows": scanned}))
    assert at_limit.status_code == 200 and at_limit.json()["results"] == answered.json()["results"]
    assert _commands(r)["lrange"] == len(days) and len(decoded) == 1
    r.close()
