"""API keys on MongoDB: one document per key in the ``api_keys`` collection of the platform's
database, ``_id`` the key's id. Only the digest of a key is stored (stores.api_keys)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pymongo.asynchronous.database import AsyncDatabase

from stores.api_keys import ApiKeyRecord

if TYPE_CHECKING:
    from stores.api_keys import ApiKeyStore

COLLECTION = "api_keys"


def _document(r: ApiKeyRecord) -> dict[str, Any]:
    return {
        "_id": r.key_id,
        "digest": r.digest,
        "name": r.name,
        "scopes": sorted(r.scopes),
        "sites": None if r.sites is None else list(r.sites),
        "created_at": r.created_at,
        "revoked_at": r.revoked_at,
    }


def _record(d: dict[str, Any]) -> ApiKeyRecord:
    sites = d.get("sites")
    return ApiKeyRecord(
        key_id=str(d["_id"]),
        digest=str(d["digest"]),
        name=str(d.get("name", "")),
        scopes=frozenset(d.get("scopes", ())),
        sites=None if sites is None else tuple(sites),
        created_at=d["created_at"],
        revoked_at=d.get("revoked_at"),
    )


class MongoApiKeyStore:
    def __init__(self, db: AsyncDatabase[dict[str, Any]]) -> None:
        self._keys = db[COLLECTION]

    async def insert(self, record: ApiKeyRecord) -> None:
        await self._keys.insert_one(_document(record))

    async def get(self, key_id: str) -> ApiKeyRecord | None:
        d = await self._keys.find_one({"_id": key_id})
        return None if d is None else _record(d)

    async def all(self) -> list[ApiKeyRecord]:
        return sorted([_record(d) async for d in self._keys.find({})], key=lambda r: r.created_at)

    async def revoke(self, key_id: str, at: datetime) -> bool:
        active = {"_id": key_id, "revoked_at": None}
        result = await self._keys.update_one(active, {"$set": {"revoked_at": at}})
        return result.modified_count == 1


if TYPE_CHECKING:
    _: type[ApiKeyStore] = MongoApiKeyStore
