"""stores.redis.reader on a Redis of its own: its one call (the Redis function of snapshot.lua) reads
the served pointer, the commit and the pointed generation's keys at one instant, whatever switches
the generation meanwhile; the function is loaded where Redis does not have it (a new Redis, a
restart without persistence, ``FUNCTION FLUSH``), and two releases' functions live side by side."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from config.settings import Settings
from serving_layer.model import DayRead, Measure, RankRead, RealtimeDay, Served, SpeedCommit
from stores.redis import keys
from stores.redis.reader import SNAPSHOT_LUA, RedisRealtimeReader, SnapshotFunction, connect
from stores.redis.visit_state import flags_key

DAYS = ("2026-11-20", "2026-11-21")
CELLS = ((Measure.PAGEVIEWS, None), (Measure.PAGEVIEWS, 0), (Measure.PAGEVIEWS, 1))
READS = [DayRead("site", "shop.example.com", day, CELLS) for day in DAYS]
RANKS = [RankRead("site", day) for day in DAYS]


@dataclass
class OwnRedis:
    """A redis-server without persistence on a free port, which a test may stop and start again."""

    port: int
    dir: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        ephemeral = ["--save", "", "--appendonly", "no", "--dir", str(self.dir)]
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), *ephemeral],
            stdout=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        for _ in range(200):
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    server = OwnRedis(port, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def settings_of(port: int) -> Settings:
    return Settings(redis_host="127.0.0.1", redis_port=port, redis_db=0, api_redis_timeout_ms=2000)


def publish(r: redis.Redis, gen: int) -> None:
    """Generation ``gen`` served, with values that name it, and ``gen - 1``'s keys deleted, in one
    transaction: a reader that took the pointer and the keys at two instants would see the pointer
    of one generation with the (deleted) keys of the other."""
    with r.pipeline(transaction=True) as pipe:
        for day in DAYS:
            pipe.hset(
                keys.realtime_key(gen, "site", "shop.example.com", day), mapping={"pv": gen, "pv:01": gen}
            )
            pipe.zadd(keys.realtime_rank_key(gen, "site", day), {"shop.example.com": gen})
        pipe.sadd(keys.realtime_views_key(gen), keys.VIEWS_SENTINEL, f"site@{gen}")
        pipe.sadd(flags_key(gen), f"shop.example.com|{gen}")
        pipe.set(keys.SERVED, keys.encode_served(Served(gen, {0: gen})))
        pipe.set(keys.SPEED_COMMIT, keys.encode_commit(SpeedCommit(gen, {0: gen})))
        old = gen - 1
        pipe.delete(
            *(keys.realtime_key(old, "site", "shop.example.com", day) for day in DAYS),
            *(keys.realtime_rank_key(old, "site", day) for day in DAYS),
            keys.realtime_views_key(old),
            flags_key(old),
        )
        pipe.execute()


def test_one_call_reads_one_generation_while_generations_switch(own_redis: OwnRedis) -> None:
    r = redis.Redis(port=own_redis.port)
    publish(r, 1)
    stop = threading.Event()

    def switch() -> None:
        gen = 1
        while not stop.is_set():
            gen += 1
            publish(r, gen)

    async def read(seconds: float) -> set[int]:
        client = connect(settings_of(own_redis.port))
        reader = RedisRealtimeReader(client)
        seen: set[int] = set()
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                snap = await reader.snapshot(READS, RANKS)
                assert snap.served is not None
                g = snap.served.gen
                assert snap.commit.batch_id == g, "the commit of another instant"
                hours = (0, g, *(0,) * 22)
                assert snap.days == [RealtimeDay(pv=g, h_pv=hours)] * len(DAYS)
                assert snap.ranks == [[("shop.example.com", g)]] * len(DAYS)
                assert snap.views == frozenset({f"site@{g}"})
                assert snap.visit_flags == frozenset({("shop.example.com", str(g))})
                seen.add(g)
        finally:
            await client.aclose()
        return seen

    writer = threading.Thread(target=switch)
    writer.start()
    try:
        seen = asyncio.run(read(3.0))
    finally:
        stop.set()
        writer.join()
    assert len(seen) >= 10, f"the reads spanned only generations {sorted(seen)}"


def test_nothing_served_reads_the_commit_alone(own_redis: OwnRedis) -> None:
    r = redis.Redis(port=own_redis.port)
    r.set(keys.SPEED_COMMIT, keys.encode_commit(SpeedCommit(3, {0: 9})))

    async def run() -> None:
        client = connect(settings_of(own_redis.port))
        try:
            snap = await RedisRealtimeReader(client).snapshot(READS, RANKS)
        finally:
            await client.aclose()
        assert snap.served is None
        assert snap.commit == SpeedCommit(3, {0: 9})
        assert snap.days == [] and snap.ranks == []

    asyncio.run(run())


def test_the_function_is_loaded_again_after_a_flush_and_a_restart(own_redis: OwnRedis) -> None:
    async def snapshot_gen(reader: RedisRealtimeReader) -> int:
        snap = await reader.snapshot(READS, RANKS)
        assert snap.served is not None
        assert snap.days[0].pv == snap.served.gen
        return snap.served.gen

    async def run() -> None:
        client = connect(settings_of(own_redis.port))
        reader = RedisRealtimeReader(client)
        try:
            publish(redis.Redis(port=own_redis.port), 5)
            assert await snapshot_gen(reader) == 5
            redis.Redis(port=own_redis.port).function_flush()
            assert await snapshot_gen(reader) == 5
            own_redis.stop()  # no persistence: data and functions are gone
            own_redis.start()
            publish(redis.Redis(port=own_redis.port), 6)
            assert await snapshot_gen(reader) == 6  # a fresh connection, the function loaded again
        finally:
            await client.aclose()

    asyncio.run(run())


def test_two_releases_of_the_function_live_side_by_side(own_redis: OwnRedis) -> None:
    publish(redis.Redis(port=own_redis.port), 2)
    ours = SnapshotFunction.from_file()
    text = SNAPSHOT_LUA.read_text() + "\n-- another release\n"
    path = own_redis.dir / "other.lua"
    path.write_text(text)
    other = SnapshotFunction.from_file(path)
    assert other.name != ours.name

    async def run() -> None:
        client = connect(settings_of(own_redis.port))
        try:
            for function in (ours, other, ours):
                snap = await RedisRealtimeReader(client, function=function).snapshot(READS, RANKS)
                assert snap.served is not None and snap.served.gen == 2
        finally:
            await client.aclose()

    asyncio.run(run())
    names = {lib[b"library_name"] for lib in map(_pairs, redis.Redis(port=own_redis.port).function_list())}
    assert len(names) == 2


def _pairs(flat: list[object]) -> dict[object, object]:
    it = iter(flat)
    return dict(zip(it, it, strict=True))
