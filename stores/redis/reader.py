"""The read half of the realtime views on Redis (stores.realtime_views.RealtimeReader): the served pointer,
the speed layer's commit and the served generation's realtime views, read in one call of a Redis
function (``snapshot.lua``).

Exactness needs the pointer, the commit and the realtime keys seen at one instant: either before a
generation switch (the old generation's pointer and its keys) or after it (the new ones), never a
mix that would drop or double count the events between the two cuts. A Redis function runs
atomically, like a MULTI/EXEC transaction, but it can also read the pointer first and derive the
generation's keys from it server-side. So a query is one command and one round trip, whatever the
generation, with no guess of the generation to check and retry. The function returns the values as
nested arrays (hiredis parses them in C); this module decodes them into the snapshot's values
(stores.realtime_views): the serving layer never sees a field's spelling.

The same library has a second function, ``lambda_filters_*``: the filter table's realtime rows of
one site and some days (stores.redis.filter_rows), read with the pointer, the commit and the served
generation's counted views in the same way, and only within the caller's budget of rows and bytes
(:meth:`RedisRealtimeReader.filter_rows_snapshot`): the counts come first, in the same call.

The function is loaded on first use and again whenever Redis answers that it does not know it (a new
Redis, one restarted without persistence, ``FUNCTION FLUSH``); its name ends with a hash of the
script, so workers of two releases sharing a Redis each call their own. It reads keys it did not
declare (they depend on the pointer), which Redis Cluster does not allow: it is flagged
``no-cluster``. Functions need Redis 7.0 or later; the API's Redis user needs ``FCALL_RO`` and,
unless the function is loaded for it, ``FUNCTION LOAD``.

The client is redis-py's asyncio client with hiredis as its parser and raw bytes back (nothing is
decoded that the merge does not need), from the settings' Redis URL, so a password or TLS
(``rediss://``) is the URL's business. A Redis that is down, restarting or not answering becomes
RealtimeUnavailable, the API's cue to answer from the batch views alone, flagged partial.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

import hiredis
import orjson
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection, Connection, SSLConnection, UnixDomainSocketConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.connection import HiredisRespSerializer
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

from config.settings import Settings
from stores import realtime_hash
from stores.errors import RealtimeUnavailable
from stores.realtime_views import DayRead, FilterRowsBudget, FilterRowsSnapshot, RankRead, RealtimeSnapshot
from stores.redis import keys
from stores.redis.stamp import StampConnection, StampUnavailable
from stores.redis.visit_state import FLAGS_SUFFIX, decode_flags

T = TypeVar("T")
SNAPSHOT_LUA = Path(__file__).with_name("snapshot.lua")
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
    each), and a snapshot's call has an argument per key and field list it reads. The multi-word
    check keeps commands such as ``CLIENT SETINFO`` and ``FUNCTION LOAD``, which redis-py names in
    two words, packed as redis-py packs them.
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
    RESP3, a connect timeout, and one immediate retry.

    The retry is for a Redis restart: the pooled connections are dead then, and the first query
    after it should not fail for that; it runs on a fresh connection. A Redis that is really down
    fails both attempts, and the query is answered partial. It is redis-py's asyncio ``Retry``: the
    client also accepts the synchronous one, which cannot catch what an awaited command raises and
    so never retried.

    Replies have no per-read timeout (``socket_timeout=None``): redis-py would arm one for every
    reply read. The reader bounds each of its calls as a whole instead (:class:`RedisRealtimeReader`),
    by the same ``api_redis_timeout_ms``.
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


def _ranking(flat: list[bytes]) -> list[tuple[str, int]]:
    """``ZRANGE ... WITHSCORES`` as a script sees it: member, score, member, score ... (the scores
    are sums of page views: whole numbers)."""
    pairs = iter(flat)
    return [(m.decode(), int(float(s))) for m, s in zip(pairs, pairs, strict=True)]


@dataclass(frozen=True)
class SnapshotFunction:
    """The Redis function that reads a snapshot (``snapshot.lua``): its library's source and the
    function's name, both ending with a hash of the file (its ``VERSION`` placeholder), so two
    releases of the reader sharing a Redis never call each other's function."""

    name: str
    source: str

    @classmethod
    def from_file(cls, path: Path = SNAPSHOT_LUA) -> SnapshotFunction:
        text = path.read_text()
        version = hashlib.sha1(text.encode()).hexdigest()[:12]
        return cls(f"lambda_snapshot_{version}", text.replace("VERSION", version))

    @property
    def filters_name(self) -> str:
        """The library's other function: the filter table's realtime rows (``lambda_filters_*``)."""
        return self.name.replace("lambda_snapshot_", "lambda_filters_", 1)


