"""The daily salts of visitor ids on MongoDB (stores.salts): one document per UTC day in the
``collect_salts`` collection of the platform's database, ``_id`` the day (``YYYY-MM-DD``).

Create-if-absent is an insert that the unique ``_id`` refuses when another worker was first; the
loser reads the winner's salt. ISO days sort as text, so "before a day" is a range on ``_id``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from bson import Binary
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

if TYPE_CHECKING:
    from stores.salts import SaltStore

COLLECTION = "collect_salts"


class MongoSaltStore:
    def __init__(self, db: AsyncDatabase[dict[str, Any]]) -> None:
        self._salts = db[COLLECTION]

    async def get_or_create(self, day: date, candidate: bytes) -> bytes:
        key = day.isoformat()
        found = await self._salts.find_one({"_id": key})
        if found is None:
            try:
                await self._salts.insert_one(
                    {"_id": key, "salt": Binary(candidate), "created_at": datetime.now(UTC)}
                )
                return candidate
            except DuplicateKeyError:  # another worker stored the day's salt first
                found = await self._salts.find_one({"_id": key})
                if found is None:  # deleted in between (a rotation far behind): ask again
                    return await self.get_or_create(day, candidate)
        return bytes(found["salt"])

    async def forget_before(self, day: date) -> int:
        result = await self._salts.delete_many({"_id": {"$lt": day.isoformat()}})
        return int(result.deleted_count)

    async def days(self) -> list[date]:
        return sorted([date.fromisoformat(str(d["_id"])) async for d in self._salts.find({}, {"_id": 1})])


if TYPE_CHECKING:
    _: type[SaltStore] = MongoSaltStore
