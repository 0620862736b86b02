"""stores.redis.reader without a Redis: a Redis that is down or does not answer makes the
reader raise RealtimeUnavailable (the API then answers partial) within its deadline, and the
hiredis packing sends exactly what redis-py's own packing sends. The reads themselves run against a
real Redis in tests/integration."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from redis.asyncio.connection import Connection

from config.settings import Settings
from serving_layer.model import DayRead, Measure, RealtimeUnavailable
from stores.redis.reader import RedisRealtimeReader, connect

READS = [DayRead("site", "shop.example.com", "2026-11-20", ((Measure.PAGEVIEWS, 0), (Measure.PAGEVIEWS, 1)))]


def settings_for(port: int, timeout_ms: int = 200) -> Settings:
    return Settings(redis_host="127.0.0.1", redis_port=port, redis_db=3, api_redis_timeout_ms=timeout_ms)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_redis_that_does_not_answer_is_unavailable_within_the_deadline() -> None:
    async def run() -> float:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while await reader.read(1 << 16):
                pass  # reads every command, answers none

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = connect(settings_for(port))
        realtime = RedisRealtimeReader(client)
        try:
            started = time.monotonic()
            with pytest.raises(RealtimeUnavailable, match="no answer within"):
                await realtime.snapshot(READS, [])
            with pytest.raises(RealtimeUnavailable):
                await realtime.ping()
            return time.monotonic() - started
        finally:
            await client.aclose()
            server.close()

    assert asyncio.run(run()) < 2.0  # two calls of a 0.2 s deadline, with room for a busy machine


def test_a_redis_that_is_down_is_unavailable() -> None:
    async def run() -> None:
        client = connect(settings_for(free_port()))
        realtime = RedisRealtimeReader(client)
        try:
            with pytest.raises(RealtimeUnavailable, match="Redis"):
                await realtime.snapshot(READS, [])
            with pytest.raises(RealtimeUnavailable):
                await realtime.speed_stats()
        finally:
            await client.aclose()

    asyncio.run(run())


def test_hiredis_packing_sends_what_redis_py_packs() -> None:
    packed = connect(settings_for(free_port())).connection_pool.connection_class()
    plain = Connection()
    commands = [
        ("MULTI",),
        ("HMGET", "lambda:rt:7:site:shop.example.com:2026-11-20", "pv:00", "sk:23"),
        ("ZRANGE", b"lambda:rank:7:url:2026-11-20", 0, -1, "WITHSCORES"),
        ("CLIENT SETINFO", "LIB-NAME", "redis-py"),
        ("EXEC",),
    ]
    assert b"".join(packed.pack_commands(commands)) == b"".join(plain.pack_commands(commands))
    for command in commands:
        assert b"".join(packed.pack_command(*command)) == b"".join(plain.pack_command(*command))
