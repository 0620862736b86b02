"""The read half of the realtime views on Redis (stores.base.RealtimeReader): the served pointer
and the served generation's realtime views, read in one MULTI/EXEC transaction.

Redis runs a transaction's commands back to back, so ``GET served`` and the ``HMGET`` s of the
realtime hashes see the same instant: either before a generation switch (old generation's pointer
and its realtime keys) or after it (the new ones), never a mix that would drop or double count the
events between the two cuts. The realtime keys depend on the served generation, so the reader
guesses it (the last one seen), and runs the transaction again in the rare case the pointer it
returns names another generation.

The transaction is one round trip of redis-py's asyncio pipeline (``pipeline(transaction=True)``),
with hiredis as its parser and raw bytes back (nothing is decoded that the merge does not need).
The client comes from the settings' Redis URL, so a password or TLS (``rediss://``) is the URL's
business. A Redis that is down, restarting or not answering becomes RealtimeUnavailable, the API's
cue to answer from the batch views alone, flagged partial.

Two settings of :func:`connect` are there for CPU, measured by timing this reader's snapshots
against a local Redis (client on one core, 2-core machine, CPU per snapshot): plain redis-py
0.59 / 3.0 / 3.9 ms for 2 hashes of 24 fields / 30 such hashes / 100 one-field hashes and 2
rankings; with hiredis packing and no per-reply timeout 0.34-0.39 / 1.0-1.3 / 1.7 ms. The
hand-written client this replaced took 0.15 / 0.57-0.62 / 0.63 ms: redis-py still reads every
reply of a transaction through several Python calls.

Why the library all the same: the API bench (``python -m bench.api --events 1000000 --duration
10``, same machine, same data, only this change, runs alternated, machine load 2-3) gave with the
hand-written client / with this one: 7-day hourly pageviews of a URL 500 / 444 requests/s (1.70 /
2.01 ms of worker CPU per request), 7-day unique visitors 451 / 405 (1.92 / 2.20 ms), 30-day
pageviews of a site (33 commands per transaction) 631 / 470 (1.33 / 1.88 ms). The hand-written
client was 11-13% faster on two of the three queries and 34% on the third, 19% in geometric mean:
short of the 20% that would pay for a wire client of our own, which also had no AUTH or TLS.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar, cast

import hiredis
import orjson
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection, Connection, SSLConnection, UnixDomainSocketConnection
from redis.backoff import NoBackoff
from redis.connection import HiredisRespSerializer
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from redis.typing import EncodableT

from config.settings import Settings
from serving_layer.model import (
    HashRead,
    RankRead,
    RealtimeSnapshot,
    RealtimeUnavailable,
    Served,
    SpeedCommit,
)
from stores.redis import keys
from stores.redis.visit_state import flags_key

T = TypeVar("T")
MAX_ATTEMPTS = 5
UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, OSError)
"""What makes Redis unavailable to a query (a reply error, a bug, still propagates)."""
_SERIALIZER = HiredisRespSerializer()


def _packed(command: Iterable[EncodableT]) -> bytes:
    """One command in the protocol, packed by hiredis; a multi-word name (``CLIENT SETINFO``) goes
    through redis-py's own hiredis serializer, which splits it."""
    args = tuple(command)
    name = args[0]
    if (isinstance(name, str) and " " in name) or (isinstance(name, bytes) and b" " in name):
        return b"".join(_SERIALIZER.pack(*cast(Any, args)))
    packed: bytes = hiredis.pack_command(cast(Any, args))
    return packed


class _HiredisPacking(AbstractConnection):
    """Commands packed by hiredis in one call each, as redis-py's synchronous connections pack them.

    redis-py's asyncio connections pack in Python, argument by argument (its encoder called for
    each): for a transaction of 30 ``HMGET`` s of 24 fields that was more than half of the read's
    CPU (module docstring). The multi-word check keeps commands such as ``CLIENT SETINFO``, which
    redis-py sends on connect, packed as redis-py packs them.
    """

    def pack_command(self, *args: EncodableT) -> list[bytes]:
        return [_packed(args)]

    def pack_commands(self, commands: Iterable[Iterable[EncodableT]]) -> list[bytes]:
        return [b"".join(map(_packed, commands))]


class _TcpConnection(_HiredisPacking, Connection):
    pass


class _TlsConnection(_HiredisPacking, SSLConnection):
    pass


class _UnixConnection(_HiredisPacking, UnixDomainSocketConnection):
    pass


_PACKED: dict[type[AbstractConnection], type[AbstractConnection]] = {
    Connection: _TcpConnection,
    SSLConnection: _TlsConnection,
    UnixDomainSocketConnection: _UnixConnection,
}


