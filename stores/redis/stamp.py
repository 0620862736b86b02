"""A lean connection for the one small call the API makes on every request whose answer it has
cached: the snapshot function with nothing to read, which returns the realtime state's stamp
(stores.redis.reader.stamp_of).

Through redis-py's asyncio client that call costs more worker CPU than the rest of such a request
(its connection pool, command machinery and instrumentation, per call). Here it is one
``asyncio.Protocol`` on one connection: calls are pipelined (written as they come, their replies
parsed by hiredis in C and handed back in order), so concurrent requests share the connection
without waiting for each other's round trip.

It covers the common deployment (TCP, optional user and password, a database number); for TLS or a
Unix socket the reader keeps using redis-py. Any failure here
(connection refused or lost, a reply error such as a function not loaded yet) is raised to the
reader, which then makes the same call through redis-py, the path that loads the function and
reports Redis unavailable. A connection that fails or times out is closed and opened again on the
next call, so no reply can be matched to the wrong call.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, cast

import hiredis


class StampUnavailable(Exception):
    """The lean path could not make the call (the caller falls back to redis-py)."""


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.waiting: deque[asyncio.Future[Any]] = deque()
        self.transport: asyncio.Transport | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio's classes

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            future = self.waiting.popleft()
            if future.done():  # its caller gave up (a timeout); the reply is dropped in order
                continue
            if isinstance(reply, hiredis.ReplyError):
                future.set_exception(StampUnavailable(str(reply)))
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(StampUnavailable(f"connection lost: {exc}"))

    def call(self, packed: bytes) -> asyncio.Future[Any]:
        if self.transport is None or self.lost:
            raise StampUnavailable("not connected")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        self.transport.write(packed)
        return future

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.connection_lost(None)


class StampConnection:
    """One pipelined connection to the Redis of ``kwargs`` (redis-py's connection arguments) for
    ``command``. A caller that gives up (a timeout) leaves its reply to be dropped in turn."""

    def __init__(self, kwargs: dict[str, Any], command: tuple[Any, ...]) -> None:
        self.host = str(kwargs.get("host", "localhost"))
        self.port = int(kwargs.get("port", 6379))
        self.db = int(kwargs.get("db", 0) or 0)
        self.username: str | None = kwargs.get("username")
        self.password: str | None = kwargs.get("password")
        self.command: bytes = hiredis.pack_command(command)
        self._protocol: _Protocol | None = None
        self._opening: asyncio.Lock | None = None

    async def _connected(self) -> _Protocol:
        protocol = self._protocol
        if protocol is not None and not protocol.lost:
            return protocol
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._protocol is not None and not self._protocol.lost:
                return self._protocol
            try:
                _, opened = await asyncio.get_running_loop().create_connection(
                    _Protocol, self.host, self.port
                )
            except OSError as exc:
                raise StampUnavailable(str(exc)) from exc
            setup: list[tuple[Any, ...]] = []
            if self.password is not None:
                auth = ("AUTH", self.username, self.password) if self.username else ("AUTH", self.password)
                setup.append(auth)
            if self.db:
                setup.append(("SELECT", self.db))
            try:
                for command in setup:
                    await opened.call(hiredis.pack_command(command))
            except StampUnavailable:
                opened.close()
                raise
            self._protocol = opened
            return opened

    async def call(self) -> list[Any]:
        """The reply to the command (the snapshot function with no reads: served, commit, views,
        flags)."""
        protocol = await self._connected()
        try:
            reply: list[Any] = await protocol.call(self.command)
        except StampUnavailable:
            protocol.close()
            raise
        return reply

    def close(self) -> None:
        if self._protocol is not None:
            self._protocol.close()
            self._protocol = None
