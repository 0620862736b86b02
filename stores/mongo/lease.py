"""The batch run's lease on MongoDB: one document (``_id`` ``batch-lease``) in the ``registry``
collection beside the served pointer, and its codec.

Every write is a single-document write, conditional on the token where it must be: atomic on every
MongoDB-protocol server. The protocol that uses them (acquiring, taking over, the heartbeat, the
checks) is batch_layer.lease's.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pymongo.database import Database
from pymongo.errors import DuplicateKeyError, PyMongoError

from contract import utc
from stores.errors import StoreUnavailable
from stores.lease import LeaseRecord
from stores.mongo.generations import POINTERS

if TYPE_CHECKING:
    from stores.lease import LeaseStore

LEASE_ID = "batch-lease"


def lease_document(r: LeaseRecord) -> dict[str, Any]:
    """A lease as its document."""
    return {
        "_id": LEASE_ID,
        "token": r.token,
        "fence": r.fence,
        "owner": r.owner,
        "since": r.since,
        "expires_at": r.expires_at,
    }


def lease_of(doc: dict[str, Any]) -> LeaseRecord:
    """A lease from its document (a field it lacks reads as absent: no token, fence 0)."""
    return LeaseRecord(
        token=doc.get("token"),
        fence=int(doc.get("fence", 0)),
        owner=doc.get("owner"),
        since=utc.as_utc(doc.get("since")),
        expires_at=utc.as_utc(doc.get("expires_at")),
    )


class MongoLeaseStore:
    """The lease (stores.lease.LeaseStore) in a MongoDB database."""

    def __init__(self, db: Database[dict[str, Any]]) -> None:
        self.collection = db[POINTERS]

    def read(self) -> LeaseRecord | None:
        doc = self.collection.find_one({"_id": LEASE_ID})
        return None if doc is None else lease_of(doc)

    def create(self, record: LeaseRecord) -> bool:
        try:
            self.collection.insert_one(lease_document(record))
        except DuplicateKeyError:
            return False
        return True

    def replace(self, token: str | None, record: LeaseRecord) -> bool:
        taken = self.collection.replace_one({"_id": LEASE_ID, "token": token}, lease_document(record))
        return taken.matched_count == 1

    def extend(self, token: str, expires_at: datetime) -> bool:
        try:
            renewed = self.collection.update_one(
                {"_id": LEASE_ID, "token": token}, {"$set": {"expires_at": expires_at}}
            )
        except PyMongoError as exc:
            raise StoreUnavailable(f"MongoDB: {exc}") from exc
        return renewed.matched_count == 1


if TYPE_CHECKING:
    _: type[LeaseStore] = MongoLeaseStore
