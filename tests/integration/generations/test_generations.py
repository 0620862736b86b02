"""The generation registry on the real MongoDB-protocol server and Redis: the life of a generation,
and the handshake with the speed layer (the cut, the active set, the served pointer and its hot
copy). Kafka is not needed: the log end is given as a function."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from pymongo import MongoClient
from pymongo.database import Database

from config.settings import Settings
from contract import utc
from generations.model import GenerationError, Offsets
from generations.registry import GenerationRegistry
from generations.state import GenerationState as S
from stores.mongo.generations import MongoGenerationStore
from stores.redis import keys
from stores.redis.handshake import RedisHotCopy
from tests.integration.conftest import LogEnd, empty_redis_db

REDIS_DB = 9
"""Not used by any other integration test."""


@pytest.fixture
def db(stack: Settings) -> Iterator[Database[dict[str, Any]]]:
    client: MongoClient[dict[str, Any]] = MongoClient(stack.mongo_url)
    name = f"t_gen_{uuid.uuid4().hex[:10]}"
    try:
        yield client[name]
    finally:
        client.drop_database(name)
        client.close()


@pytest.fixture
def r(stack: Settings) -> Iterator[redis.Redis]:
    with empty_redis_db(stack, REDIS_DB) as client:
        yield client


@pytest.fixture
def log() -> LogEnd:
    return LogEnd()


@pytest.fixture
def registry(db: Database[dict[str, Any]], r: redis.Redis, log: LogEnd) -> GenerationRegistry:
    return GenerationRegistry(MongoGenerationStore(db), RedisHotCopy(r), log)


def commit_speed(r: redis.Redis, batch_id: int, offsets: Offsets) -> None:
    r.set(keys.SPEED_COMMIT, keys.encode_commit(keys.SpeedCommit(batch_id, offsets)))


# --- the life of a generation -----------------------------------------------------------------
def test_before_any_run_the_speed_layer_counts_for_generation_zero(
    registry: GenerationRegistry, r: redis.Redis
) -> None:
    assert registry.served() is None
    assert registry.ensure_hot_copy() == {0: {}}
    assert keys.decode_served(r.get(keys.SERVED)) == keys.Served(0, {})


def test_opening_takes_a_cut_at_or_after_the_log_end_and_the_speed_commit(
    registry: GenerationRegistry, r: redis.Redis, log: LogEnd
) -> None:
    registry.ensure_hot_copy()
    log.end = {0: 50, 1: 20}
    commit_speed(r, 7, {0: 40, 1: 30, 2: 5})  # partition 1: the commit is ahead of the log end read
    g = registry.open("full")
    assert (g.gen, g.kind, g.state) == (1, "full", S.BUILDING)
    assert g.cut == {0: 50, 1: 30, 2: 5}
    # The speed layer now counts the new generation from its cut, beside generation 0.
    assert registry.active_cuts() == {0: {}, 1: g.cut}
    stored = registry.get(1)
    assert stored is not None and stored.state is S.BUILDING and stored.cut == g.cut
    assert registry.open("incremental").gen == 2


def test_a_speed_commit_during_the_opening_is_seen_by_the_cut(
    registry: GenerationRegistry, r: redis.Redis, log: LogEnd
) -> None:
    """The speed layer commits a micro-batch between the opening's read of its commit and the
    opening's write: the transaction must retry, so the cut is not below an already counted batch."""
    registry.ensure_hot_copy()
    commit_speed(r, 1, {0: 10})
    reads = []

    def log_end() -> Offsets:
        reads.append(1)
        if len(reads) == 1:  # inside the WATCH of the first attempt
            commit_speed(r, 2, {0: 80})  # another connection than the transaction's
        return {0: 20}

    registry._log_end_offsets = log_end
    g = registry.open("incremental")
    assert len(reads) == 2 and g.cut == {0: 80}
    assert registry.active_cuts()[g.gen] == {0: 80}


def test_publishing_switches_the_pointer_and_the_hot_copy(
    registry: GenerationRegistry, r: redis.Redis, log: LogEnd
) -> None:
    registry.ensure_hot_copy()
    log.end = {0: 10}
    first = registry.open("full")
    assert registry.publish(first) is None
    stored = registry.served()  # MongoDB keeps times to the millisecond: compare the rest
    assert stored is not None and (stored.gen, stored.state, stored.cut) == (1, S.SERVED, {0: 10})
    assert first.state is S.SERVED and first.served_at is not None
    assert registry.active_cuts() == {1: {0: 10}}  # generation 0 leaves the active set
    assert keys.decode_served(r.get(keys.SERVED)) == keys.Served(1, {0: 10})

    log.end = {0: 25}
    second = registry.open("incremental")
    log.end = {0: 30}
    third = registry.open("incremental")  # a later run's generation, still building
    previous = registry.publish(second)
    assert previous is not None and previous.gen == 1
    assert registry.get(1).state is S.SUPERSEDED and registry.served().gen == 2
    # The served generation and the ones still building newer than it stay active.
    assert registry.active_cuts() == {2: {0: 25}, 3: third.cut}


