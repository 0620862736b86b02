"""The API keys' store: who may call the API, each key kept as a digest, never in clear.

A key is ``lak_<key_id>_<secret>``; the store keeps its ``key_id`` (public, what `list` shows and
`revoke` takes), the SHA-256 digest of the whole key, its scopes and the sites it may read. The
API looks a presented key up by its ``key_id`` and compares digests (:mod:`api.credentials`).
One backend: ``stores.mongo.api_keys`` (the platform's MongoDB database).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

READ = "read"
WRITE = "write"
ADMIN = "admin"
SCOPES = (READ, WRITE, ADMIN)
"""``read``: the queries (optionally only some sites); ``write``: POST /v1/events; ``admin``:
/v1/status and /metrics."""


@dataclass(frozen=True)
class ApiKeyRecord:
    key_id: str
    digest: str
    """SHA-256 of the whole key, hex."""
    name: str
    scopes: frozenset[str]
    sites: tuple[str, ...] | None
    """The sites a ``read`` key may read (None: every site)."""
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class ApiKeyStore(Protocol):
    async def insert(self, record: ApiKeyRecord) -> None: ...

    async def get(self, key_id: str) -> ApiKeyRecord | None:
        """The key with this id, revoked or not (None: no such key)."""
        ...

    async def all(self) -> list[ApiKeyRecord]:
        """Every key, oldest first."""
        ...

    async def revoke(self, key_id: str, at: datetime) -> bool:
        """Marks the key revoked; False if there is no active key with this id."""
        ...
