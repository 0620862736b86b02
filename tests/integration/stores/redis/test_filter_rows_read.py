"""The filter table's realtime rows on a Redis of its own: the sink's lists and their counts, written
in a transaction with the commit record, read back by the reader's ``lambda_filters_*`` function with
the served pointer, the commit and the counted views at one instant, the lists only within the
reader's budget."""

from __future__ import annotations

import asyncio
import datetime
import threading
import time

import pytest
import redis

from serving_layer.model import COUNTS_ONLY, FilterRowsBudget, RealtimeUnavailable, Served, SpeedCommit
from stores.redis import keys
from stores.redis.filter_rows import FilterRowsSink, decode_blobs
from stores.redis.reader import RedisRealtimeReader, connect
from stores.redis.teardown import drop_generations
from tests.integration.filters_check import assert_counts_match_lists
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
                # Exactly the micro-batches the commit names: one stream per day and batch, and
                # counts of exactly their rows.
                assert len(snap.blobs) == 2 * n, (len(snap.blobs), snap.commit)
                table = decode_blobs(snap.blobs)
                assert snap.rows == table.num_rows == 2 * n and not snap.withheld
                assert snap.nbytes >= sum(map(len, snap.blobs)) + 0.95 * table.nbytes
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
    batches = keys.decode_commit(r.get(keys.SPEED_COMMIT)).batch_id + 1
    assert assert_counts_match_lists(r) == 3 * batches  # each batch: a row per day, one of another site


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
            # The lists and their counts go with their generation.
            assert int(r.sismember(keys.REALTIME_GENS, 1))
            assert r.exists(keys.filter_sizes_key(1, SITE), keys.filter_sizes_key(1, "other.example")) == 2
            drop_generations(r, [1])
            gone = await reader.filter_rows_snapshot(SITE, DAYS)
            assert gone.blobs == [] and gone.views is None and gone.rows == gone.nbytes == 0
            assert r.exists(keys.filter_sizes_key(1, SITE), keys.filter_rows_key(1, SITE, DAYS[0])) == 0
        finally:
            await client.aclose()

    asyncio.run(run())


def lranges(r: redis.Redis) -> int:
    """The LRANGE commands Redis has run since its stats were reset (those of functions included)."""
    stats: dict[str, dict[str, int]] = r.info("commandstats")
    return int(stats.get("cmdstat_lrange", {}).get("calls", 0))


def test_a_read_over_its_budget_returns_the_counts_alone(own_redis: OwnRedis) -> None:  # noqa: F811
    r = redis.Redis(port=own_redis.port)
    r.set(keys.SERVED, keys.encode_served(Served(2, {0: 0})))
    for batch_id in range(3):
        commit_batch(r, 2, batch_id)
    commit_batch(r, 5, 3)  # another generation's rows: not counted for the served one

    async def run() -> None:
        client = connect(settings_of(own_redis.port))
        reader = RedisRealtimeReader(client)
        try:
            everything = await reader.filter_rows_snapshot(SITE, DAYS)
            rows, nbytes = everything.rows, everything.nbytes
            assert rows == decode_blobs(everything.blobs).num_rows == 6 and not everything.withheld
            r.config_resetstat()

            async def read(budget: FilterRowsBudget) -> bool:
                """Whether the read within ``budget`` fetched the lists; checks it against LRANGE's
                count and its counts against the lists'."""
                before = lranges(r)
                snap = await reader.filter_rows_snapshot(SITE, DAYS, budget)
                assert (snap.rows, snap.nbytes, snap.served) == (rows, nbytes, Served(2, {0: 0}))
                assert snap.views == everything.views
                assert snap.stamp == everything.stamp and snap.commit == everything.commit
                fetched = lranges(r) - before
                if snap.withheld:
                    assert snap.blobs == [] and fetched == 0
                else:
                    assert snap.blobs == everything.blobs and fetched == len(DAYS)
                return not snap.withheld

            assert await read(FilterRowsBudget(2, rows, nbytes))
            assert not await read(FilterRowsBudget(2, rows - 1, nbytes))
            assert not await read(FilterRowsBudget(2, rows, nbytes - 1))
            assert not await read(FilterRowsBudget(5, rows, nbytes))  # for another generation
            assert not await read(FilterRowsBudget(2, -1, nbytes))
            assert not await read(COUNTS_ONLY)
            # The other generation's counts are its own; a site or days without rows count none.
            r.set(keys.SERVED, keys.encode_served(Served(5, {0: 0})))
            five = await reader.filter_rows_snapshot(SITE, DAYS, FilterRowsBudget(5, 2, nbytes))
            assert five.rows == 2 and len(five.blobs) == 2 and not five.withheld
            none = await reader.filter_rows_snapshot("absent.example", DAYS, FilterRowsBudget(5, 0, 0))
            assert (none.rows, none.nbytes, none.blobs, none.withheld) == (0, 0, [], False)
            days = await reader.filter_rows_snapshot(SITE, (), FilterRowsBudget(5, 0, 0))
            assert (days.rows, days.blobs, days.withheld) == (0, [], False)
        finally:
            await client.aclose()

    asyncio.run(run())
    assert assert_counts_match_lists(r) == 3 * 3 + 3


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
