"""Visitor ids without cookies and without stored addresses.

``visitor_id = BLAKE2b(key = salt of the UTC day, site, client address, user agent)``, 128 bits in
hex: one browser on one site is one visitor for a UTC day, two sites cannot link their visitors,
and the id reveals nothing of the address without the salt. Salts are random (32 bytes), created
once per day for all workers by the store's create-if-absent (stores.salts), and only today's and
yesterday's are kept: the day after tomorrow, nobody can recompute an id from an address. This is
Plausible's scheme (a daily salt; Umami's is monthly).

A worker keeps the salts it has read in memory (two at most) and asks the store again only on a
new day, so the hot path hashes without I/O.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

from stores.salts import SaltStore

SALT_BYTES = 32
DAYS_KEPT = 2
"""Today's salt and yesterday's."""
_PERSON = b"lambda-visitor"


def visitor_hash(salt: bytes, site: str, address: str, user_agent: str) -> str:
    """The visitor id of (site, address, user agent) under ``salt``. Fields are joined with NUL,
    which none of them may contain, so two different triples never hash the same bytes."""
    digest = hashlib.blake2b(key=salt, digest_size=16, person=_PERSON)
    digest.update(f"{site}\0{address}\0{user_agent}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _utc_today() -> date:
    return datetime.now(UTC).date()


class VisitorIds:
    """The salts of the days a worker hashes in, read from the store once per day."""

    def __init__(self, store: SaltStore, today: Callable[[], date] = _utc_today) -> None:
        self.store = store
        self.today = today
        self._salts: dict[date, bytes] = {}
        self._lock = asyncio.Lock()

    async def salt(self, day: date) -> bytes:
        salt = self._salts.get(day)
        if salt is not None:
            return salt
        async with self._lock:  # one store round trip per worker and day, not one per request
            salt = self._salts.get(day)
            if salt is None:
                salt = await self.store.get_or_create(day, secrets.token_bytes(SALT_BYTES))
                await self.store.forget_before(day - timedelta(days=DAYS_KEPT - 1))
                self._salts = {d: s for d, s in self._salts.items() if d > day - timedelta(days=DAYS_KEPT)}
                self._salts[day] = salt
        return salt

    async def visitor_id(self, site: str, address: str, user_agent: str) -> str:
        """The visitor id of a page view received now."""
        return visitor_hash(await self.salt(self.today()), site, address, user_agent)
