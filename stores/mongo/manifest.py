"""The master dataset's manifest on MongoDB: one document per committed segment in
``master_segments``, and the one codec of a segment's document.

Committing a segment is one document insert, atomic: readers of the master dataset read only the
segments listed here (batch_layer.master).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.database import Database

from stores.manifest import Segment

if TYPE_CHECKING:
    from stores.manifest import ManifestReader, ManifestStore

MANIFEST = "master_segments"


def segment_document(s: Segment) -> dict[str, Any]:
    """A committed segment as its manifest document."""
    return {
        "_id": s.segment_id,
        "gen": s.gen,
        "path": s.path,
        "ranges": {str(p): [a, b] for p, (a, b) in s.ranges.items()},
        "events": s.events,
        "invalid": s.invalid,
        "days": s.days,
        "committed_at": s.committed_at,
        "invalid_reasons": s.invalid_reasons,
        "dedup_window_ms": s.dedup_window_ms,
        "gap": s.gap,
    }


def segment_of(doc: dict[str, Any]) -> Segment:
    """A segment from its manifest document (those written before reasons were counted have none)."""
    return Segment(
        segment_id=doc["_id"],
        gen=doc["gen"],
        path=doc["path"],
        ranges={int(p): (int(a), int(b)) for p, (a, b) in doc["ranges"].items()},
        events=doc["events"],
        invalid=doc["invalid"],
        days=list(doc["days"]),
        committed_at=doc["committed_at"],
        invalid_reasons=dict(doc.get("invalid_reasons") or {}),
        dedup_window_ms=doc.get("dedup_window_ms"),
        gap=doc.get("gap"),
    )


class MongoManifest:
    """The manifest (stores.manifest.ManifestStore) in a MongoDB database."""

    def __init__(self, db: Database[dict[str, Any]]) -> None:
        self.collection = db[MANIFEST]

    def segments(self) -> list[Segment]:
        """The committed segments, by generation and id."""
        return sorted((segment_of(d) for d in self.collection.find({})), key=lambda s: (s.gen, s.segment_id))

    def commit(self, segment: Segment) -> None:
        self.collection.insert_one(segment_document(segment))


class MongoManifestReader:
    """The API's read of the manifest (stores.manifest.ManifestReader), on its asynchronous client."""

    def __init__(self, db: AsyncDatabase[dict[str, Any]]) -> None:
        self.collection = db[MANIFEST]

    async def segments(self) -> list[Segment]:
        found = [segment_of(d) async for d in self.collection.find({})]
        return sorted(found, key=lambda s: (s.gen, s.segment_id))


if TYPE_CHECKING:
    _store: type[ManifestStore] = MongoManifest
    _reader: type[ManifestReader] = MongoManifestReader
