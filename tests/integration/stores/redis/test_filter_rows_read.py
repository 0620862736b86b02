"""The filter table's realtime rows on a Redis of its own: the sink's lists, written in a
transaction with the commit record, read back by the reader's ``lambda_filters_*`` function with the
served pointer, the commit and the counted views at one instant."""

from __future__ import annotations

import asyncio
import datetime
import threading
import time

import pytest
import redis

from serving_layer.model import RealtimeUnavailable, Served, SpeedCommit
from stores.redis import keys
from stores.redis.filter_rows import FilterRowsSink, decode_blobs
from stores.redis.reader import RedisRealtimeReader, connect
from stores.redis.teardown import drop_generations
from tests.integration.stores.redis.test_redis_reader import OwnRedis, own_redis, settings_of  # noqa: F401
from tests.unit.stores.redis.test_filter_rows import row

SITE = "shop.example.com"
DAYS = ("2026-11-20", "2026-11-21")
MARK = "filters@0123456789abcdef"


def commit_batch(r: redis.Redis, gen: int, batch_id: int) -> None:
    """One micro-batch's rows (one row per day, its visitor the batch id) committed with the batch
    id, as speed_layer.commit does: the lists' RPUSHes and the commit record in one MULTI."""
    sink = FilterRowsSink()
    sink.add(gen, [row(SITE, datetime.date.fromisoformat(day), 3, "/", batch_id) for day in DAYS])
    sink.add(gen, [row("other.example", datetime.date.fromisoformat(DAYS[0]), 3, "/", batch_id)])
    sink.prepare()
    with r.pipeline(transaction=True) as pipe:
        assert sink.flush(pipe) == 3
        pipe.sadd(keys.realtime_views_key(gen), keys.VIEWS_SENTINEL, MARK)
        pipe.set(keys.SPEED_COMMIT, keys.encode_commit(SpeedCommit(batch_id, {0: batch_id + 1})))
        pipe.execute()


def test_the_rows_are_read_with_the_commit_that_wrote_them(own_redis: OwnRedis) -> None:  # noqa: F811
    r = redis.Redis(port=own_redis.port)
    r.set(keys.SERVED, keys.encode_served(Served(4, {0: 0})))
    commit_batch(r, 4, 0)
    stop = threading.Event()

    def write() -> None:
        batch_id = 0
        while not stop.is_set():
            batch_id += 1
            commit_batch(r, 4, batch_id)

    async def read(seconds: float) -> set[int]:
        client = connect(settings_of(own_redis.port))
        reader = RedisRealtimeReader(client)
        seen: set[int] = set()
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                snap = await reader.filter_rows_snapshot(SITE, DAYS)
                assert snap.served == Served(4, {0: 0})
                assert snap.views == frozenset({MARK})
                n = snap.commit.batch_id + 1
                # Exactly the micro-batches the commit names: one stream per day and batch.
                assert len(snap.blobs) == 2 * n, (len(snap.blobs), snap.commit)
                table = decode_blobs(snap.blobs)
                assert table.column("visitor").to_pylist() == list(range(n)) * 2
                assert {d.isoformat() for d in table.column("day").to_pylist()} == set(DAYS)
                assert set(table.column("site").to_pylist()) == {SITE}
                assert snap.stamp is not None
                seen.add(n)
        finally:
            await client.aclose()
        return seen

    writer = threading.Thread(target=write)
    writer.start()
    try:
        seen = asyncio.run(read(3.0))
    finally:
        stop.set()
        writer.join()
    assert len(seen) >= 10, f"the reads saw only {sorted(seen)} micro-batches"


def test_one_day_some_days_nothing_served_and_teardown(own_redis: OwnRedis) -> None:  # noqa: F811
    r = redis.Redis(port=own_redis.port)
    commit_batch(r, 1, 0)

    async def run() -> None:
        client = connect(settings_of(own_redis.port))
        reader = RedisRealtimeReader(client)
        try:
            nothing = await reader.filter_rows_snapshot(SITE, DAYS)
            assert nothing.served is None and nothing.views is None and nothing.blobs == []
            assert nothing.commit == SpeedCommit(0, {0: 1})
            r.set(keys.SERVED, keys.encode_served(Served(1, {0: 0})))
            one = await reader.filter_rows_snapshot(SITE, DAYS[1:])
            want = [row(SITE, datetime.date.fromisoformat(DAYS[1]), 3, "/", 0)]
            assert decode_blobs(one.blobs).to_pylist() == want
            other = await reader.filter_rows_snapshot("other.example", DAYS)
            assert len(other.blobs) == 1
            none = await reader.filter_rows_snapshot("absent.example", DAYS)
            assert none.blobs == [] and decode_blobs(none.blobs).num_rows == 0
            assert await reader.filter_rows_snapshot(SITE, ()) == await reader.filter_rows_snapshot(SITE, [])
            # The lists go with their generation.
            assert int(r.sismember(keys.REALTIME_GENS, 1))
            drop_generations(r, [1])
            gone = await reader.filter_rows_snapshot(SITE, DAYS)
            assert gone.blobs == [] and gone.views is None
        finally:
            await client.aclose()

    asyncio.run(run())


def test_a_redis_that_is_down_makes_the_read_unavailable(own_redis: OwnRedis) -> None:  # noqa: F811
    async def run() -> None:
        client = connect(settings_of(own_redis.port))
        try:
            own_redis.stop()
            with pytest.raises(RealtimeUnavailable):
                await RedisRealtimeReader(client).filter_rows_snapshot(SITE, DAYS)
        finally:
            await client.aclose()
            own_redis.start()

    asyncio.run(run())
