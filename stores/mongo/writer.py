"""The write half of the batch views on MongoDB: one collection per (view, generation), documents
in the layout of :mod:`stores.mongo.codec`, rankings, and garbage collection of whole collections.

A generation writes documents only for the days it recomputed, into its own collections; the
generation's ``day_map`` says, per view and day, which generation's collection holds the
document. So an incremental run copies nothing, publishing is one pointer write, and garbage
collection drops whole collections once no retained generation's day map names them (dropping a
collection is O(1); deleting documents one by one is not, least of all on FerretDB). Rankings are
written by the same run, from the same rows, and are insert-only like everything else.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator, Mapping, Set
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from pymongo import MongoClient
from pymongo.database import Database
from pymongo.errors import BulkWriteError

from stores.batch_views import Entry, WrittenViews
from stores.mongo.codec import (
    INLINE_SKETCHES_MAX,
    collection_name,
    decoded,
    document_id,
    is_hour_sketches,
    is_rank_document,
    parse_collection_name,
    rank_document_id,
    rank_documents,
    ranking_from_chunks,
    row_to_documents,
)
from stores.mongo.ferretdb import ensure_id_indexes
from stores.rows import ranking_score

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

WRITE_BATCH = 1000
"""Documents per insert command (FerretDB commits them 100 at a time within it)."""
WRITE_CONNECTIONS = 2
"""Insert commands in flight per Spark task, each on its own connection: FerretDB converts one
batch while SQLite commits another. bench/store.py measured the choice (docs/ferretdb.md)."""


def _insert_ignoring_duplicates(target: Any, docs: list[dict[str, Any]]) -> None:
    """Insert unordered; duplicate keys are a retried write of identical documents, not an error."""
    try:
        target.insert_many(docs, ordered=False)
    except BulkWriteError as exc:
        others = [e for e in exc.details.get("writeErrors", []) if e.get("code") != 11000]
        if others:
            raise


SPAN = "#span"
"""The ``view`` of the one record per partition that :func:`_insert_partition` adds after its
documents: (SPAN, first insert's start, last insert's end, documents inserted), epoch seconds."""


def _insert_partition(
    rows: Iterable[Any],
    mongo_url: str,
    db_name: str,
    gen: int,
    days: Mapping[str, Set[str]],
    inline_max: int = INLINE_SKETCHES_MAX,
) -> Iterator[tuple[str, Any, Any, int]]:
    """Runs on the executors: insert one partition's documents in large unordered batches.

    The rows are those of every view (column ``view``), so all views are written by one Spark job
    straight from the shared pass, with nothing cached in between; each goes to its view's
    collection of ``gen``, and only for the days ``days`` names for that view. Up to
    ``WRITE_CONNECTIONS`` batches are in flight at once, each on its own connection, while the next
    one is built. A task retried by Spark inserts the same documents again; duplicate-key errors
    are therefore expected and ignored (the documents are identical), anything else fails the task.
    Yields (view, day, key, page views) of every document written: the driver builds the day
    rankings from them, which costs no second pass over the views. Then one :data:`SPAN` record:
    when this partition's first insert started and its last one ended, for the write rate.
    """
    client: MongoClient[dict[str, Any]] = MongoClient(mongo_url, maxPoolSize=WRITE_CONNECTIONS)
    db = client[db_name]
    written: list[tuple[str, Any, Any, int]] = []
    inserted = 0
    first_insert: float | None = None
    batches: dict[str, list[dict[str, Any]]] = defaultdict(list)
    in_flight: deque[Future[None]] = deque()
    try:
        with ThreadPoolExecutor(WRITE_CONNECTIONS, thread_name_prefix="bv-insert") as pool:

            def flush(view: str) -> None:
                nonlocal first_insert
                while len(in_flight) >= WRITE_CONNECTIONS:
                    in_flight.popleft().result()
                batch = batches.pop(view, [])
                if batch:
                    if first_insert is None:
                        first_insert = time.time()
                    target = db[collection_name(view, gen)]
                    in_flight.append(pool.submit(_insert_ignoring_duplicates, target, batch))

            for row in rows:
                view = row["view"]
                if row["day"] not in days[view]:
                    continue
                docs = row_to_documents(row, inline_max)
                batches[view].extend(docs)
                inserted += len(docs)
                written.append((view, row["day"], row["key"], ranking_score(row)))
                if len(batches[view]) >= WRITE_BATCH:
                    flush(view)
            for view in list(batches):
                flush(view)
            while in_flight:
                in_flight.popleft().result()
    finally:
        client.close()
    yield from written
    if first_insert is not None:
        yield (SPAN, first_insert, time.time(), inserted)


class MongoBatchWriter:
    """Write, read back and garbage-collect batch view documents (stores.batch_views.BatchViewWriter).

    ``inline_max``: hour sketches up to this many bytes stay in their document
    (:func:`~stores.mongo.codec.row_to_documents`); the default everywhere but in tests.
    """

    def __init__(
        self, db: Database[dict[str, Any]], mongo_url: str, inline_max: int = INLINE_SKETCHES_MAX
    ) -> None:
        self.db = db
        self.mongo_url = mongo_url
        self.inline_max = inline_max

    def write(
        self, gen: int, rows: DataFrame | Iterable[Any], days: Mapping[str, Iterable[str]]
    ) -> WrittenViews:
        """Insert the view rows of every view in ``days`` (views.rows plus ``view``) as documents of
        ``gen``, in one Spark job (rows of a DataFrame) or here (any other rows); each view only for
        its days. Rankings come after, from the result
        (:meth:`write_rankings`): a run that dies in between leaves no ranking, and its generation
        is never published.

        Returns, per view, the (day, key, page views) of every (key, day) document written, and
        how long documents were being inserted (the documents come out of the shared pass's last
        stage, so this is the write's own time, not the computation's).
        """
        ensure_id_indexes(self.db, create=[collection_name(v, gen) for v in days])  # FerretDB 4646
        url, db_name, inline_max = self.mongo_url, self.db.name, self.inline_max
        wanted = {view: frozenset(d) for view, d in days.items()}
        if hasattr(rows, "rdd"):
            written = rows.rdd.mapPartitions(
                lambda part: _insert_partition(part, url, db_name, gen, wanted, inline_max)
            ).collect()
        else:
            written = list(_insert_partition(rows, url, db_name, gen, wanted, inline_max))
        out: dict[str, list[Entry]] = {view: [] for view in days}
        starts, ends, inserted = [], [], 0
        for view, day, key, pv in written:
            if view == SPAN:
                starts.append(day)
                ends.append(key)
                inserted += pv
            else:
                out[view].append((day, key, pv))
        return WrittenViews(out, max(ends) - min(starts) if starts else 0.0, inserted)

    def documents_in(self, gen: int, views: Iterable[str]) -> int:
        """Documents the collections of ``gen`` hold now (a progress line while they fill)."""
        return sum(self.db[collection_name(v, gen)].estimated_document_count() for v in views)

    def write_rankings(self, view: str, gen: int, written: Iterable[Entry], days: Iterable[str] = ()) -> None:
        """One ranking per day of ``view`` from the documents :meth:`write` wrote.

        ``days`` are the days this run recomputes: each gets a ranking even without any row, so
        that every day a generation's day map names has one.
        """
        name = collection_name(view, gen)
        by_day: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for day in days:
            by_day[day] = []
        for day, key, pv in written:
            by_day[day].append((key, pv))
        rankings = [doc for day, counts in sorted(by_day.items()) for doc in rank_documents(day, counts)]
        for i in range(0, len(rankings), WRITE_BATCH):
            _insert_ignoring_duplicates(self.db[name], rankings[i : i + WRITE_BATCH])

    def read_ranking(self, view: str, gen: int, day: str) -> list[tuple[str, int]] | None:
        """The day's keys by page views, or None if the collection holds no ranking for it."""
        target = self.db[collection_name(view, gen)]
        first = target.find_one({"_id": rank_document_id(day)})
        if first is None:
            return None
        rest = [target.find_one({"_id": rank_document_id(day, i)}) for i in range(1, first["chunks"])]
        return ranking_from_chunks([first, *rest])

    def read_all(self, view: str, day_map: dict[str, int]) -> Iterator[dict[str, Any]]:
        """Every document of a view as a generation with this day map sees it, its hours decoded
        (``h_pv``, ``h_uv``, ``h_sk``: stores.mongo.codec.decoded)."""
        by_gen: dict[int, set[str]] = {}
        for day, gen in day_map.items():
            by_gen.setdefault(gen, set()).add(day)
        for gen, days in sorted(by_gen.items()):
            docs: list[dict[str, Any]] = []
            hour_sketches: dict[str, dict[str, Any]] = {}
            for doc in self.db[collection_name(view, gen)].find({}):
                if doc["day"] not in days or is_rank_document(doc):
                    continue
                if is_hour_sketches(doc):
                    hour_sketches[doc["hours_of"]] = doc
                else:
                    docs.append(doc)
            for doc in docs:
                yield decoded(doc, hour_sketches.get(document_id(doc["key"], doc["day"])))

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
            parsed = parse_collection_name(name)
            if parsed is not None:
                out.append(parsed)
        return sorted(out)

    def garbage_collect(self, referenced: Set[tuple[str, int]], protected_gens: Set[int]) -> list[str]:
        """Drop collections no retained generation references (never those of ``protected_gens``)."""
        dropped = []
        for view, gen in self.collections():
            if (view, gen) not in referenced and gen not in protected_gens:
                self.drop(view, gen)
                dropped.append(collection_name(view, gen))
        return dropped
