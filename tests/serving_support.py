"""Views built in Python from events, for the serving tests: batch documents and realtime hashes
computed the oracle's way (tests.oracle), in the stored shapes the serving layer reads.

The realtime writer here is a stand-in for the speed layer's (same Redis layout,
generations.keys); integration tests switch to the real one when it exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis
from datasketches import hll_sketch, tgt_hll_type

from contract import PageView
from generations import keys
from serving_layer.memory import MemoryBatchReader, MemoryRealtimeReader
from serving_layer.model import BatchDoc, GenerationInfo, Served, SpeedCommit
from tests.oracle import DIMENSION_KEYS, Bucket, dedup, recount

LG_K = 12
VIEW_KEYS: dict[str, Callable[[PageView], str]] = DIMENSION_KEYS
TEST_FINGERPRINT = "test"


@dataclass(frozen=True)
class Logged:
    """An event with its position in the log."""

    partition: int
    offset: int
    event: PageView


def sketch_bytes(visitors: Iterable[str]) -> bytes | None:
    sketch = hll_sketch(LG_K, tgt_hll_type.HLL_8)
    n = 0
    for v in visitors:
        sketch.update(v)
        n += 1
    return bytes(sketch.serialize_compact()) if n else None


def batch_doc(b: Bucket) -> BatchDoc:
    return BatchDoc(
        pv=b.pv,
        uv=len(b.visitors),
        sk=sketch_bytes(b.visitors),
        h_pv=list(b.hours_pv),
        h_uv=[len(v) for v in b.hours_visitors],
        h_sk=[sketch_bytes(v) for v in b.hours_visitors],
    )


def realtime_fields(b: Bucket) -> dict[str, bytes]:
    """The hash the speed layer keeps for one (generation, view, key, day)."""
    fields: dict[str, bytes] = {keys.PV: str(b.pv).encode()}
    sk = sketch_bytes(b.visitors)
    if sk is not None:
        fields[keys.SKETCH] = sk
    for hour, pv in enumerate(b.hours_pv):
        if pv:
            fields[keys.hour_field(keys.PV, hour)] = str(pv).encode()
            hour_sk = sketch_bytes(b.hours_visitors[hour])
            assert hour_sk is not None
            fields[keys.hour_field(keys.SKETCH, hour)] = hour_sk
    return fields


def split(logged: Sequence[Logged], cut: dict[int, int]) -> tuple[list[PageView], list[PageView]]:
    """(events below the cut, events at or above it)."""
    below = [x.event for x in logged if x.offset < cut.get(x.partition, 0)]
    above = [x.event for x in logged if x.offset >= cut.get(x.partition, 0)]
    return below, above


def end_offsets(logged: Iterable[Logged]) -> dict[int, int]:
    out: dict[int, int] = {}
    for x in logged:
        out[x.partition] = max(out.get(x.partition, 0), x.offset + 1)
    return out


def load_memory(
    batch: MemoryBatchReader,
    realtime: MemoryRealtimeReader,
    gen: int,
    cut: dict[int, int],
    logged: Sequence[Logged],
    commit: dict[int, int] | None = None,
) -> None:
    """Make ``gen`` the served generation: batch views of the events below ``cut``, realtime views
    of those at or above it up to ``commit`` (default: all of them)."""
    commit = commit if commit is not None else end_offsets(logged)
    visible = [x for x in logged if x.offset < max(commit.get(x.partition, 0), cut.get(x.partition, 0))]
    below, above = split(visible, cut)
    day_map: dict[str, dict[str, int]] = {}
    for view, buckets in recount(below).items():
        day_map[view] = {day: gen for _, day in buckets}
        by_day: dict[str, list[tuple[str, int]]] = {}
        for (key, day), b in buckets.items():
            batch.docs[(view, gen, key, day)] = batch_doc(b)
            by_day.setdefault(day, []).append((key, b.pv))
        for day, counts in by_day.items():
            batch.rankings[(view, gen, day)] = sorted(counts, key=lambda kv: (-kv[1], kv[0]))
    batch.generations[gen] = GenerationInfo(
        gen,
        dict(cut),
        datetime.now(UTC),
        datetime.now(UTC),
        day_map,
        {view: TEST_FINGERPRINT for view in VIEW_KEYS},
        {view: {"per_site": view not in ("page", "site")} for view in VIEW_KEYS},
    )
    realtime.views[gen] = frozenset(keys.view_mark(view, TEST_FINGERPRINT) for view in VIEW_KEYS)
    batch.served = gen
    for view, buckets in recount(above).items():
        for (key, day), b in buckets.items():
            realtime.hashes[(gen, view, key, day)] = realtime_fields(b)
            realtime.ranks.setdefault((gen, view, day), {})[key] = float(b.pv)
    realtime.served = Served(gen, dict(cut))
    realtime.commit = SpeedCommit(0, dict(commit))


def commit_realtime(client: redis.Redis, logged: Sequence[Logged], upto: dict[int, int]) -> None:
    """Stand-in for one speed-layer micro-batch commit: for every active generation, its realtime
    views of the events at or above its cut and below ``upto``, written with the commit record in
    one transaction under WATCH of the active set (as the generation handshake requires)."""

    def attempt(pipe: redis.client.Pipeline) -> None:
        active = keys.decode_active(pipe.get(keys.ACTIVE))
        previous = keys.decode_commit(pipe.get(keys.SPEED_COMMIT))
        pipe.multi()
        for gen, cut in active.items():
            events = [
                x.event for x in logged if cut.get(x.partition, 0) <= x.offset < upto.get(x.partition, 0)
            ]
            for view, buckets in recount(events).items():
                for (key, day), b in buckets.items():
                    name = keys.realtime_key(gen, view, key, day)
                    pipe.delete(name)
                    pipe.hset(name, mapping=dict(realtime_fields(b)))
                    pipe.zadd(keys.realtime_rank_key(gen, view, day), {key: b.pv})
        pipe.set(keys.SPEED_COMMIT, keys.encode_commit(keys.SpeedCommit(previous.batch_id + 1, dict(upto))))

    client.transaction(attempt, keys.ACTIVE, keys.SPEED_COMMIT)


def count(
    events: Iterable[PageView], view: str, key: str, start: datetime, end: datetime
) -> tuple[int, set[str]]:
    """(page views, visitors) of a key in ``[start, end)``: the oracle's answer to a range query."""
    key_of = VIEW_KEYS[view]
    pv, visitors = 0, set()
    for e in dedup(events):
        if key_of(e) == key and start <= e.ts < end:
            pv += 1
            visitors.add(e.visitor_id)
    return pv, visitors


def assert_estimate(answer: Any, exact: int) -> None:
    """An HLL answer within its stated error of the exact count (small sets are near exact)."""
    if answer["exact"] if isinstance(answer, dict) else answer.exact:
        got = answer["estimate"] if isinstance(answer, dict) else answer.estimate
        assert got == exact
        return
    est = answer["estimate"] if isinstance(answer, dict) else answer.estimate
    assert abs(est - exact) <= max(2.0, 0.05 * exact), (est, exact)
