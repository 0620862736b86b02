"""The batch run's lease: its record and its store, every write a single atomic conditional write
(batch_layer.lease keeps the protocol: acquire, take over, heartbeat, release). Backends:
``stores.mongo.lease``, ``stores.memory.MemoryLeaseStore``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from stores.errors import StoreUnavailable as StoreUnavailable


@dataclass(frozen=True)
class LeaseRecord:
    """The batch run's lease as stored (batch_layer.lease keeps the protocol)."""

    token: str | None
    fence: int
    owner: str | None
    since: datetime | None
    expires_at: datetime | None
    """None: never set (taken as released)."""


class LeaseStore(Protocol):
    """The batch run's lease: one record, every write a single atomic conditional write."""

    def read(self) -> LeaseRecord | None: ...

    def create(self, record: LeaseRecord) -> bool:
        """Store ``record`` if there is no lease record yet; False if there is one."""
        ...

    def replace(self, token: str | None, record: LeaseRecord) -> bool:
        """Replace the record only if it still carries ``token``; whether it did."""
        ...

    def extend(self, token: str, expires_at: datetime) -> bool:
        """Set the expiry of the record carrying ``token``; False if none does. Raises
        :class:`StoreUnavailable` when the store cannot be reached."""
        ...
