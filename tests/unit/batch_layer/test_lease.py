"""The batch run's lease protocol (batch_layer.lease) on the in-memory lease store, with a clock
the test moves (the same protocol on the real MongoDB-protocol server:
tests/integration/batch_layer/test_batch_lease.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from batch_layer.lease import RELEASED, BatchLease, LeaseHeld, LeaseLost
from stores.lease import LeaseRecord
from stores.memory import MemoryLeaseStore
from tests.lease_cases import one_holder_and_rising_fences


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_one_run_holds_the_lease_and_each_acquisition_gets_a_higher_fence() -> None:
    store, clock = MemoryLeaseStore(), Clock()
    _, second = one_holder_and_rising_fences(BatchLease(store, duration_s=60, clock=clock))
    assert store.record is not None and store.record.token == second.token


def test_an_expired_lease_is_taken_over_and_not_before() -> None:
    clock = Clock()
    dead = LeaseRecord("dead", 7, "batch:1", clock.now, clock.now + timedelta(seconds=30))
    lease = BatchLease(MemoryLeaseStore(dead), duration_s=60, clock=clock)
    with pytest.raises(LeaseHeld, match="batch:1, fence 7"):
        lease.acquire("batch:1")
    clock.now += timedelta(seconds=31)
    taken = lease.acquire("batch:1")
    assert taken.fence == 8
    taken.check("publish")


def test_a_lease_about_to_expire_fails_the_check_and_a_released_one_is_free() -> None:
    store, clock = MemoryLeaseStore(), Clock()
    lease = BatchLease(store, duration_s=60, clock=clock)
    held = lease.acquire("host-a:10")
    clock.now += timedelta(seconds=41)
    with pytest.raises(LeaseLost, match=r"only 19\.0 s of the lease left"):
        held.check("publish")
    lease.release(held)
    assert store.record is not None and store.record.expires_at == RELEASED
    assert lease.acquire("host-b:20").fence == 2


def test_the_heartbeat_rides_out_an_unreachable_store_and_marks_a_taken_lease_lost() -> None:
    store = MemoryLeaseStore()
    lease = BatchLease(store, duration_s=0.9)
    with lease.held("host-a:10") as held:
        store.down = True
        time.sleep(0.65)  # two beats fail: logged, the next one tries again
        store.down = False
        time.sleep(0.4)
        assert not held.lost.is_set()
        held.check("write the views")
        assert store.record is not None
        store.record = LeaseRecord("other", held.fence + 1, "host-b:20", None, None)
        deadline = time.monotonic() + 5
        while not held.lost.is_set() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert held.lost.is_set()
        with pytest.raises(LeaseLost, match="was lost"):
            held.check("publish")
    assert store.record.token == "other"  # a lost lease is not released
