"""Rendered answers of the series queries, reused while the realtime state they came from is current.

An answer is a function of its query, the served generation (immutable batch views) and the
realtime values of that generation, and those values change only with a speed-layer commit or a
generation switch. The realtime read of every snapshot also returns its *stamp* (the served pointer,
the commit record and the generation's sets of counted views and visit flags, read at the same
instant: serving_layer.model.RealtimeSnapshot.stamp), so an answer's bytes are kept with the stamp
of the snapshot they were computed from. A later request of the same query reads the stamp again,
in one small call of the same Redis function (no realtime values read); if it is the one kept,
the answer it would compute is the kept one, byte for byte, and those bytes are sent. Any other
stamp (a commit, a switch, a rebuild) and the query is answered from a new snapshot, which replaces
the entry. So the cache never serves an answer older than the last commit a request could see, and
an answer still comes from one consistent snapshot.

Not kept: answers without a stamp (Redis down: partial; nothing committed yet), and read-your-writes
queries (``after``/``wait_ms``), which must wait on the commit. The key checks, the site scoping,
the cost limit and every 4xx happen before the cache is asked, as without it.

The entries are bounded in bytes by ``LAMBDA_API_ANSWER_CACHE_BYTES`` (0: off), least recently used
first out; an answer larger than the bound is not kept.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from cachetools import LRUCache

from config.memo import deep_size
from serving_layer.answers import Coverage
from serving_layer.model import RealtimeUnavailable


class StampReader(Protocol):
    async def stamp(self) -> Hashable | None:
        """The realtime state's stamp now (serving_layer.model.RealtimeSnapshot.stamp); raises
        RealtimeUnavailable when Redis cannot be read."""
        ...


class _Answer(Protocol):
    @property
    def coverage(self) -> Coverage: ...


A = TypeVar("A", bound=_Answer)

ENTRY_OVERHEAD = 400
"""Bytes of an entry besides its body, key and stamp: the entry object, the LRU's slot and link."""


@dataclass(frozen=True)
class _Entry:
    stamp: Hashable
    body: bytes
    size: int


class AnswerCache:
    """Rendered answers by (route, query), each with the stamp of the snapshot it came from."""

    def __init__(self, realtime: StampReader, max_bytes: int) -> None:
        self.realtime = realtime
        self.max_bytes = max_bytes
        self._entries: LRUCache[Hashable, _Entry] = LRUCache(max(max_bytes, 1), getsizeof=_size)
        self.hits = 0
        self.misses = 0
        """Answers computed for a query that could be kept (a first ask, or one after a change)."""
        self.stale = 0
        """Of the misses, those whose entry a newer stamp made stale (a commit or a switch)."""

    @property
    def cached_bytes(self) -> int:
        return int(self._entries.currsize)

    def __len__(self) -> int:
        return len(self._entries)

    async def _current_stamp(self) -> Hashable | None:
        """The realtime state's stamp now; None when Redis cannot tell (then the query is answered
        the ordinary way, which handles Redis being down)."""
        try:
            return await self.realtime.stamp()
        except RealtimeUnavailable:
            return None

    async def answer(
        self,
        key: Hashable | None,
        compute: Callable[[], Awaitable[A]],
        render: Callable[[A], bytes],
    ) -> bytes:
        """The body of the query ``key``: the kept one if its stamp is current, else ``render`` of
        ``compute()``, kept with its snapshot's stamp. ``key`` None: a query whose answer must not
        be reused (read-your-writes), always computed."""
        if key is None or self.max_bytes <= 0:
            return render(await compute())
        entry = self._entries.get(key)
        if entry is not None:
            if await self._current_stamp() == entry.stamp:
                self.hits += 1
                return entry.body
            self.stale += 1
        answer = await compute()
        body = render(answer)
        coverage = answer.coverage
        self.misses += 1
        if coverage.stamp is None:
            self._entries.pop(key, None)
            return body
        size = len(body) + deep_size((key, coverage.stamp)) + ENTRY_OVERHEAD
        if size <= self.max_bytes:
            self._entries[key] = _Entry(coverage.stamp, body, size)
        return body


def _size(entry: _Entry) -> int:
    return entry.size
