"""The daily salts of visitor ids: the record's interface, and its in-memory twin (unit tests).

A page view collected from a web page (api.collect) gets ``visitor_id = H(salt of its UTC day,
site, client address, user agent)``. Every API worker must hash with the same salt on the same day,
so a salt is created once, atomically: :meth:`SaltStore.get_or_create` stores the candidate only if
the day has no salt yet and returns the one stored, whichever worker won. Only today's and
yesterday's salts are kept (:meth:`SaltStore.forget_before`): once a salt is gone, nobody can
recompute a visitor id from an address and a user agent. One backend: ``stores.mongo.salts``.
"""

from __future__ import annotations

from datetime import date
from typing import Protocol


class SaltStore(Protocol):
    async def get_or_create(self, day: date, candidate: bytes) -> bytes:
        """The salt of ``day``: the one stored, or ``candidate`` once stored (create-if-absent)."""
        ...

    async def forget_before(self, day: date) -> int:
        """Deletes the salts of the days before ``day``; returns how many it deleted."""
        ...

    async def days(self) -> list[date]:
        """The days that have a salt, oldest first."""
        ...


class MemorySaltStore:
    """:class:`SaltStore` in a dict (one process: its asyncio loop makes each call atomic)."""

    def __init__(self) -> None:
        self.salts: dict[date, bytes] = {}

    async def get_or_create(self, day: date, candidate: bytes) -> bytes:
        return self.salts.setdefault(day, candidate)

    async def forget_before(self, day: date) -> int:
        old = [d for d in self.salts if d < day]
        for d in old:
            del self.salts[d]
        return len(old)

    async def days(self) -> list[date]:
        return sorted(self.salts)
