"""The speed layer's visit state on Redis: the open visits of every visitor-day, both halves.

What the state holds (views.sessions has the definition): for each visitor-day, the summaries of
the visits of every page view the speed layer has committed (and, after a fresh start, of the
master dataset's events before its first offset), as long as a visit may still change: a visit is
dropped once its last view is more than the lateness horizon plus the session gap behind the
newest log-append time (the **watermark**). A page view less than a gap after the latest visit let
go of may belong to one; the speed layer still merges it but marks the visit tainted and flags its
buckets (:func:`flags_key`).

Layout:

- ``lambda:vs:{day}|{site}|{visitor}``: JSON list of the visitor-day's visits, each an object of
  :data:`FIELDS` (microsecond times, the dimension keys of the first and last view by dimension
  name, the Kafka partitions its views came from);
- ``lambda:vs:#ends``: sorted set of those keys by their latest visit end, so visitor-days whose
  every visit is past the horizon go without a scan;
- ``lambda:vs:#meta``: hash of ``watermark_ms`` (newest log-append time committed),
  ``dropped_before_us`` (every visit let go of ended before it) and ``dims`` (the dimensions the
  first/last keys are stored for: a state of other dimensions is rebuilt).

The read half (:func:`load`) runs in Spark's executors for the visitor-days a micro-batch touches;
the write half (:class:`VisitStateSink`) queues the new summaries into the micro-batch's commit
transaction, so the state and the realtime views change together or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

from stores.redis.keys import generation_prefix
from stores.redis.teardown import unlink_matching

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

Client = redis.Redis
"""The client the state's halves take."""

PREFIX = "lambda:vs:"
ENDS = f"{PREFIX}#ends"
META = f"{PREFIX}#meta"
FIELDS = ("s_ts", "s_id", "e_ts", "e_id", "first", "last", "n", "tainted", "p_lo", "p_hi")
"""A stored visit's values (views.sessions.SUMMARY_VALUES and the partitions)."""


def state_key(site: str, visitor: str, day: str) -> str:
    return f"{PREFIX}{day}|{site}|{visitor}"


def state_key_column(site: Column, visitor: Column, day: Column) -> Column:
    """:func:`state_key` as a Spark column (the speed layer names the keys it writes in Spark)."""
    from pyspark.sql import functions as F

    return F.concat(F.lit(PREFIX), day, F.lit("|"), site, F.lit("|"), visitor)


FLAGS_SUFFIX = "#visitflags"


def flags_key(gen: int) -> str:
    """Per generation, the set of ``{site}|{day}`` whose realtime visits may not be exact (a page
    view later than the horizon, or a visitor's views on two Kafka partitions): the answer says so.
    Under the generation's prefix, so it goes with the generation (stores.redis.teardown)."""
    return generation_prefix(gen) + FLAGS_SUFFIX


def flag_member(site: str, day: str) -> str:
    return f"{site}|{day}"


CHUNK = 1000
"""Keys per command of a flush."""
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


def clear(client: redis.Redis, dims: str, watermark_ms: int = 0) -> int:
    """Drop the whole state (a fresh start rebuilds it) and record its dimensions; returns the
    number of keys deleted."""
    deleted = unlink_matching(client, f"{PREFIX}*")
    client.hset(META, mapping={"watermark_ms": watermark_ms, "dims": dims, "dropped_before_us": NEVER})
    return deleted


def load_texts(
    client: redis.Redis, touched: Sequence[tuple[str, str, str]]
) -> Iterator[tuple[str, str, str, str]]:
    """(site, visitor, day, JSON list of visits) of each of the ``touched`` (site, visitor, day)
    visitor-days the state holds: the text as stored, parsed by the reader (in Spark, for the
    speed layer: speed_layer.visits), which also leaves out the visits past the horizon."""
    if not touched:
        return
    raw: Any = client.mget([state_key(site, visitor, day) for site, visitor, day in touched])
    for (site, visitor, day), text in zip(touched, raw, strict=True):
        if text:
            yield site, visitor, day, text.decode() if isinstance(text, bytes) else str(text)


TEXTS_SCHEMA = "site string, visitor_id string, day string, text string"
"""What :func:`loader` returns: a touched visitor-day's stored visits, as stored (JSON)."""


