"""The answer cache (api.answer_cache) on the real services: a repeated query is answered from the
cache while nothing is committed, and never after a commit: the next answer is the recount of the
log again, from a new snapshot.

The realtime reader's stamp, which the cache's rule rests on, is checked on the real Redis too: the
same for two reads with no write between them, different after a commit of the speed layer, a
generation switch, or a change of the generation's counted views, and the same whether read with
a whole snapshot (redis-py) or alone on the lean connection (stores.redis.stamp)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Hashable
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from api.answer_cache import AnswerCache
from api.app import create_app
from bench.commits import commit
from config.settings import Settings
from generations.model import Served
from speed_layer.job import SpeedJob
from stores.redis import keys
from stores.redis.reader import RedisRealtimeReader, connect
from tests.integration.serving_fixtures import read_log, redis_of
from tests.serving_support import commit_realtime, count, end_offsets


def post(api: TestClient, url: str, visitors: list[str]) -> None:
    now = datetime.now(UTC).isoformat()
    events = [
        {"event_id": f"cache-{uuid.uuid4().hex}", "ts": now, "visitor_id": v, "url": url} for v in visitors
    ]
    assert api.post("/v1/events", json=events).status_code == 202


def recount(settings: Settings, url: str, body: dict[str, Any]) -> int:
    """The page views of ``url`` in the answer's range, counted from the log."""
    start, end = (datetime.fromisoformat(body[k].replace("Z", "+00:00")) for k in ("from", "to"))
    return count([x.event for x in read_log(settings)], "page", url, start, end)[0]


def test_a_repeated_query_is_served_from_the_cache_until_the_speed_layer_commits(
    bare: Settings, spark: Any
) -> None:
    url = f"https://shop.example.com/cached-{uuid.uuid4().hex[:6]}"
    params = {"url": url}
    with TestClient(create_app(bare)) as api:
        answers: AnswerCache = api.app.state.services.answers
        post(api, url, ["v-1", "v-2"])
        SpeedJob(bare, spark).run(available_now=True)
        first = api.get("/v1/pageviews", params=params)
        body = first.json()
        assert body["total"] == 2 == recount(bare, url, body)
        hits, misses = answers.hits, answers.misses
        again = api.get("/v1/pageviews", params=params)
        assert again.content == first.content
        assert (answers.hits, answers.misses) == (hits + 1, misses)

        post(api, url, ["v-1", "v-3", "v-4"])
        # A new commit (the suite's stand-in of a micro-batch, which saves a second Spark run):
        # the cached answer is stale.
        log = read_log(bare)
        with redis_of(bare) as r:
            commit_realtime(r, log, end_offsets(log))
        after = api.get("/v1/pageviews", params=params).json()
        assert after["total"] == 5 == recount(bare, url, after)
        assert after["covers"]["realtime_offsets"] != body["covers"]["realtime_offsets"]
        assert (answers.hits, answers.misses, answers.stale) == (hits + 1, misses + 1, 1)

        visitors = [api.get("/v1/unique-visitors", params=params).json() for _ in range(2)]
        assert visitors[0] == visitors[1] and visitors[0]["total"]["estimate"] == 4
        assert answers.hits == hits + 2

        # Read-your-writes queries are never answered from the cache.
        waited = api.get("/v1/pageviews", params={**params, "wait_ms": 1000})
        assert waited.status_code == 200 and waited.json()["total"] == 5
        assert answers.hits == hits + 2


def test_the_stamp_changes_with_every_write_of_the_realtime_state(bare: Settings) -> None:
    r = redis_of(bare)
    served = keys.decode_served(r.get(keys.SERVED))
    day = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    name = keys.realtime_key(served.gen, "site", "stamp.example.com", day)

    async def stamps(*changes: Any) -> list[Hashable | None]:
        reader = RedisRealtimeReader(connect(bare))
        try:
            seen = [(await reader.snapshot((), ())).stamp]
            for change in changes:
                seen.append((await reader.snapshot((), ())).stamp)  # nothing written between
                assert seen[-1] == seen[-2]
                change()
                seen.append((await reader.snapshot((), ())).stamp)
                # The lean connection's read of the stamp (stores.redis.stamp) gives the same.
                assert await reader.stamp() == seen[-1]
            return seen
        finally:
            await reader.aclose()

    views = keys.realtime_views_key(served.gen)
    try:
        seen = asyncio.run(
            stamps(
                lambda: commit(r, [name], served.cut),
                lambda: commit(r, [name], served.cut),
                lambda: r.sadd(views, keys.VIEWS_SENTINEL, "site@x"),
                lambda: r.set(keys.SERVED, keys.encode_served(Served(served.gen, {**served.cut, 99: 1}))),
            )
        )
    finally:
        r.set(keys.SERVED, keys.encode_served(served))
        r.delete(name, views)
        r.close()
    after_changes = seen[2::2]
    assert None not in after_changes and len(set(after_changes)) == len(after_changes)