def snapshot_args(days: Sequence[DayRead], ranks: Sequence[RankRead]) -> list[EncodableT]:
    """The function's ARGV for these reads (its layout is described in ``snapshot.lua``): each
    distinct field list once, each hash as its key suffix and the index of its field list."""
    lists: dict[tuple[str, ...], int] = {}
    listed: list[EncodableT] = []
    reads: list[EncodableT] = []
    for d in days:
        fields = realtime_hash.fields_of(d.cells)
        index = lists.get(fields)
        if index is None:
            index = lists[fields] = len(lists) + 1
            listed.append(len(fields))
            listed.extend(fields)
        reads.append(keys.hash_suffix(d.view, d.key, d.day))
        reads.append(index)
    reads.extend(keys.rank_suffix(r.view, r.day) for r in ranks)
    head: list[EncodableT] = [
        keys.REALTIME_PREFIX,
        keys.VIEWS_SUFFIX,
        FLAGS_SUFFIX,
        len(lists),
        len(days),
        len(ranks),
    ]
    return head + listed + reads


def stamp_of(reply: list[Any]) -> Hashable | None:
    """A snapshot's stamp (stores.realtime_views.RealtimeSnapshot.stamp): the served pointer, the
    commit record and the generation's sets of counted views and of visit flags, raw, as the
    function read them at one instant. The speed layer writes realtime values only in the
    transaction that also rewrites the commit record (stores.redis.handshake), whose batch id
    grows, and a generation switch rewrites the pointer; so two reads with the same stamp saw the
    same realtime values. Without a commit record (nothing committed, or a rebuild under way) there
    is no stamp."""
    if not reply[0] or reply[1] is None:
        return None
    return (reply[0], reply[1], frozenset(reply[2]), frozenset(reply[3]))


