"""The write half of the realtime views on Redis: the speed layer's sink (stores.realtime_views.RealtimeSink).

The sink follows the add/flush shape: :meth:`RedisRealtimeSink.add` takes view rows (views.rows) of one
micro-batch for one generation, :meth:`RedisRealtimeSink.flush` queues every write into the pipeline of
the micro-batch's commit transaction, so the increments land together with the batch id and end
offsets or not at all.

Page views and the visit metrics are increments (HINCRBY, the visits' may be negative: views.sessions),
which commute. Sketches are not: a new sketch is the union of
the stored one and the micro-batch's, so the sink reads the stored sketches first
(:meth:`RedisRealtimeSink.prepare`), outside the transaction. That read is safe because the speed job is the
only writer of realtime keys, and the transaction that follows is guarded by WATCH on the
generation registry and the commit record.

Key layout: :mod:`stores.redis.keys`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import redis

from stores.realtime_hash import realtime_write
from stores.redis import keys
from views.sketches import union_bytes


@dataclass
class _Pending:
    pv: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    sketches: dict[str, list[bytes]] = field(default_factory=lambda: defaultdict(list))


class RedisRealtimeSink:
    """Accumulates one micro-batch's realtime writes; flushed inside the commit transaction.
    Realtime keys never expire by time: they live as long as their generation is served or being
    built, and go when it is retired (stores.redis.teardown). Had they a TTL, a batch layer stalled
    for longer would silently lose the counts past its cut."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._pending: dict[str, _Pending] = defaultdict(_Pending)
        self._ranks: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self._gens: set[int] = set()
        self._stored: dict[tuple[str, str], bytes | None] = {}

    def add(self, gen: int, view: str, row: Any) -> None:
        """One view row (key, day, pv, uv, sk, hours) of this micro-batch for generation ``gen``."""
        key = keys.realtime_key(gen, view, row["key"], row["day"])
        pending = self._pending[key]
        write = realtime_write(row)
        for f, n in write.increments.items():
            pending.pv[f] += n
        for f, sketch in write.sketches.items():
            pending.sketches[f].append(sketch)
        self._ranks[keys.realtime_rank_key(gen, view, row["day"])][row["key"]] += write.score
        self._gens.add(gen)

    def prepare(self) -> None:
        """Fetch the stored sketches this batch will union into, in one pipelined round trip."""
        wanted = [(key, list(p.sketches)) for key, p in self._pending.items() if p.sketches]
        with self.client.pipeline(transaction=False) as pipe:
            for key, fields in wanted:
                pipe.hmget(key, fields)
            replies = pipe.execute()
        self._stored = {
            (key, f): value
            for (key, fields), values in zip(wanted, replies, strict=True)
            for f, value in zip(fields, values, strict=True)
        }

    def flush(self, pipe: redis.client.Pipeline) -> int:
        """Queue every write into ``pipe`` (in MULTI); returns the number of realtime keys written."""
        for key, p in self._pending.items():
            for f, n in p.pv.items():
                if n:
                    pipe.hincrby(key, f, n)
            if not p.sketches:
                continue
            pipe.hset(
                key,
                mapping={
                    f: union_bytes([self._stored.get((key, f)), *parts]) or b""
                    for f, parts in p.sketches.items()
                },
            )
        for rank_key, counts in self._ranks.items():
            for member, n in counts.items():
                if n:
                    pipe.zincrby(rank_key, n, member)
        if self._gens:
            pipe.sadd(keys.REALTIME_GENS, *sorted(self._gens))
        return len(self._pending)
