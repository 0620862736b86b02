"""A Redis with a password, reached through ``LAMBDA_REDIS_URI``: the API's realtime reader and the
layers' clients all take their connection from ``Settings.redis_url``, so a password (or TLS with
``rediss://``) is a setting, not code. A wrong password is a Redis the API cannot use: the reader
says unavailable (the API then answers partial), it never raises anything else."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from config.settings import Settings
from serving_layer.model import RealtimeUnavailable
from stores.redis import keys
from stores.redis.reader import RedisRealtimeReader, connect

PASSWORD = "s3cret-for-tests"


@pytest.fixture
def protected_redis(tmp_path: Path) -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    server = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--requirepass", PASSWORD]
    ephemeral = ["--save", "", "--appendonly", "no", "--dir", str(tmp_path)]
    proc = subprocess.Popen([*server, *ephemeral], stdout=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port, password=PASSWORD)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_reader_authenticates_with_the_uri_and_refuses_a_wrong_password(protected_redis: int) -> None:
    redis.Redis(port=protected_redis, password=PASSWORD).set(keys.SPEED_STATS, b'{"batch_id": 7}')

    async def stats(uri: str) -> dict[str, object] | None:
        client = connect(Settings(redis_uri=uri, api_redis_timeout_ms=1000))
        try:
            return await RedisRealtimeReader(client).speed_stats()
        finally:
            await client.aclose()

    good = f"redis://:{PASSWORD}@127.0.0.1:{protected_redis}/0"
    assert Settings(redis_uri=good).redis_url == good
    assert asyncio.run(stats(good)) == {"batch_id": 7}
    with pytest.raises(RealtimeUnavailable):
        asyncio.run(stats(f"redis://:wrong@127.0.0.1:{protected_redis}/0"))