class RedisRealtimeReader:
    """Reads realtime snapshots with ``client`` (made by :func:`connect`).

    Every call waits for Redis at most ``timeout_s`` as a whole (connection, retry, loading the
    function and replies; by default the client's connect timeout, ``api_redis_timeout_ms``): a
    Redis that does not answer must not hold a query that the batch views can answer. Past it, or
    when Redis is down, the call raises RealtimeUnavailable; a cancelled exchange closes its
    connection, so none is reused with a reply still pending.
    """

    def __init__(
        self, client: Redis, timeout_s: float | None = None, function: SnapshotFunction | None = None
    ) -> None:
        self.client = client
        connect_timeout = client.connection_pool.connection_kwargs.get("socket_connect_timeout")
        self.timeout_s = timeout_s if timeout_s is not None else connect_timeout
        self.function = function or SnapshotFunction.from_file()
        self._served = _Decoded(keys.decode_served)
        self._commit = _Decoded(keys.decode_commit)
        pool = client.connection_pool
        command = ("FCALL_RO", self.function.name, 2, keys.SERVED, keys.SPEED_COMMIT, *snapshot_args((), ()))
        self._stamps = (
            StampConnection(pool.connection_kwargs, command)
            if pool.connection_class is _TcpConnection
            else None
        )

    async def _call(self, call: Awaitable[T]) -> T:
        try:
            async with asyncio.timeout(self.timeout_s):
                return await call
        except TimeoutError as exc:
            raise RealtimeUnavailable(f"Redis: no answer within {self.timeout_s} s") from exc
        except UNAVAILABLE as exc:
            raise RealtimeUnavailable(f"Redis: {exc}") from exc

    async def snapshot(self, days: Sequence[DayRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        return await self._call(self._snapshot(days, ranks))

    async def filter_rows_snapshot(
        self, site: str, days: Sequence[str], budget: FilterRowsBudget | None = None
    ) -> FilterRowsSnapshot:
        """The filter table's realtime rows of ``site`` on ``days`` (``YYYY-MM-DD``) for the served
        generation, with the served pointer, the commit, the generation's counted views and the
        lists' counted rows and bytes, read at one instant by the library's ``lambda_filters_*``
        function (stores.realtime_views.FilterRowsSnapshot; stores.redis.filter_rows.decode_blobs
        turns the blobs into rows). With a ``budget`` the lists are read only within it (else the
        snapshot is ``withheld``: the counts alone); without one, whatever their size."""
        return await self._call(self._filter_rows_snapshot(site, days, budget))

    async def _filter_rows_snapshot(
        self, site: str, days: Sequence[str], budget: FilterRowsBudget | None
    ) -> FilterRowsSnapshot:
        args: list[EncodableT] = [
            keys.REALTIME_PREFIX,
            keys.VIEWS_SUFFIX,
            keys.filter_sizes_suffix(site),
            *(("", 0, 0) if budget is None else (budget.gen, budget.rows, budget.nbytes)),
            FLAGS_SUFFIX,
        ]
        for day in days:
            args += [keys.filter_suffix(site, day), keys.filter_rows_field(day), keys.filter_bytes_field(day)]
        reply = await self._fcall(args, self.function.filters_name)
        commit = self._commit.get(reply[1])
        if reply[0] is None:
            return FilterRowsSnapshot(None, commit, None, [])
        served = self._served.get(reply[0])
        rows, nbytes, read = (int(n) for n in reply[3])
        flags = decode_flags(reply[4])
        blobs = [bytes(blob) for elements in reply[5:] for blob in elements]
        stamp = None if reply[1] is None else (reply[0], reply[1], frozenset(reply[2]))
        views = keys.decode_views(reply[2])
        return FilterRowsSnapshot(served, commit, views, blobs, stamp, rows, nbytes, not read, flags)

    async def _fcall(self, args: list[EncodableT], name: str | None = None) -> list[Any]:
        """The reply of the snapshot function (or the library's function ``name``); loads the
        library first where Redis does not have it (a new Redis, one restarted without
        persistence, ``FUNCTION FLUSH``)."""
        name = name or self.function.name
        try:
            reply: list[Any] = await self.client.fcall_ro(name, 2, keys.SERVED, keys.SPEED_COMMIT, *args)
            return reply
        except ResponseError as exc:
            if "function not found" not in str(exc).lower():
                raise
        await self.load_function()
        reply = await self.client.fcall_ro(name, 2, keys.SERVED, keys.SPEED_COMMIT, *args)
        return reply

    async def load_function(self) -> None:
        """Loads the snapshot function into Redis; one already there (another worker's) is kept."""
        try:
            await self.client.function_load(self.function.source)
        except ResponseError as exc:
            if "already exists" not in str(exc):
                raise

    async def _snapshot(self, days: Sequence[DayRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        reply = await self._fcall(snapshot_args(days, ranks))
        commit = self._commit.get(reply[1])
        if reply[0] is None:
            return RealtimeSnapshot(None, commit, [], [])
        served = self._served.get(reply[0])
        n = len(days)
        day_values = [
            realtime_hash.decode(d.cells, values) for d, values in zip(days, reply[4 : 4 + n], strict=True)
        ]
        rank_values = [_ranking(flat) for flat in reply[4 + n :]]
        flags = decode_flags(reply[3])
        views = keys.decode_views(reply[2])
        return RealtimeSnapshot(served, commit, day_values, rank_values, views, flags, stamp_of(reply))

    async def stamp(self) -> Hashable | None:
        """The stamp of the realtime state now (:func:`stamp_of`), read by the snapshot function
        with nothing else to read, on the lean connection of stores.redis.stamp where it can; through
        redis-py (which loads the function if Redis lacks it) where it cannot or that fails."""
        if self._stamps is not None:
            try:
                return stamp_of(await self._call(self._stamps.call()))
            except StampUnavailable:
                pass
        return (await self.snapshot((), ())).stamp

    async def aclose(self) -> None:
        """Close the reader's connections (its client's and the lean one)."""
        if self._stamps is not None:
            self._stamps.close()
        await self.client.aclose()

    async def speed_stats(self) -> dict[str, object] | None:
        raw = await self._call(self.client.get(keys.SPEED_STATS))
        return None if raw is None else dict(orjson.loads(raw))

    async def ping(self) -> None:
        await self._call(self.client.ping())