def loader(redis_url: str) -> Callable[[Iterable[pa.RecordBatch]], Iterable[pa.RecordBatch]]:
    """The ``mapInArrow`` function that reads the state of the touched visitor-days (site,
    visitor_id, day) in an executor: the stored text only, which Spark parses
    (speed_layer.visits.stored)."""

    def load(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        client = redis.Redis.from_url(redis_url, socket_timeout=30)
        try:
            yield from load_batches(client, batches)
        finally:
            client.close()

    return load


def load_batches(client: Any, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Per Arrow batch of touched visitor-days (site, visitor_id, day), the stored text of those
    the state holds (:func:`load_texts` through ``client``)."""
    import pyarrow as pa

    names = ["site", "visitor_id", "day", "text"]
    for batch in batches:
        touched = list(
            zip(
                batch.column("site").to_pylist(),
                batch.column("visitor_id").to_pylist(),
                batch.column("day").to_pylist(),
                strict=True,
            )
        )
        columns: list[list[str]] = [[], [], [], []]
        for row in load_texts(client, touched):
            for column, value in zip(columns, row, strict=True):
                column.append(value)
        yield pa.RecordBatch.from_arrays([pa.array(c, pa.string()) for c in columns], names=names)


@dataclass
class VisitStateSink:
    """One micro-batch's writes to the visit state, flushed inside the commit transaction."""

    client: redis.Redis
    drop_before_us: int
    watermark_ms: int
    _states: dict[str, tuple[str, int]] = field(default_factory=dict)
    _empty: set[str] = field(default_factory=set)
    _flags: dict[int, set[str]] = field(default_factory=dict)
    _expired: list[bytes | str] = field(default_factory=list)

    def add_state(self, site: str, visitor: str, day: str, visits: Iterable[dict[str, Any]]) -> None:
        """The visitor-day's visits after this micro-batch (none: it has no open visit left)."""
        kept = [{f: v[f] for f in FIELDS} for v in visits if v["e_ts"] >= self.drop_before_us]
        end = max((v["e_ts"] for v in kept), default=NEVER)
        self.add_text(state_key(site, visitor, day), json.dumps(kept, separators=(",", ":")), end)

    def add_text(self, key: str, text: str, end: int) -> None:
        """A visitor-day's visits as stored (``key`` by :func:`state_key`, ``text`` the JSON list of
        its visits, ``end`` the latest end among them), as the speed layer's Spark job writes them.

        A visitor-day whose latest end is past the horizon is deleted. Its other visits that ended
        before the horizon may stay in the text until the visitor-day is written again or leaves:
        :func:`load` leaves them out, so they count as gone."""
        if end >= self.drop_before_us:
            self._states[key] = (text, end)
            self._empty.discard(key)
        else:
            self._states.pop(key, None)
            self._empty.add(key)

    def add_flag(self, gen: int, site: str, day: str) -> None:
        self._flags.setdefault(gen, set()).add(flag_member(site, day))

    def prepare(self) -> None:
        """Find the visitor-days whose every visit is past the horizon (read before the
        transaction: the speed layer is the state's only writer)."""
        found: Any = self.client.zrangebyscore(ENDS, "-inf", f"({self.drop_before_us}")
        self._expired = list(found)

    def flush(self, pipe: redis.client.Pipeline) -> int:
        """Queue the writes into ``pipe`` (in MULTI); returns the number of visitor-days written."""
        expired = {k.decode() if isinstance(k, bytes) else k for k in self._expired}
        gone = sorted((expired - self._states.keys()) | self._empty)
        # Many keys per command: a command costs the client more than the bytes it carries.
        for i in range(0, len(gone), CHUNK):
            pipe.delete(*gone[i : i + CHUNK])
            pipe.zrem(ENDS, *gone[i : i + CHUNK])
        states = list(self._states.items())
        for i in range(0, len(states), CHUNK):
            written = states[i : i + CHUNK]
            pipe.mset({key: text for key, (text, _) in written})
            pipe.zadd(ENDS, {key: end for key, (_, end) in written})
        for gen, members in self._flags.items():
            pipe.sadd(flags_key(gen), *sorted(members))
        pipe.hset(META, mapping={"watermark_ms": self.watermark_ms, "dropped_before_us": self.drop_before_us})
        return len(self._states)

    def write(self) -> int:
        """Flush in a transaction of its own (a fresh start's seed, which joins no micro-batch's
        commit); returns the number of visitor-days written."""
        with self.client.pipeline(transaction=True) as pipe:
            written = self.flush(pipe)
            pipe.execute()
        return written
