"""The generation protocol's state on Redis: the hot copy of the registry (active generations with
their cuts, the served pointer), the speed layer's commit record, and the two transactions of the
handshake between them.

The protocol is the layers' (generations.registry: which generation, which cut, when;
speed_layer.commit: which batch, which views, exactly once); this module holds its Redis commands.
The handshake: the speed layer commits each micro-batch under ``WATCH`` of the active generations
and the commit record (:class:`SpeedCommitTransaction`); opening a generation reads the committed
offsets under ``WATCH`` of both and takes its cut at or after them (:meth:`RedisHotCopy.register_cut`).
Whichever transaction commits second sees the other's write, aborts and is tried again with fresh
values.

Key layout: :mod:`stores.redis.keys`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import redis

from generations.model import Offsets, Served, SpeedCommit
from stores.redis import keys
from stores.redis.sink import RedisRealtimeSink

if TYPE_CHECKING:
    from generations.storage import HotCopy

Conflict = redis.WatchError
"""A transaction found a watched key changed since it read it (nothing was written): try again."""
Unreachable = redis.ConnectionError
"""Redis did not answer (a restart): try again later."""


class RedisHotCopy:
    """The registry's hot copy on Redis (generations.storage.HotCopy)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def active(self) -> dict[int, Offsets]:
        return keys.decode_active(self.client.get(keys.ACTIVE))

    def served(self) -> Served:
        return keys.decode_served(self.client.get(keys.SERVED))

    def register_cut(self, gen: int, cut_for: Callable[[Offsets], Offsets]) -> Offsets:
        cut: Offsets = {}

        def attempt(pipe: redis.client.Pipeline) -> None:
            committed = keys.decode_commit(pipe.get(keys.SPEED_COMMIT)).offsets
            cut.clear()
            cut.update(cut_for(committed))
            active = keys.decode_active(pipe.get(keys.ACTIVE))
            active[gen] = dict(cut)
            pipe.multi()
            pipe.set(keys.ACTIVE, keys.encode_active(active))

        # redis-py's transaction(): WATCH the keys, run attempt, EXEC; on WatchError (the speed
        # layer committed meanwhile) it runs attempt again with fresh values.
        self.client.transaction(attempt, keys.SPEED_COMMIT, keys.ACTIVE)
        return cut

    def write(self, active: dict[int, Offsets], served: Served) -> None:
        with self.client.pipeline(transaction=True) as pipe:
            pipe.set(keys.ACTIVE, keys.encode_active(active))
            pipe.set(keys.SERVED, keys.encode_served(served))
            pipe.execute()

    def write_if_absent(self, active: dict[int, Offsets], served: Served) -> None:
        def attempt(pipe: redis.client.Pipeline) -> None:
            if pipe.get(keys.ACTIVE) is None:
                pipe.multi()
                pipe.set(keys.ACTIVE, keys.encode_active(active))
                pipe.set(keys.SERVED, keys.encode_served(served))

        self.client.transaction(attempt, keys.ACTIVE)

    def drop_active(self, gen: int) -> None:
        def attempt(pipe: redis.client.Pipeline) -> None:
            active = keys.decode_active(pipe.get(keys.ACTIVE))
            active.pop(gen, None)
            pipe.multi()
            pipe.set(keys.ACTIVE, keys.encode_active(active))

        self.client.transaction(attempt, keys.ACTIVE)


def speed_commit(client: redis.Redis) -> SpeedCommit:
    """The speed layer's last commit, as Redis has it."""
    return keys.decode_commit(client.get(keys.SPEED_COMMIT))


def speed_stats(client: redis.Redis) -> dict[str, Any]:
    """The speed layer's report of its last micro-batch ({} before the first)."""
    stats: dict[str, Any] = json.loads(client.get(keys.SPEED_STATS) or "{}")
    return stats


def forget_speed_commits(client: redis.Redis) -> None:
    """Delete the commit record and the stats (the realtime views are being rebuilt from the log)."""
    client.delete(keys.SPEED_COMMIT, keys.SPEED_STATS)


class SpeedCommitTransaction:
    """One attempt at committing a micro-batch: reads under ``WATCH`` of the active generations and
    the commit record, then (after :meth:`multi`) the queued writes, applied by :meth:`execute` all
    together, or none of them with :data:`Conflict` if a watched key changed since it was watched.

    Between :meth:`multi` and :meth:`execute`, :attr:`pipeline` is the transaction the sinks flush
    into (stores.realtime_views.RealtimeSink)."""

    def __init__(self, pipeline: redis.client.Pipeline) -> None:
        self.pipeline = pipeline

    def speed_commit(self) -> SpeedCommit:
        return keys.decode_commit(self.pipeline.get(keys.SPEED_COMMIT))

    def active(self) -> dict[int, Offsets]:
        return keys.decode_active(self.pipeline.get(keys.ACTIVE))

    def unwatch(self) -> None:
        self.pipeline.unwatch()

    def speed_stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = json.loads(self.pipeline.get(keys.SPEED_STATS) or "{}")
        return stats

    def counted_views(self, gen: int) -> frozenset[str] | None:
        """The views (``name@fingerprint``) realtime ``gen`` has been counted with; None if it has
        not been counted yet."""
        raw: Any = self.pipeline.smembers(keys.realtime_views_key(gen))
        return keys.decode_views(raw)

    def multi(self) -> None:
        """End the reads: every call from here on is queued into the transaction."""
        self.pipeline.multi()

    def record_views(self, gen: int, marks: list[str]) -> None:
        """Queue: realtime ``gen`` has been counted with ``marks`` (the set replaced, so a view
        missing from it stays missing)."""
        key = keys.realtime_views_key(gen)
        self.pipeline.delete(key)
        # The sentinel keeps an emptied set saying "recorded".
        self.pipeline.sadd(key, keys.VIEWS_SENTINEL, *marks)
        self.pipeline.sadd(keys.REALTIME_GENS, gen)  # so that the generation's teardown finds this key too

    def record_commit(self, commit: SpeedCommit, stats: str) -> None:
        """Queue the commit record and the stats record (JSON)."""
        self.pipeline.set(keys.SPEED_COMMIT, keys.encode_commit(commit))
        self.pipeline.set(keys.SPEED_STATS, stats)

    def execute(self) -> None:
        self.pipeline.execute()


class RedisSpeedCommits:
    """The speed layer's commits on Redis: a transaction per attempt, the realtime views' sink."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    @contextmanager
    def transaction(self) -> Iterator[SpeedCommitTransaction]:
        """A transaction watching the active generations and the commit record."""
        with self.client.pipeline(transaction=True) as pipe:
            pipe.watch(keys.ACTIVE, keys.SPEED_COMMIT)  # type: ignore[no-untyped-call]
            yield SpeedCommitTransaction(pipe)

    def sink(self) -> RedisRealtimeSink:
        return RedisRealtimeSink(self.client)


if TYPE_CHECKING:
    _: type[HotCopy] = RedisHotCopy
