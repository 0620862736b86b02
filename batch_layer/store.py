"""Batch views in MongoDB: one collection per (view, generation), documents read by _id only.

A generation writes documents only for the days it recomputed, into its own collections; the
generation's ``day_map`` says, per view and day, which generation's collection holds the
document. So an incremental run copies nothing, publishing is one pointer write, and garbage
collection drops whole collections once no retained generation's day map names them (dropping a
collection is O(1); deleting documents one by one is not, least of all on FerretDB).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from pymongo import MongoClient
from pymongo.database import Database
from pymongo.errors import BulkWriteError

from views.rows import document_id, row_to_document

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

_COLLECTION_RE = re.compile(r"^bv_(?P<view>[a-z0-9_]+)_g(?P<gen>\d+)$")
WRITE_BATCH = 500


def collection_name(view: str, gen: int) -> str:
    return f"bv_{view}_g{gen}"


def _insert_partition(rows: Iterable[Any], mongo_url: str, db_name: str, collection: str) -> Iterator[int]:
    """Runs on the executors: insert one partition's documents in large unordered batches.

    A task retried by Spark inserts the same documents again; duplicate-key errors are therefore
    expected and ignored (the documents are identical), anything else fails the task.
    """
    client: MongoClient[dict[str, Any]] = MongoClient(mongo_url)
    target = client[db_name][collection]
    written = 0
    batch: list[dict[str, Any]] = []

    def flush() -> int:
        if not batch:
            return 0
        try:
            target.insert_many(batch, ordered=False)
        except BulkWriteError as exc:
            others = [e for e in exc.details.get("writeErrors", []) if e.get("code") != 11000]
            if others:
                raise
        n = len(batch)
        batch.clear()
        return n

    try:
        for row in rows:
            batch.append(row_to_document(row))
            if len(batch) >= WRITE_BATCH:
                written += flush()
        written += flush()
    finally:
        client.close()
    yield written


class BatchViewStore:
    """Write, read and garbage-collect batch view documents."""

    def __init__(self, db: Database[dict[str, Any]], mongo_url: str) -> None:
        self.db = db
        self.mongo_url = mongo_url

    def write(self, view: str, gen: int, rows: DataFrame) -> int:
        """Insert view rows (views.rows) as documents of ``gen``; returns the number written."""
        name = collection_name(view, gen)
        url, db_name = self.mongo_url, self.db.name
        counts = rows.rdd.mapPartitions(lambda part: _insert_partition(part, url, db_name, name)).collect()
        return int(sum(counts))

    def read(self, view: str, gen: int, key: str, day: str) -> dict[str, Any] | None:
        return self.db[collection_name(view, gen)].find_one({"_id": document_id(key, day)})

    def read_all(self, view: str, day_map: dict[str, int]) -> Iterator[dict[str, Any]]:
        """Every document of a view as a generation with this day map sees it."""
        by_gen: dict[int, set[str]] = {}
        for day, gen in day_map.items():
            by_gen.setdefault(gen, set()).add(day)
        for gen, days in sorted(by_gen.items()):
            for doc in self.db[collection_name(view, gen)].find({}):
                if doc["day"] in days:
                    yield doc

    def drop(self, view: str, gen: int) -> None:
        self.db.drop_collection(collection_name(view, gen))

    def drop_generation(self, gen: int) -> None:
        """Drop every view collection a generation wrote (a failed or abandoned one)."""
        for view, holder in self.collections():
            if holder == gen:
                self.drop(view, gen)

    def collections(self) -> list[tuple[str, int]]:
        """(view, generation) of every batch view collection present."""
        out = []
        for name in self.db.list_collection_names():
            m = _COLLECTION_RE.match(name)
            if m:
                out.append((m["view"], int(m["gen"])))
        return sorted(out)

    def garbage_collect(self, referenced: set[tuple[str, int]], protected_gens: set[int]) -> list[str]:
        """Drop collections no retained generation references (never those of ``protected_gens``)."""
        dropped = []
        for view, gen in self.collections():
            if (view, gen) not in referenced and gen not in protected_gens:
                self.drop(view, gen)
                dropped.append(collection_name(view, gen))
        return dropped