def connect(settings: Settings) -> Redis:
    """The API's Redis client, from the settings' Redis URL: raw bytes (``decode_responses=False``),
    RESP3 (scores come back as numbers), a connect timeout, and one immediate retry.

    The retry is for a Redis restart: the pooled connections are dead then, and the first query
    after it should not fail for that; it runs on a fresh connection. A Redis that is really down
    fails both attempts, and the query is answered partial.

    Replies have no per-read timeout (``socket_timeout=None``): redis-py arms one for every reply,
    35 per transaction of a 30-day query, and that cost a third of the read's CPU. The reader bounds
    each of its calls as a whole instead (:class:`RedisRealtimeReader`), by the same
    ``api_redis_timeout_ms``.
    """
    timeout = settings.api_redis_timeout_ms / 1000
    client = Redis.from_url(
        settings.redis_url,
        socket_timeout=None,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), retries=1),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
        decode_responses=False,
        protocol=3,
    )
    pool = client.connection_pool
    pool.connection_class = _PACKED.get(pool.connection_class, pool.connection_class)
    return client


class _Decoded(Generic[T]):
    """Decodes a value once per distinct raw value (the pointer changes rarely, the commit once per
    micro-batch), with the protocol's own decoder."""

    def __init__(self, decode: Callable[[bytes | str | None], T]) -> None:
        self.decode = decode
        self.raw: bytes | str | None = None
        self.value: T = decode(None)

    def get(self, raw: bytes | str | None) -> T:
        if raw != self.raw:
            self.value = self.decode(raw)
            self.raw = raw
        return self.value


def _decode_views(raw: Any) -> frozenset[str] | None:
    """SMEMBERS of a generation's counted views: None when the set does not exist yet."""
    if not raw:
        return None
    members = frozenset(m.decode() if isinstance(m, bytes) else str(m) for m in raw)
    return members - {keys.VIEWS_SENTINEL}


class RedisRealtimeReader:
    """Reads realtime snapshots with ``client`` (made by :func:`connect`).

    Every call waits for Redis at most ``timeout_s`` as a whole (connection, retry and replies; by
    default the client's connect timeout, ``api_redis_timeout_ms``): a Redis that does not answer
    must not hold a query that the batch views can answer. Past it, or when Redis is down, the call
    raises RealtimeUnavailable; a cancelled exchange closes its connection, so none is reused with a
    reply still pending.
    """

    def __init__(self, client: Redis, timeout_s: float | None = None) -> None:
        self.client = client
        connect_timeout = client.connection_pool.connection_kwargs.get("socket_connect_timeout")
        self.timeout_s = timeout_s if timeout_s is not None else connect_timeout
        self._gen: int | None = None
        self._served = _Decoded(keys.decode_served)
        self._commit = _Decoded(keys.decode_commit)

    async def _call(self, call: Awaitable[T]) -> T:
        try:
            async with asyncio.timeout(self.timeout_s):
                return await call
        except TimeoutError as exc:
            raise RealtimeUnavailable(f"Redis: no answer within {self.timeout_s} s") from exc
        except UNAVAILABLE as exc:
            raise RealtimeUnavailable(f"Redis: {exc}") from exc

    def _served_of(self, raw: bytes | str | None) -> Served | None:
        """None when nothing is served yet."""
        return None if raw is None else self._served.get(raw)

    def _commit_of(self, raw: bytes | str | None) -> SpeedCommit:
        return self._commit.get(raw)

    async def snapshot(self, hashes: Sequence[HashRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        return await self._call(self._snapshot(hashes, ranks))

    async def _transaction(
        self, gen: int, hashes: Sequence[HashRead], ranks: Sequence[RankRead]
    ) -> list[Any]:
        """The pointer, the commit, then the reads of generation ``gen``: one MULTI/EXEC."""
        pipe = self.client.pipeline(transaction=True)
        # execute_command queues the raw command (the typed helpers only add argument handling).
        queue = pipe.execute_command
        queue("GET", keys.SERVED)
        queue("GET", keys.SPEED_COMMIT)
        for h in hashes:
            queue("HMGET", keys.realtime_key(gen, h.view, h.key, h.day), *h.fields)
        for r in ranks:
            queue("ZRANGE", keys.realtime_rank_key(gen, r.view, r.day), 0, -1, "WITHSCORES")
        queue("SMEMBERS", keys.realtime_views_key(gen))
        queue("SMEMBERS", flags_key(gen))
        return await pipe.execute()

    async def _snapshot(self, hashes: Sequence[HashRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        for _ in range(MAX_ATTEMPTS):
            gen = self._gen
            if gen is None:
                raw_served, raw_commit = await self.client.mget(keys.SERVED, keys.SPEED_COMMIT)
                served = self._served_of(raw_served)
                if served is None:
                    return RealtimeSnapshot(None, self._commit_of(raw_commit), [], [])
                gen = served.gen
            results = await self._transaction(gen, hashes, ranks)
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
            rank_values = [[(m.decode(), s) for m, s in entries] for entries in results[2 + n : -2]]
            flags = frozenset(m.decode() if isinstance(m, bytes) else str(m) for m in results[-1] or ())
            return RealtimeSnapshot(
                served, commit, hash_values, rank_values, _decode_views(results[-2]), flags
            )
        raise RealtimeUnavailable(f"the served generation changed {MAX_ATTEMPTS} times during one query")

    async def speed_stats(self) -> dict[str, object] | None:
        raw = await self._call(self.client.get(keys.SPEED_STATS))
        return None if raw is None else dict(orjson.loads(raw))

    async def ping(self) -> None:
        await self._call(self.client.ping())
