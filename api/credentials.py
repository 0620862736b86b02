"""The API keys themselves: how one is made, spelled, recognised and kept (as a digest only).

A key is ``lak_<key_id>_<secret>``: ``key_id`` (8 hex characters) names it in listings and
revocations, ``secret`` is 32 random bytes (43 URL-safe characters). The store keeps the SHA-256
of the whole key: a key carries 256 bits of randomness, so a fast hash is safe (no dictionary to
guess from, unlike a password) and checking one costs a microsecond.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime

from contract import utc
from stores.api_keys import SCOPES, ApiKeyRecord

PREFIX = "lak_"
_KEY_RE = re.compile(r"^lak_([0-9a-f]{8})_([A-Za-z0-9_-]{43})$")


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_id_of(key: str) -> str | None:
    """The id a key spells (None: not a key of this format)."""
    match = _KEY_RE.match(key)
    return match.group(1) if match else None


def new_key(
    name: str, scopes: set[str], sites: tuple[str, ...] | None, now: datetime | None = None
) -> tuple[str, ApiKeyRecord]:
    """A fresh key and the record to store (the key itself is shown once, never stored)."""
    unknown = scopes - set(SCOPES)
    if unknown or not scopes:
        raise ValueError(f"scopes must be some of {', '.join(SCOPES)}; got {sorted(scopes)}")
    key_id = secrets.token_hex(4)
    key = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    record = ApiKeyRecord(key_id, digest(key), name, frozenset(scopes), sites, now or utc.now())
    return key, record