def test_a_failed_generation_leaves_the_active_set_and_the_served_one_unchanged(
    registry: GenerationRegistry, log: LogEnd
) -> None:
    registry.ensure_hot_copy()
    log.end = {0: 10}
    served = registry.open("full")
    registry.publish(served)
    log.end = {0: 20}
    doomed = registry.open("incremental")
    registry.fail(doomed, "boom " * 1000)
    stored = registry.get(doomed.gen)
    assert stored is not None and stored.state is S.FAILED and len(stored.error or "") == 2000
    assert stored.finished_at is not None
    assert registry.active_cuts() == {1: {0: 10}} and registry.served().gen == served.gen


def test_generations_left_in_progress_by_a_crashed_run_are_failed(
    registry: GenerationRegistry, log: LogEnd
) -> None:
    registry.ensure_hot_copy()
    building = registry.open("full")
    registry.store.generations.insert_one(
        {"_id": 7, "kind": "full", "state": "opening", "cut": {}, "started_at": utc.now()}
    )
    assert sorted(g.gen for g in registry.abandon_stale()) == [building.gen, 7]
    assert {g.gen: g.state for g in registry.all()} == {building.gen: S.FAILED, 7: S.FAILED}
    assert building.gen not in registry.active_cuts()


def test_of_a_publish_and_a_takeover_the_first_wins_and_the_other_changes_nothing(
    registry: GenerationRegistry, log: LogEnd
) -> None:
    """A run paused past its lease races the run that took it over: the takeover fails the paused
    run's generation, whose publish must then change nothing; a generation published first is no
    longer abandoned."""
    registry.ensure_hot_copy()
    log.end = {0: 10}
    paused = registry.open("incremental")
    assert [g.gen for g in registry.abandon_stale()] == [paused.gen]  # the takeover came first
    with pytest.raises(GenerationError, match=f"generation {paused.gen} is no longer building"):
        registry.publish(paused)
    assert registry.served() is None and (registry.get(paused.gen) or paused).state is S.FAILED
    assert registry.hot.served() == keys.Served(0, {})

    published = registry.open("incremental")
    registry.publish(published)  # this time the paused run published first
    assert registry.abandon_stale() == []
    assert not registry.fail(published, "too late")
    assert (registry.served() or paused).gen == published.gen


def test_retiring_keeps_the_newest_published_and_dropping_marks_the_document(
    registry: GenerationRegistry, log: LogEnd
) -> None:
    registry.ensure_hot_copy()
    for end in (10, 20, 30):
        log.end = {0: end}
        registry.publish(registry.open("incremental"))
    retired = registry.retire(keep=2)
    assert [g.gen for g in retired] == [1] and retired[0].retired_at is not None
    assert [g.state for g in registry.all()] == [S.RETIRED, S.SUPERSEDED, S.SERVED]

    registry.mark_dropped(retired[0])
    assert retired[0].state is S.RETIRED_DROPPED
    assert registry.store.generations.find_one({"_id": 1}, {"_id": 0, "state": 1}) == {
        "state": "retired-dropped"
    }
    with pytest.raises(ValueError, match="never dropped"):
        registry.mark_dropped(registry.served())


def test_redis_losing_its_copy_is_restored_from_mongodb(
    registry: GenerationRegistry, r: redis.Redis, log: LogEnd
) -> None:
    registry.ensure_hot_copy()
    log.end = {0: 10, 1: 4}
    served = registry.open("full")
    registry.publish(served)
    r.flushdb()
    assert registry.ensure_hot_copy() == {1: {0: 10, 1: 4}}
    assert keys.decode_served(r.get(keys.SERVED)) == keys.Served(1, {0: 10, 1: 4})


def test_documents_stored_as_plain_strings_load_and_an_unknown_state_fails_clearly(
    registry: GenerationRegistry,
) -> None:
    base = {"kind": "full", "cut": {"0": 1}, "started_at": utc.now()}
    registry.store.generations.insert_many(
        [{"_id": 1, "state": "failed-dropped", **base}, {"_id": 2, "state": "superseded", **base}]
    )
    assert [g.state for g in registry.all()] == [S.FAILED_DROPPED, S.SUPERSEDED]
    registry.store.generations.insert_one({"_id": 3, "state": "paused", **base})
    with pytest.raises(GenerationError, match="generation 3: unknown state 'paused'"):
        registry.all()
