"""RealtimeReader on Redis: the served pointer and the served generation's realtime views, read in
one MULTI/EXEC transaction.

Redis runs a transaction's commands back to back, so ``GET served`` and the ``HMGET`` s of the
realtime hashes see the same instant: either before a generation switch (old generation's pointer
and its realtime keys) or after it (the new ones), never a mix that would drop or double count the
events between the two cuts. The realtime keys depend on the served generation, so the reader
guesses it (the last one seen), and runs the transaction again in the rare case the pointer it
returns names another generation.

The transaction is sent by :class:`RedisWire`, a deliberately small client: the whole MULTI/EXEC
packed by hiredis in one write, every reply parsed by hiredis from what one read returns. redis-py's
asyncio pipeline does the same work command by command in Python (a read, a timeout and a callback
per queued reply), which cost more CPU than the rest of a query; a 30-day query sends 33 commands.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, cast

import hiredis
import orjson

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

T = TypeVar("T")
MAX_ATTEMPTS = 5
Command = tuple[str | bytes | int, ...]


def _pack(command: Command) -> bytes:
    # hiredis' type stub declares a one-element tuple; it packs any number of arguments.
    packed: bytes = hiredis.pack_command(cast(Any, command))
    return packed


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.parser = hiredis.Reader()

    async def call(self, packed: bytes, replies: int) -> list[Any]:
        self.writer.write(packed)
        out: list[Any] = []
        while len(out) < replies:
            reply = self.parser.gets()
            if reply is False:
                data = await self.reader.read(1 << 16)
                if not data:
                    raise ConnectionError("Redis closed the connection")
                self.parser.feed(data)
            else:
                out.append(reply)
        return out

    def close(self) -> None:
        self.writer.close()


class RedisWire:
    """Pooled connections that send pipelines of commands and return their replies.

    A connection is reused only after a complete exchange; on any error it is closed (its state is
    unknown) and, because an idle connection may have died with a Redis restart, the exchange is
    tried once more on a fresh one. Connect and exchange are bounded by ``timeout``: a Redis that
    does not answer must not hold a query that can be answered from the batch views.
    """

    def __init__(self, host: str, port: int, db: int, timeout: float, max_idle: int = 64) -> None:
        self.host, self.port, self.db, self.timeout = host, port, db, timeout
        self.max_idle = max_idle
        self._idle: list[_Connection] = []

    async def _connect(self) -> _Connection:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        conn = _Connection(reader, writer)
        if self.db:
            (reply,) = await conn.call(_pack(("SELECT", self.db)), 1)
            if isinstance(reply, hiredis.ReplyError):
                conn.close()
                raise reply
        return conn

    async def execute(self, commands: Sequence[Command]) -> list[Any]:
        """The replies of ``commands``, sent together; a Redis error reply is raised."""
        packed = b"".join(_pack(c) for c in commands)
        for attempt in (1, 2):
            fresh = not self._idle
            conn = self._idle.pop() if self._idle else None
            try:
                async with asyncio.timeout(self.timeout):
                    if conn is None:
                        conn = await self._connect()
                    replies = await conn.call(packed, len(commands))
            except (OSError, ConnectionError, TimeoutError, EOFError):
                if conn is not None:
                    conn.close()
                if fresh or attempt == 2:
                    raise
                continue
            except BaseException:
                if conn is not None:
                    conn.close()
                raise
            if len(self._idle) < self.max_idle:
                self._idle.append(conn)
            else:
                conn.close()
            for reply in replies:
                if isinstance(reply, hiredis.ReplyError):
                    raise reply
            return replies
        raise AssertionError("unreachable")

    async def transaction(self, commands: Sequence[Command]) -> list[Any]:
        """MULTI, the commands, EXEC: the replies of the commands, all from one instant."""
        replies = await self.execute([("MULTI",), *commands, ("EXEC",)])
        results = replies[-1]
        if results is None:
            raise ConnectionError("Redis aborted the transaction")
        for result in results:
            if isinstance(result, hiredis.ReplyError):
                raise result
        return list(results)

    async def aclose(self) -> None:
        while self._idle:
            conn = self._idle.pop()
            conn.close()
            with contextlib.suppress(OSError, ConnectionError):
                await conn.writer.wait_closed()


def connect(settings: Settings) -> RedisWire:
    return RedisWire(
        settings.redis_host, settings.redis_port, settings.redis_db, settings.api_redis_timeout_ms / 1000
    )


UNAVAILABLE = (OSError, ConnectionError, TimeoutError, EOFError)


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
    def __init__(self, client: RedisWire) -> None:
        self.client = client
        self._gen: int | None = None
        self._served = _Decoded(keys.decode_served)
        self._commit = _Decoded(keys.decode_commit)

    def _served_of(self, raw: bytes | str | None) -> Served | None:
        """None when nothing is served yet."""
        return None if raw is None else self._served.get(raw)

    def _commit_of(self, raw: bytes | str | None) -> SpeedCommit:
        return self._commit.get(raw)

    async def snapshot(self, hashes: Sequence[HashRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        try:
            return await self._snapshot(hashes, ranks)
        except UNAVAILABLE as exc:
            raise RealtimeUnavailable(f"Redis: {exc}") from exc

    async def _snapshot(self, hashes: Sequence[HashRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        for _ in range(MAX_ATTEMPTS):
            gen = self._gen
            if gen is None:
                raw_served, raw_commit = await self.client.execute(
                    [("GET", keys.SERVED), ("GET", keys.SPEED_COMMIT)]
                )
                served = self._served_of(raw_served)
                if served is None:
                    return RealtimeSnapshot(None, self._commit_of(raw_commit), [], [])
                gen = served.gen
            commands: list[Command] = [("GET", keys.SERVED), ("GET", keys.SPEED_COMMIT)]
            commands += [("HMGET", keys.realtime_key(gen, h.view, h.key, h.day), *h.fields) for h in hashes]
            commands += [
                ("ZRANGE", keys.realtime_rank_key(gen, r.view, r.day), 0, -1, "WITHSCORES") for r in ranks
            ]
            commands.append(("SMEMBERS", keys.realtime_views_key(gen)))
            results = await self.client.transaction(commands)
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
            rank_values = [
                [(entries[i].decode(), float(entries[i + 1])) for i in range(0, len(entries), 2)]
                for entries in results[2 + n : -1]
            ]
            return RealtimeSnapshot(served, commit, hash_values, rank_values, _decode_views(results[-1]))
        raise RealtimeUnavailable(f"the served generation changed {MAX_ATTEMPTS} times during one query")

    async def speed_stats(self) -> dict[str, object] | None:
        try:
            (raw,) = await self.client.execute([("GET", keys.SPEED_STATS)])
        except UNAVAILABLE as exc:
            raise RealtimeUnavailable(f"Redis: {exc}") from exc
        return None if raw is None else dict(orjson.loads(raw))

    async def ping(self) -> None:
        try:
            await self.client.execute([("PING",)])
        except UNAVAILABLE as exc:
            raise RealtimeUnavailable(f"Redis: {exc}") from exc
