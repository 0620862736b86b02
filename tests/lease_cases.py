"""The lease protocol's cases that hold on every lease store (batch_layer.lease over
stores.lease.LeaseStore): run on the in-memory store by tests/unit/batch_layer/test_lease.py and on
the MongoDB-protocol server by tests/integration/batch_layer/test_batch_lease.py."""

from __future__ import annotations

import pytest

from batch_layer.lease import BatchLease, Held, LeaseHeld, LeaseLost


def one_holder_and_rising_fences(lease: BatchLease) -> tuple[Held, Held]:
    """One run holds the lease, each acquisition gets a higher fence, and only the holder's token
    releases it; returns (first holder, second holder): the store must hold the second's token."""
    first = lease.acquire("host-a:10")
    assert first.fence == 1
    with pytest.raises(LeaseHeld, match=r"host-a:10, fence 1"):
        lease.acquire("host-b:20")
    first.check("a step")
    lease.release(first)
    second = lease.acquire("host-b:20")
    assert second.fence == 2 and second.token != first.token
    with pytest.raises(LeaseLost, match=r"taken over .*host-b:20"):
        first.check("publish")
    lease.release(first)  # only the holder's token releases it
    return first, second
