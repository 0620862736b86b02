"""Current visitors on Redis: the speed layer's per-minute visitors of each site and page, both halves.

What is stored, per view (``site`` or ``page``), key and UTC minute of event time:

- ``lambda:cv:{view}:{minute}|{key}``: a hash with ``sk``, the HLL sketch of the minute's visitors
  (DataSketches bytes, read-union-write like the realtime views' sketches), and ``x`` once the
  minute's set below was given up;
- ``lambda:cv:{view}:{minute}|{key}#v``: the set of the minute's visitor ids, kept while it holds
  at most ``current_visitors_exact_limit`` of them, so that a window of small minutes is answered
  exactly (the union of the sets) and a larger one by the union of the sketches.

Every write is a union (``SADD``, a sketch union), so counting an event twice, as a stream restarted
before its checkpoint does, changes nothing. The writes of a micro-batch are queued into its commit
transaction (speed_layer.commit) with its offsets, so an answer read with the commit record in one
transaction counts exactly the events below those offsets.

These keys belong to no generation: a window of minutes is answered by the speed layer alone,
whatever the batch layer has absorbed. They expire by time instead (``EXPIREAT`` the end of their
minute plus ``current_visitors_max_minutes`` plus one minute), the only realtime keys that do: no
window reaches further back, and Redis' memory stays bounded by the traffic of that many minutes.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import redis
from redis.asyncio import Redis as AsyncRedis

from generations.model import Offsets
from stores.errors import RealtimeUnavailable
from stores.redis import keys
from stores.redis.reader import UNAVAILABLE
from views.sketches import union_bytes

PREFIX = "lambda:cv:"
SKETCH = "sk"
GIVEN_UP = "x"
"""Hash field set once the minute's set of visitors was dropped (it grew past the limit)."""
SET_SUFFIX = "#v"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def minute_text(minute: int) -> str:
    """A minute number (minutes since the epoch) as its keys spell it: ``YYYY-MM-DDTHH:MM``."""
    return (EPOCH + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M")


def hash_key(view: str, key: str, minute: int) -> str:
    return f"{PREFIX}{view}:{minute_text(minute)}|{key}"


def set_key(view: str, key: str, minute: int) -> str:
    return hash_key(view, key, minute) + SET_SUFFIX


def expires_at(minute: int, max_minutes: int) -> int:
    """Unix seconds at which a minute's keys go: once no window of at most ``max_minutes`` before
    the current minute reaches it, plus a minute."""
    return (minute + max_minutes + 2) * 60


@dataclass(frozen=True)
class MinuteRow:
    """One micro-batch's visitors of one (view, key, minute): its sketch, and its visitor ids when
    they are at most the limit (None past it)."""

    view: str
    key: str
    minute: int
    sketch: bytes
    visitors: Sequence[str] | None


@dataclass
class CurrentVisitorsSink:
    """One micro-batch's per-minute writes, flushed inside the commit transaction.

    :meth:`prepare` reads, before the transaction, what each minute holds (its sketch, whether its
    set was given up, the set's size): the speed job is the only writer of these keys, and the
    transaction that follows is guarded like the realtime views' (stores.redis.sink). A set is
    given up when its stored size plus the micro-batch's visitors could exceed ``limit``: a
    conservative test (the two may overlap) that never keeps a set larger than the limit."""

    client: redis.Redis
    limit: int
    max_minutes: int
    _rows: dict[tuple[str, str, int], list[MinuteRow]] = field(default_factory=lambda: defaultdict(list))
    _stored: dict[tuple[str, str, int], tuple[bytes | None, bool, int]] = field(default_factory=dict)

    def add(self, row: MinuteRow) -> None:
        self._rows[(row.view, row.key, row.minute)].append(row)

    def prepare(self) -> None:
        wanted = list(self._rows)
        if not wanted:
            return
        with self.client.pipeline(transaction=False) as pipe:
            for view, key, minute in wanted:
                pipe.hmget(hash_key(view, key, minute), [SKETCH, GIVEN_UP])
                pipe.scard(set_key(view, key, minute))
            replies = pipe.execute()
        for i, ident in enumerate(wanted):
            (sketch, given_up), size = replies[2 * i], replies[2 * i + 1]
            self._stored[ident] = (sketch, given_up is not None, int(size))

    def flush(self, pipe: redis.client.Pipeline) -> int:
        """Queue every write into ``pipe`` (in MULTI); returns the number of minutes written."""
        for (view, key, minute), rows in self._rows.items():
            stored_sketch, given_up, size = self._stored.get((view, key, minute), (None, False, 0))
            h, s = hash_key(view, key, minute), set_key(view, key, minute)
            merged = union_bytes([stored_sketch, *(r.sketch for r in rows)])
            pipe.hset(h, SKETCH, merged or b"")
            visitors: set[str] = set()
            for r in rows:
                visitors.update(r.visitors or ())
            exact = not given_up and all(r.visitors is not None for r in rows)
            if exact and size + len(visitors) <= self.limit:
                if visitors:
                    pipe.sadd(s, *sorted(visitors))
                    pipe.expireat(s, expires_at(minute, self.max_minutes))
            else:
                pipe.hset(h, GIVEN_UP, 1)
                pipe.delete(s)
            pipe.expireat(h, expires_at(minute, self.max_minutes))
        return len(self._rows)


@dataclass(frozen=True)
class Minute:
    """What one minute of a window holds, as read: nothing (no visitor), or its sketch and, while
    it is exact, its set of visitor ids."""

    sketch: bytes | None = None
    visitors: frozenset[bytes] | None = frozenset()
    """None once the set was given up (too many visitors): only the sketch answers."""


@dataclass(frozen=True)
class WindowRead:
    """One consistent read: the speed layer's commit and the window's minutes, at one instant."""

    commit: Offsets
    committed_at: str | None
    """When the speed layer committed it (its stats record), ISO 8601."""
    minutes: list[Minute]


async def read_window(
    client: AsyncRedis, view: str, key: str, minutes: Iterable[int], timeout_s: float
) -> WindowRead:
    """The commit record, the speed layer's stats and the minutes of ``key`` in one ``MULTI``/
    ``EXEC``; RealtimeUnavailable when Redis does not answer within ``timeout_s``."""
    wanted = list(minutes)
    try:
        async with asyncio.timeout(timeout_s):
            async with client.pipeline(transaction=True) as pipe:
                pipe.get(keys.SPEED_COMMIT)
                pipe.get(keys.SPEED_STATS)
                for minute in wanted:
                    pipe.hmget(hash_key(view, key, minute), [SKETCH, GIVEN_UP])
                    pipe.smembers(set_key(view, key, minute))
                replies: list[Any] = await pipe.execute()
    except TimeoutError as exc:
        raise RealtimeUnavailable(f"Redis: no answer within {timeout_s} s") from exc
    except UNAVAILABLE as exc:
        raise RealtimeUnavailable(f"Redis: {exc}") from exc
    read = []
    for i in range(len(wanted)):
        (sketch, given_up), members = replies[2 + 2 * i], replies[3 + 2 * i]
        if sketch is None:
            read.append(Minute())
        else:
            read.append(Minute(sketch, None if given_up is not None else frozenset(members)))
    stats = orjson.loads(replies[1]) if replies[1] else {}
    return WindowRead(keys.decode_commit(replies[0]).offsets, stats.get("at"), read)
