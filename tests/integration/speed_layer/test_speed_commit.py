"""The speed layer's commit protocol (speed_layer.commit) on the real Redis, without Spark.

The view rows come from plain Python, as the job's Spark computation would give them for a set of
active generations; the generation registry is the real one (MongoDB-protocol server and Redis),
so opening a generation during a commit runs the real cut handshake. Kafka is not needed: the log
end is given as a function.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from datasketches import hll_sketch
from pymongo import MongoClient

from config.settings import Settings
from generations.model import Generation, Offsets, SpeedCommit
from generations.registry import GenerationRegistry
from speed_layer.commit import Committer, RealtimeStateLost, already_committed
from speed_layer.outputs import RealtimeRows
from speed_layer.progress import BatchReport
from stores.mongo.generations import MongoGenerationStore
from stores.redis import keys
from stores.redis.handshake import RedisHotCopy, RedisSpeedCommits
from tests.integration.conftest import LogEnd, empty_redis_db
from tests.integration.filters_check import assert_counts_match_lists

REDIS_DB = 12
"""Not used by any other integration test."""
VIEW = "page"
MARKS = ["country@f1", "page@f0"]
"""The view marks (name@fingerprint) the committer records for each generation it counts."""
DAY = "2024-05-01"
LAG = {0: 7, 1: 0}


@dataclass(frozen=True)
class Event:
    partition: int
    offset: int
    key: str
    visitor: str
    hour: int = 10


def batch(partition: int, first: int, *events: tuple[str, str]) -> list[Event]:
    """Events (key, visitor) at consecutive offsets of one partition, from ``first``."""
    return [Event(partition, first + i, key, visitor) for i, (key, visitor) in enumerate(events)]


def sketch(visitors: list[str]) -> bytes:
    s = hll_sketch(12)
    for v in visitors:
        s.update(v)
    return bytes(s.serialize_compact())


class Rows:
    """The rows callable: one micro-batch's view rows for a set of active generations, each event
    counted for every generation whose cut it is at or past (what SpeedJob._rows computes with
    Spark). Records the sets it was called for; ``during`` runs inside the first call, that is
    while the commit holds its WATCH."""

    def __init__(self, events: list[Event], during: Callable[[], Any] | None = None) -> None:
        self.events = events
        self.during = during
        self.calls: list[dict[int, Offsets]] = []

    def __call__(self, active: dict[int, Offsets]) -> RealtimeRows:
        self.calls.append(active)
        if self.during is not None and len(self.calls) == 1:
            self.during()
        rows: list[dict[str, Any]] = []
        for gen, cut in sorted(active.items()):
            by_key: dict[str, list[Event]] = defaultdict(list)
            for e in self.events:
                if e.offset >= cut.get(e.partition, 0):
                    by_key[e.key].append(e)
            for key, events in sorted(by_key.items()):
                hours: dict[int, list[str]] = defaultdict(list)
                for e in events:
                    hours[e.hour].append(e.visitor)
                rows.append(
                    {
                        "gen": gen,
                        "view": VIEW,
                        "key": key,
                        "day": DAY,
                        "pv": len(events),
                        "uv": len({e.visitor for e in events}),
                        "sk": sketch([e.visitor for e in events]),
                        "hours": [
                            {"hour": h, "pv": len(vs), "uv": len(set(vs)), "sk": sketch(vs)}
                            for h, vs in sorted(hours.items())
                        ],
                    }
                )
        return RealtimeRows(rows)


@pytest.fixture
def r(stack: Settings) -> Iterator[redis.Redis]:
    with empty_redis_db(stack, REDIS_DB) as client:
        yield client


@pytest.fixture
def log_end() -> LogEnd:
    return LogEnd()


@pytest.fixture
def registry(stack: Settings, r: redis.Redis, log_end: LogEnd) -> Iterator[GenerationRegistry]:
    client: MongoClient[dict[str, Any]] = MongoClient(stack.mongo_url)
    name = f"t_commit_{uuid.uuid4().hex[:10]}"
    try:
        yield GenerationRegistry(MongoGenerationStore(client[name]), RedisHotCopy(r), log_end)
    finally:
        client.drop_database(name)
        client.close()


@pytest.fixture
def committer(r: redis.Redis, registry: GenerationRegistry) -> Committer:
    return Committer(RedisSpeedCommits(r), registry, MARKS, lambda: LAG)


def pv(r: redis.Redis, gen: int, key: str, hour: int | None = None) -> int:
    field = keys.PV if hour is None else keys.hour_field(keys.PV, hour)
    return int(r.hget(keys.realtime_key(gen, VIEW, key, DAY), field) or 0)


def stored_commit(r: redis.Redis) -> SpeedCommit:
    return keys.decode_commit(r.get(keys.SPEED_COMMIT))


def stats(r: redis.Redis) -> dict[str, Any]:
    return dict(json.loads(r.get(keys.SPEED_STATS) or "{}"))


def snapshot(r: redis.Redis) -> dict[Any, Any]:
    """Every key of the db with its serialised value: equal snapshots mean nothing was written."""
    return {k: r.dump(k) for k in r.keys("*")}


def report(batch_id: int, events: list[Event], invalid: dict[str, int] | None = None) -> BatchReport:
    reasons = invalid or {}
    return BatchReport(
        batch_id,
        rows=len(events) + sum(reasons.values()),
        invalid=sum(reasons.values()),
        invalid_reasons=dict(reasons),
    )


def test_a_batch_commits_once_and_a_replay_counts_nothing_twice(r: redis.Redis, committer: Committer) -> None:
    # Batch 0 on an empty Redis: no active generation yet, so the commit creates generation 0
    # (ensure_hot_copy) and tries again; the rows are computed once, for generation 0.
    events0 = batch(0, 0, ("/a", "v1"), ("/a", "v2"), ("/b", "v1")) + batch(1, 0, ("/a", "v3"))
    ends0 = {0: 3, 1: 1}
    rows0 = Rows(events0)
    written, gens = committer.commit(0, None, ends0, report(0, events0, {"url": 2}), rows0)
    assert (written, gens) == (2, [0])
    assert rows0.calls == [{0: {}}]
    assert (pv(r, 0, "/a"), pv(r, 0, "/a", hour=10), pv(r, 0, "/b")) == (3, 3, 1)
    assert r.zscore(keys.realtime_rank_key(0, VIEW, DAY), "/a") == 3
    assert r.smembers(keys.REALTIME_GENS) == {b"0"}
    assert {m.decode() for m in r.smembers(keys.realtime_views_key(0))} == {keys.VIEWS_SENTINEL, *MARKS}
    assert stored_commit(r) == SpeedCommit(0, ends0)
    # No realtime key expires by time: they go with their generation's retirement.
    realtime = list(r.scan_iter(match=keys.realtime_pattern(0)))
    assert realtime and {r.ttl(k) for k in realtime} == {-1}
    first = stats(r)
    assert (first["batch_id"], first["rows"], first["generations"], first["lag"]) == (
        0,
        6,
        [0],
        {"0": 7, "1": 0},
    )
    assert (first["invalid_total"], first["invalid_reasons_total"]) == (2, {"url": 2})

    # Batch 1 follows: it adds to the same keys, and its dead letters to the totals.
    events1 = batch(0, 3, ("/a", "v4")) + batch(1, 1, ("/c", "v5"))
    ends1 = {0: 4, 1: 2}
    assert committer.commit(1, ends0, ends1, report(1, events1, {"url": 1, "ts": 1}), Rows(events1)) == (
        2,
        [0],
    )
    assert (pv(r, 0, "/a"), pv(r, 0, "/b"), pv(r, 0, "/c")) == (4, 1, 1)
    assert stored_commit(r) == SpeedCommit(1, ends1)
    assert (stats(r)["invalid_total"], stats(r)["invalid_reasons_total"]) == (4, {"url": 3, "ts": 1})

    # Spark replays batch 1 after a crash (same id, same offsets): the job's first look skips it,
    # and a commit of it all the same writes nothing and computes no rows.
    assert already_committed(stored_commit(r), 1, ends0)
    before = snapshot(r)
    replay = Rows(events1)
    assert committer.commit(1, ends0, ends1, report(1, events1, {"url": 1, "ts": 1}), replay) == (0, [])
    assert replay.calls == []
    assert snapshot(r) == before
    assert (pv(r, 0, "/a"), pv(r, 0, "/c"), stats(r)["invalid_total"]) == (4, 1, 4)
    # An older batch id replayed is skipped too.
    assert committer.commit(0, None, ends0, report(0, events0), Rows(events0)) == (0, [])
    assert snapshot(r) == before


def test_a_gap_stops_the_job_and_writes_nothing(r: redis.Redis, committer: Committer) -> None:
    ends: list[Offsets] = []
    for b in range(4):  # batches 0-3, one event each
        events = batch(0, b, (f"/p{b}", "v"))
        ends.append({0: b + 1})
        committer.commit(b, ends[b - 1] if b else None, ends[b], report(b, events), Rows(events))
    assert stored_commit(r) == SpeedCommit(3, {0: 4})
    before = snapshot(r)

    # Redis holds batch 3, the checkpoint says batch 5 is next: batch 4's writes are missing.
    events5 = batch(0, 5, ("/p5", "v"))
    rows5 = Rows(events5)
    with pytest.raises(RealtimeStateLost, match=r"commit of batch 3 .* checkpoint is at batch 4"):
        committer.commit(5, {0: 5}, {0: 6}, report(5, events5), rows5)
    # The batch ids follow, but the checkpoint's batch 3 ended elsewhere: Redis is from another log
    # position (restored from an old file, or a checkpoint of another stream).
    events4 = batch(0, 4, ("/p4", "v"))
    rows4 = Rows(events4)
    with pytest.raises(RealtimeStateLost, match="make rebuild-realtime"):
        committer.commit(4, {0: 3}, {0: 5}, report(4, events4), rows4)
    assert rows5.calls == rows4.calls == []
    assert snapshot(r) == before

    # With the checkpoint's offsets agreeing, batch 4 commits.
    assert committer.commit(4, {0: 4}, {0: 5}, report(4, events4), rows4) == (1, [0])
    assert stored_commit(r) == SpeedCommit(4, {0: 5})


def test_a_generation_opened_mid_batch_makes_the_commit_recompute_for_the_new_set(
    r: redis.Redis, registry: GenerationRegistry, committer: Committer, log_end: LogEnd
) -> None:
    events0 = batch(0, 0, ("/a", "v1"), ("/a", "v2")) + batch(1, 0, ("/b", "v3"))
    ends0 = {0: 2, 1: 1}
    committer.commit(0, None, ends0, report(0, events0), Rows(events0))

    # While batch 1's rows are computed for generation 0, a batch run opens generation 1: its cut
    # is the log end (at or past this batch, which was read from the log before).
    events1 = batch(0, 2, ("/a", "v4"), ("/c", "v5")) + batch(1, 1, ("/b", "v6"))
    ends1 = {0: 4, 1: 2}
    log_end.end = {0: 5, 1: 2}
    opened: list[Generation] = []
    rows1 = Rows(events1, during=lambda: opened.append(registry.open("full")))
    written, gens = committer.commit(1, ends0, ends1, report(1, events1), rows1)

    (gen1,) = opened
    assert (gen1.gen, gen1.cut) == (1, {0: 5, 1: 2})
    # The EXEC failed (the active set changed under WATCH); the second attempt computed the rows
    # again, for both generations, and committed those.
    assert rows1.calls == [{0: {}}, {0: {}, 1: {0: 5, 1: 2}}]
    assert gens == [0, 1]
    assert written == 3  # generation 0's /a, /b, /c; nothing of this batch is past generation 1's cut
    assert (pv(r, 0, "/a"), pv(r, 0, "/b"), pv(r, 0, "/c")) == (3, 2, 1)  # batch 1 counted once
    assert stored_commit(r) == SpeedCommit(1, ends1)
    assert stats(r)["generations"] == [0, 1]
    # Generation 1 is recorded as counted with this job's views from its first batch on, and has
    # no realtime values yet.
    assert {m.decode() for m in r.smembers(keys.realtime_views_key(1))} == {keys.VIEWS_SENTINEL, *MARKS}
    assert set(r.scan_iter(match=keys.realtime_pattern(1))) == {keys.realtime_views_key(1).encode()}
    # Listed for teardown already: nothing expires by time, so its views key must go with it.
    assert r.smembers(keys.REALTIME_GENS) == {b"0", b"1"}

    # The next batch counts into both: generation 1 from its cut on.
    events2 = batch(0, 4, ("/a", "v1"), ("/d", "v7")) + batch(1, 2, ("/a", "v8"))
    ends2 = {0: 6, 1: 3}
    rows2 = Rows(events2)
    assert committer.commit(2, ends1, ends2, report(2, events2), rows2) == (4, [0, 1])
    assert rows2.calls == [{0: {}, 1: {0: 5, 1: 2}}]
    assert {k: pv(r, 0, k) for k in ("/a", "/b", "/c", "/d")} == {"/a": 5, "/b": 2, "/c": 1, "/d": 1}
    assert (pv(r, 1, "/a"), pv(r, 1, "/d"), pv(r, 1, "/b")) == (1, 1, 0)  # offset 4 of p0 < cut 5
    assert r.smembers(keys.REALTIME_GENS) == {b"0", b"1"}


@pytest.mark.parametrize("when", ["before the commit", "while the rows are computed"])
def test_redis_flushed_after_the_first_look_is_detected(
    r: redis.Redis, committer: Committer, when: str
) -> None:
    events0 = batch(0, 0, ("/a", "v1"))
    committer.commit(0, None, {0: 1}, report(0, events0), Rows(events0))
    events1 = batch(0, 1, ("/a", "v2"))
    assert not already_committed(stored_commit(r), 1, {0: 1})  # the job's first look: batch 1 is new

    if when == "before the commit":
        r.flushdb()
        rows = Rows(events1)
    else:
        rows = Rows(events1, during=r.flushdb)
    with pytest.raises(RealtimeStateLost, match=r"commit of batch -1 .* checkpoint is at batch 0"):
        committer.commit(1, {0: 1}, {0: 2}, report(1, events1), rows)
    # Found under WATCH, before any write: batch 1 was not counted on top of the hole.
    assert rows.calls == ([] if when == "before the commit" else [{0: {}}])
    assert r.dbsize() == 0


class RowsWithFilters(Rows):
    """:class:`Rows` and, as the job's micro-batch gives them, the filter table's rows of the same
    events for every generation (RealtimeRows.filters: one Arrow table, ``gen`` beside the
    table's columns), one row per event."""

    def __call__(self, active: dict[int, Offsets]) -> RealtimeRows:
        import datetime

        import pyarrow as pa

        from stores.redis.filter_rows import GEN
        from views import filter_table

        rows = super().__call__(active)
        table: list[dict[str, Any]] = []
        for gen, cut in sorted(active.items()):
            for e in self.events:
                if e.offset >= cut.get(e.partition, 0):
                    values = {name: "(none)" for name in filter_table.DIMENSIONS}
                    table.append(
                        {
                            GEN: gen,
                            "site": "shop.example.com",
                            "day": datetime.date.fromisoformat(DAY),
                            "hour": e.hour,
                            **values,
                            "page": e.key,
                            "visitor": hash(e.visitor) & 0xFFFF,
                            "pageviews": 1,
                        }
                    )
        schema = filter_table.arrow_schema().insert(0, pa.field(GEN, pa.int32()))
        rows.filters = pa.Table.from_pylist(table, schema=schema)
        return rows


def test_filter_rows_are_committed_with_the_batch_and_a_replay_adds_none(
    r: redis.Redis, committer: Committer
) -> None:
    from stores.redis.filter_rows import decode_blobs

    events0 = batch(0, 0, ("/a", "v1"), ("/b", "v2"))
    ends0 = {0: 2}
    assert committer.commit(0, None, ends0, report(0, events0), RowsWithFilters(events0)) == (2, [0])
    key = keys.filter_rows_key(0, "shop.example.com", DAY)
    assert decode_blobs(r.lrange(key, 0, -1)).column("page").to_pylist() == ["/a", "/b"]
    events1 = batch(0, 2, ("/c", "v1"))
    ends1 = {0: 3}
    committer.commit(1, ends0, ends1, report(1, events1), RowsWithFilters(events1))
    assert r.llen(key) == 2  # one stream per micro-batch
    assert decode_blobs(r.lrange(key, 0, -1)).column("page").to_pylist() == ["/a", "/b", "/c"]
    # Their counts, incremented in the same transactions: the rows of the list exactly.
    sizes = keys.filter_sizes_key(0, "shop.example.com")
    assert int(r.hget(sizes, keys.filter_rows_field(DAY)) or 0) == 3
    assert assert_counts_match_lists(r) == 3

    before = snapshot(r)
    replay = RowsWithFilters(events1)
    assert committer.commit(1, ends0, ends1, report(1, events1), replay) == (0, [])
    assert replay.calls == [] and snapshot(r) == before
    assert assert_counts_match_lists(r) == 3  # the replay counted nothing twice


def test_filter_row_counts_of_an_aborted_attempt_are_not_kept(
    r: redis.Redis, registry: GenerationRegistry, committer: Committer, log_end: LogEnd
) -> None:
    """A commit whose EXEC fails (a generation opened under its WATCH) keeps none of its counts: the
    attempt that commits counts the rows it appends, for each generation, and nothing else."""
    events0 = batch(0, 0, ("/a", "v1"), ("/b", "v2"))
    ends0 = {0: 2}
    committer.commit(0, None, ends0, report(0, events0), RowsWithFilters(events0))
    events1 = batch(0, 2, ("/c", "v3"), ("/d", "v4"))
    ends1 = {0: 4}
    log_end.end = {0: 3}  # generation 1's cut: the second event of this batch is past it
    rows1 = RowsWithFilters(events1, during=lambda: registry.open("full"))
    committer.commit(1, ends0, ends1, report(1, events1), rows1)
    assert len(rows1.calls) == 2  # the first attempt's EXEC failed
    counts = {
        gen: int(r.hget(keys.filter_sizes_key(gen, "shop.example.com"), keys.filter_rows_field(DAY)) or 0)
        for gen in (0, 1)
    }
    assert counts == {0: 4, 1: 1}
    assert assert_counts_match_lists(r) == 5
