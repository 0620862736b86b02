"""stores.redis.stamp against small RESP servers (the stamp itself is read on the real Redis in
tests/integration/api/test_answer_cache.py): concurrent calls each get the reply to their own
command, a caller that gave up does not shift the replies of the next ones, and a Redis that is
down or silent makes the reader's stamp unavailable within its deadline."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable

import hiredis
import pytest

from config.settings import Settings
from serving_layer.model import RealtimeUnavailable
from stores.redis.reader import RedisRealtimeReader, connect


def reply(n: int) -> bytes:
    """The n-th command's reply: a stamp whose served pointer names n."""
    served = f"served-{n}".encode()
    return b"*4\r\n$%d\r\n%s\r\n$6\r\ncommit\r\n*0\r\n*0\r\n" % (len(served), served)


Delay = Callable[[int], Awaitable[None]]


async def numbering_server(delay: Delay) -> tuple[asyncio.Server, int]:
    """Answers the n-th command (counted over all connections) with :func:`reply` of n, after
    ``delay(n)``."""
    counter = iter(range(1, 1 << 30))

    async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        commands = hiredis.Reader()
        while data := await r.read(1 << 16):
            commands.feed(data)
            while commands.gets() is not False:
                n = next(counter)
                await delay(n)
                w.write(reply(n))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def reader_for(port: int, timeout_ms: int = 200) -> RedisRealtimeReader:
    settings = Settings(redis_host="127.0.0.1", redis_port=port, redis_db=0, api_redis_timeout_ms=timeout_ms)
    return RedisRealtimeReader(connect(settings))


def test_concurrent_calls_each_get_their_own_reply_and_a_caller_that_gave_up_shifts_none() -> None:
    async def slow_first(n: int) -> None:
        if n == 1:
            await asyncio.sleep(0.3)

    async def run() -> tuple[list[bytes], list[bytes]]:
        server, port = await numbering_server(slow_first)
        reader = reader_for(port, timeout_ms=100)
        try:
            with pytest.raises(RealtimeUnavailable):
                await reader.stamp()  # reply 1 comes after the deadline: dropped when it comes
            await asyncio.sleep(0.4)
            after = [served_of(await reader.stamp()) for _ in range(2)]
            together = [served_of(s) for s in await asyncio.gather(*(reader.stamp() for _ in range(20)))]
            return after, together
        finally:
            await reader.aclose()
            server.close()

    after, together = asyncio.run(run())
    assert after == [b"served-2", b"served-3"]
    assert sorted(together) == sorted(f"served-{n}".encode() for n in range(4, 24))


def served_of(stamp: object) -> bytes:
    assert isinstance(stamp, tuple)
    served: bytes = stamp[0]
    return served


def test_a_redis_that_is_down_or_silent_makes_the_stamp_unavailable_within_the_deadline() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed: int = s.getsockname()[1]

    async def silent(n: int) -> None:
        await asyncio.sleep(3600)

    async def run() -> list[float]:
        server, port = await numbering_server(silent)
        took = []
        try:
            for p in (closed, port):
                reader = reader_for(p)
                t0 = time.monotonic()
                with pytest.raises(RealtimeUnavailable):
                    await reader.stamp()
                took.append(time.monotonic() - t0)
                await reader.aclose()
        finally:
            server.close()
        return took

    assert all(t < 1.5 for t in asyncio.run(run()))
