"""The speed layer's visit bookkeeping on Redis: the horizon's watermark and the flags, both halves.

The open visits themselves live in the speed layer's executors, one state per Kafka partition
(speed_layer.visits); what must outlast them is written here, in each micro-batch's commit
transaction, so that it changes with the realtime views or not at all:

- ``lambda:vs:#meta``: hash of ``watermark_ms`` (the newest log-append time committed),
  ``dropped_before_us`` (every visit let go of ended before it: a state rebuilt after a restart
  leaves the same visits out) and ``dims`` (the dimensions the realtime visits were counted with:
  realtime views of other dimensions are rebuilt);
- per generation, the (site, day) whose realtime visits may not be exact (:func:`flags_key`): a
  page view later than the horizon, or a visitor's views on two Kafka partitions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

from stores.redis.keys import generation_prefix
from stores.redis.teardown import unlink_matching

Client = redis.Redis
"""The client the bookkeeping's halves take."""

PREFIX = "lambda:vs:"
META = f"{PREFIX}#meta"
FLAGS_SUFFIX = "#visitflags"


def flags_key(gen: int) -> str:
    """Per generation, the set of ``{site}|{day}`` whose realtime visits may not be exact (a page
    view later than the horizon, or a visitor's views on two Kafka partitions): the answer says so.
    Under the generation's prefix, so it goes with the generation (stores.redis.teardown)."""
    return generation_prefix(gen) + FLAGS_SUFFIX


def flag_member(site: str, day: str) -> str:
    return f"{site}|{day}"


def decode_flags(members: Iterable[bytes | str]) -> frozenset[tuple[str, str]]:
    """A generation's set of flags (``SMEMBERS``) as (site, day) pairs (a day holds no ``|``)."""
    pairs = ((m.decode() if isinstance(m, bytes) else m).rpartition("|") for m in members)
    return frozenset((site, day) for site, _, day in pairs)


NEVER = -(2**62)
"""A time before every event: no visit has been let go of yet."""


@dataclass(frozen=True)
class Meta:
    watermark_ms: int = 0
    """The newest log-append time committed."""
    dims: str = ""
    dropped_before_us: int = NEVER
    """Every visit the state has let go of ended before this."""


def read_meta(client: redis.Redis) -> Meta:
    raw: Any = client.hgetall(META)
    if not raw:
        return Meta()
    values = {(k.decode() if isinstance(k, bytes) else k): v for k, v in raw.items()}
    dims = values.get("dims", b"")
    return Meta(
        int(values.get("watermark_ms", 0)),
        dims.decode() if isinstance(dims, bytes) else str(dims),
        int(values.get("dropped_before_us", NEVER)),
    )


def clear(client: redis.Redis, dims: str, watermark_ms: int = 0, dropped_before_us: int = NEVER) -> int:
    """Start the bookkeeping over (a fresh start) with its dimensions and horizon, deleting what an
    earlier version kept under the prefix (the open visits, now held by the executors); returns
    the number of keys deleted."""
    deleted = unlink_matching(client, f"{PREFIX}*")
    client.hset(
        META, mapping={"watermark_ms": watermark_ms, "dims": dims, "dropped_before_us": dropped_before_us}
    )
    return deleted


@dataclass
class VisitStateSink:
    """One micro-batch's writes to the visit bookkeeping, flushed inside the commit transaction."""

    drop_before_us: int
    watermark_ms: int
    _flags: dict[int, set[str]] = field(default_factory=dict)

    def add_flag(self, gen: int, site: str, day: str) -> None:
        self._flags.setdefault(gen, set()).add(flag_member(site, day))

    def flush(self, pipe: redis.client.Pipeline) -> None:
        """Queue the writes into ``pipe`` (in MULTI)."""
        for gen, members in self._flags.items():
            pipe.sadd(flags_key(gen), *sorted(members))
        pipe.hset(META, mapping={"watermark_ms": self.watermark_ms, "dropped_before_us": self.drop_before_us})
