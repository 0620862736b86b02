"""RealtimeReader on Redis: the served pointer and the served generation's realtime views, read in
one MULTI/EXEC transaction.

Redis runs a transaction's commands back to back, so ``GET served`` and the ``HMGET`` s of the
realtime hashes see the same instant: either before a generation switch (old generation's pointer
and its realtime keys) or after it (the new ones), never a mix that would drop or double count the
events between the two cuts. The realtime keys depend on the served generation, so the reader
guesses it (the last one seen), and runs the transaction again in the rare case the pointer it
returns names another generation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import hiredis
import orjson
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from config.settings import Settings
from generations import keys
from serving_layer.model import (
    HashRead,
    RankRead,
    RealtimeSnapshot,
    RealtimeUnavailable,
    Served,
    SpeedCommit,
)

MAX_ATTEMPTS = 5
UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, OSError)


class _HiredisPackingConnection(aioredis.Connection):
    """Packs commands with hiredis' C packer. redis-py's asyncio connection packs every argument
    in Python, and a 7-day hourly query sends ~200 field names: that packing was a third of a
    query's CPU time."""

    def pack_command(self, *args: Any) -> list[bytes]:
        if isinstance(args[0], str) and " " in args[0]:
            args = (*args[0].split(), *args[1:])  # "CLIENT SETINFO" and the like
        return [hiredis.pack_command(args)]


def connect(settings: Settings) -> aioredis.Redis:
    """A client that fails fast: a query must not wait seconds for a Redis that is down, it falls
    back to a batch-only answer instead (redis-py would otherwise retry with back-off). One
    immediate retry reconnects transparently after a Redis restart."""
    timeout = settings.api_redis_timeout_ms / 1000
    pool = aioredis.ConnectionPool(
        connection_class=_HiredisPackingConnection,
        host=settings.redis_host,
        port=settings.redis_port,
        db=settings.redis_db,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 1),
        max_connections=256,
    )
    return aioredis.Redis(connection_pool=pool)


class _Decoded:
    """Parses a JSON value once per distinct raw value (the pointer changes rarely)."""

    def __init__(self) -> None:
        self.raw: bytes | str | None = None
        self.value: Any = None

    def get(self, raw: bytes | str | None) -> Any:
        if raw != self.raw:
            self.value = None if raw is None else orjson.loads(raw)
            self.raw = raw
        return self.value


class RedisRealtimeReader:
    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self._gen: int | None = None
        self._served = _Decoded()
        self._commit = _Decoded()

    def _served_of(self, raw: bytes | str | None) -> Served | None:
        data = self._served.get(raw)
        if data is None:
            return None
        return Served(int(data["gen"]), {int(p): int(o) for p, o in data["cut"].items()})

    def _commit_of(self, raw: bytes | str | None) -> SpeedCommit:
        data = self._commit.get(raw)
        if data is None:
            return SpeedCommit()
        return SpeedCommit(int(data["batch_id"]), {int(p): int(o) for p, o in data["offsets"].items()})

    async def snapshot(self, hashes: Sequence[HashRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        try:
            return await self._snapshot(hashes, ranks)
        except UNAVAILABLE as exc:
            raise RealtimeUnavailable(f"Redis: {exc}") from exc

    async def _snapshot(self, hashes: Sequence[HashRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        for _ in range(MAX_ATTEMPTS):
            gen = self._gen
            if gen is None:
                served = self._served_of(await self.client.get(keys.SERVED))
                if served is None:
                    commit = self._commit_of(await self.client.get(keys.SPEED_COMMIT))
                    return RealtimeSnapshot(None, commit, [], [])
                gen = served.gen
            pipe = self.client.pipeline(transaction=True)
            pipe.get(keys.SERVED)
            pipe.get(keys.SPEED_COMMIT)
            for h in hashes:
                pipe.hmget(keys.realtime_key(gen, h.view, h.key, h.day), list(h.fields))
            for r in ranks:
                pipe.zrange(keys.realtime_rank_key(gen, r.view, r.day), 0, -1, withscores=True)
            results = await pipe.execute()
            served = self._served_of(results[0])
            commit = self._commit_of(results[1])
            if served is None:
                self._gen = None
                return RealtimeSnapshot(None, commit, [], [])
            if served.gen != gen:
                self._gen = served.gen  # switched since the last query: read the new keys
                continue
            self._gen = gen
            n = len(hashes)
            hash_values = [
                {f: v for f, v in zip(h.fields, values, strict=True) if v is not None}
                for h, values in zip(hashes, results[2 : 2 + n], strict=True)
            ]
            rank_values = [[(m.decode(), float(s)) for m, s in entries] for entries in results[2 + n :]]
            return RealtimeSnapshot(served, commit, hash_values, rank_values)
        raise RealtimeUnavailable(f"the served generation changed {MAX_ATTEMPTS} times during one query")

    async def speed_stats(self) -> dict[str, object] | None:
        try:
            raw = await self.client.get(keys.SPEED_STATS)
        except UNAVAILABLE as exc:
            raise RealtimeUnavailable(f"Redis: {exc}") from exc
        return None if raw is None else dict(orjson.loads(raw))

    async def ping(self) -> None:
        try:
            await self.client.ping()
        except UNAVAILABLE as exc:
            raise RealtimeUnavailable(f"Redis: {exc}") from exc
