"""The batch run's lease on the real MongoDB-protocol server: one holder, taken over only once it
expired whatever host or pid held it (the compose batch service is always ``batch:1``), kept alive
by its heartbeat, and a run that lost it can no longer pass a check."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.collection import Collection

from batch_layer.lease import BatchLease, LeaseHeld, LeaseLost
from config.settings import Settings
from contract import utc
from stores.mongo.generations import POINTERS
from stores.mongo.lease import LEASE_ID, MongoLeaseStore
from tests.lease_cases import one_holder_and_rising_fences


@pytest.fixture
def leases(stack: Settings) -> Iterator[Collection[dict[str, Any]]]:
    client: MongoClient[dict[str, Any]] = MongoClient(stack.mongo_url)
    name = f"t_lease_{uuid.uuid4().hex[:10]}"
    try:
        yield client[name][POINTERS]
    finally:
        client.drop_database(name)
        client.close()


def test_one_run_holds_the_lease_and_each_acquisition_gets_a_higher_fence(
    leases: Collection[dict[str, Any]],
) -> None:
    _, second = one_holder_and_rising_fences(BatchLease(MongoLeaseStore(leases.database), duration_s=60))
    assert (leases.find_one({"_id": LEASE_ID}) or {})["token"] == second.token


def test_a_container_run_killed_holding_the_lease_is_taken_over_once_it_expired(
    leases: Collection[dict[str, Any]],
) -> None:
    """The compose batch service always runs as host ``batch``, pid 1: a liveness check by host and
    pid would find every dead run alive. Only the expiry counts."""
    lease = BatchLease(MongoLeaseStore(leases.database), duration_s=60)

    def held_by_a_dead_container_run(expires_in_s: float) -> None:
        now = utc.now()
        doc = {"token": "dead", "fence": 7, "owner": "batch:1", "since": now - timedelta(hours=2)}
        doc["expires_at"] = now + timedelta(seconds=expires_in_s)
        leases.replace_one({"_id": LEASE_ID}, {"_id": LEASE_ID, **doc}, upsert=True)

    held_by_a_dead_container_run(30)
    with pytest.raises(LeaseHeld, match="batch:1, fence 7"):
        lease.acquire("batch:1")
    held_by_a_dead_container_run(-1)
    taken = lease.acquire("batch:1")
    assert taken.fence == 8
    taken.check("publish")


def test_the_heartbeat_keeps_the_lease_and_a_run_that_lost_it_fails_every_check(
    leases: Collection[dict[str, Any]],
) -> None:
    lease = BatchLease(MongoLeaseStore(leases.database), duration_s=1.5)
    with lease.held("host-a:10") as held:
        time.sleep(3.5)  # more than twice the lease: only the heartbeat kept it
        held.check("write the views")
        assert lease.document() is not None
        # Another run finds the lease expired (as after a pause of this one) and takes it over.
        leases.update_one({"_id": LEASE_ID}, {"$set": {"expires_at": utc.now() - timedelta(seconds=1)}})
        other = lease.acquire("host-b:20")
        deadline = time.monotonic() + 10
        while not held.lost.is_set() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert held.lost.is_set()  # the heartbeat found its token gone
        with pytest.raises(LeaseLost, match="was lost"):
            held.check("publish")
    assert (
        record := lease.document()
    ) is not None and record.token == other.token  # a lost lease is not released


def test_a_lease_about_to_expire_fails_the_check(leases: Collection[dict[str, Any]]) -> None:
    lease = BatchLease(MongoLeaseStore(leases.database), duration_s=60)
    held = lease.acquire("host-a:10")
    leases.update_one({"_id": LEASE_ID}, {"$set": {"expires_at": utc.now() + timedelta(seconds=5)}})
    with pytest.raises(LeaseLost, match=r"only \d+\.\d s of the lease left"):
        held.check("publish")
