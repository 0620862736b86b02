"""The read half of the batch views on MongoDB (FerretDB locally): published generations and their
batch documents (stores.batch_views.BatchReader).

Every read is a ``find_one`` by ``_id``, the only lookup a MongoDB-protocol server can be expected
to serve from an index (on the local FerretDB only thanks to the issue 4646 workaround,
stores.mongo.ferretdb: without it every read scanned its collection).

Everything read is cached in process (stores.mongo.cache): generations once published and batch
documents never change. A cold document costs one indexed read, a cached one a dictionary lookup,
and it spares the server the work. Hour sketches stored apart (stores.mongo.codec) cost a second
read, made only for a query that unions hours of that day; the document is then cached whole.

Misses are fetched concurrently, at most ``max_concurrent`` at a time, and once per document even
when many queries miss it together (single flight). The limit bounds the load one API worker puts
on the database during a burst of cold queries (the MongoDB client's pool would otherwise open up
to 100 connections), and single flight keeps N concurrent queries of one new key from reading its
documents N times. The default limit, 4 (LAMBDA_API_MONGO_CONCURRENCY), is the fastest measured
for a cold 7-day query on 2 cores (docs/ferretdb.md, with its bench command).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from pymongo import AsyncMongoClient
from pymongo.errors import PyMongoError

from generations.model import GENERATION_ZERO, Generation, GenerationError
from generations.state import DROPPED, GenerationState
from stores.batch_views import BatchDoc, DocRef
from stores.errors import BatchUnavailable
from stores.mongo.cache import LruCache
from stores.mongo.codec import (
    MalformedDocument,
    batch_doc,
    collection_name,
    document_id,
    hour_sketches_id,
    rank_document_id,
    ranking_from_chunks,
    with_hour_sketches,
)
from stores.mongo.generations import GENERATIONS, POINTERS, SERVED_ID, generation_of

log = logging.getLogger(__name__)

T = TypeVar("T")
PUBLISHED_STATES = frozenset({GenerationState.SERVED, GenerationState.SUPERSEDED, GenerationState.RETIRED})


def _malformed(view: str, holder: int, ident: str, exc: MalformedDocument) -> BatchUnavailable:
    """A stored document that does not decode: logged, and a 503 that names it (never a 500)."""
    log.error("%s %r is malformed: %s", collection_name(view, holder), ident, exc)
    return BatchUnavailable(
        f"the batch view document {ident!r} of {view} does not decode ({exc}); run a full recompute"
    )


class MongoBatchReader:
    def __init__(
        self,
        client: AsyncMongoClient[dict[str, Any]],
        db_name: str,
        cache_bytes: int,
        max_concurrent: int = 4,
    ) -> None:
        self.client = client
        self.db = client[db_name]
        self.documents_cache: LruCache[BatchDoc | None] = LruCache(cache_bytes)
        self.rankings_cache: LruCache[list[tuple[str, int]]] = LruCache(cache_bytes // 4)
        self._generations: dict[int, Generation] = {}
        self._reads = asyncio.Semaphore(max_concurrent)
        self._in_flight: dict[tuple[str, int, str, str, bool], asyncio.Future[BatchDoc | None]] = {}

    async def _call(self, aw: Awaitable[T]) -> T:
        try:
            return await aw
        except PyMongoError as exc:
            raise BatchUnavailable(f"MongoDB: {exc}") from exc

    async def generation(self, gen: int) -> Generation:
        info = self._generations.get(gen)
        if info is not None:
            return info
        doc = await self._call(self.db[GENERATIONS].find_one({"_id": gen}))
        if doc is None:
            if gen == GENERATION_ZERO.gen:
                return GENERATION_ZERO
            raise BatchUnavailable(f"generation {gen} is not in the registry")
        try:
            info = generation_of(doc)
        except GenerationError as exc:
            raise BatchUnavailable(str(exc)) from exc
        if doc.get("state") in PUBLISHED_STATES | DROPPED:
            self._generations[gen] = info
        return info

    async def served_generation(self) -> Generation | None:
        pointer = await self._call(self.db[POINTERS].find_one({"_id": SERVED_ID}))
        return None if pointer is None else await self.generation(int(pointer["gen"]))

    async def documents(
        self, view: str, refs: Sequence[DocRef], hour_sketches: Sequence[bool] = ()
    ) -> list[BatchDoc | None]:
        out: list[BatchDoc | None] = [None] * len(refs)
        wanted = list(hour_sketches) or [False] * len(refs)
        missing: list[int] = []
        cache = self.documents_cache
        for i, ref in enumerate(refs):
            found, doc = cache.get((view, *ref))
            if found and not (wanted[i] and doc is not None and doc.sketches_apart):
                out[i] = doc
            else:
                missing.append(i)
        if missing:
            fetched = await asyncio.gather(*(self._fetch(view, refs[i], wanted[i]) for i in missing))
            for i, doc in zip(missing, fetched, strict=True):
                out[i] = doc
        return out

    async def _fetch(self, view: str, ref: DocRef, hour_sketches: bool) -> BatchDoc | None:
        """One document, and its hour sketches stored apart if asked, from the cache or read."""
        found, doc = self.documents_cache.get((view, *ref))
        if not found:
            doc = await self._once((view, *ref, False), lambda: self._load(view, ref))
        if hour_sketches and doc is not None and doc.sketches_apart:
            main = doc
            doc = await self._once((view, *ref, True), lambda: self._load_hour_sketches(view, ref, main))
        return doc

    async def _once(
        self, key: tuple[str, int, str, str, bool], load: Callable[[], Awaitable[BatchDoc | None]]
    ) -> BatchDoc | None:
        """``load()``, run once however many queries wait for it (single flight)."""
        future = self._in_flight.get(key)
        if future is None:
            future = asyncio.ensure_future(load())
            self._in_flight[key] = future
            future.add_done_callback(lambda _: self._in_flight.pop(key, None))
        return await asyncio.shield(future)

    async def _read(self, view: str, holder: int, ident: str) -> dict[str, Any] | None:
        target = self.db[collection_name(view, holder)]
        async with self._reads:
            return await self._call(target.find_one({"_id": ident}))

    async def _load(self, view: str, ref: DocRef) -> BatchDoc | None:
        holder, key, day = ref
        ident = document_id(key, day)
        raw = await self._read(view, holder, ident)
        try:
            doc = None if raw is None else batch_doc(raw)
        except MalformedDocument as exc:
            raise _malformed(view, holder, ident, exc) from exc
        self.documents_cache.put((view, *ref), doc, 100 if doc is None else doc.size)
        return doc

    async def _load_hour_sketches(self, view: str, ref: DocRef, doc: BatchDoc) -> BatchDoc:
        """``doc`` with its hour sketches, read from their own document (stores.mongo.codec)."""
        holder, key, day = ref
        ident = hour_sketches_id(key, day)
        raw = await self._read(view, holder, ident)
        try:
            full = with_hour_sketches(doc, document_id(key, day), raw)
        except MalformedDocument as exc:
            raise _malformed(view, holder, ident, exc) from exc
        self.documents_cache.put((view, *ref), full, full.size)
        return full

    async def ranking(self, view: str, holder: int, day: str) -> list[tuple[str, int]]:
        key = (view, holder, day)
        found, cached = self.rankings_cache.get(key)
        if found and cached is not None:
            return cached
        target = self.db[collection_name(view, holder)]
        async with self._reads:
            first = await self._call(target.find_one({"_id": rank_document_id(day)}))
            rest: list[dict[str, Any] | None] = []
            if first is not None and first["chunks"] > 1:
                rest = [
                    await self._call(target.find_one({"_id": rank_document_id(day, i)}))
                    for i in range(1, first["chunks"])
                ]
        ranking = None if first is None else ranking_from_chunks([first, *rest])
        if ranking is None:
            raise BatchUnavailable(
                f"{collection_name(view, holder)} has no complete ranking for {day} "
                "(written before rankings existed? run a full recompute)"
            )
        self.rankings_cache.put(key, ranking, 64 + sum(len(k) + 80 for k, _ in ranking))
        return ranking

    async def ping(self) -> None:
        await self._call(self.client.admin.command("ping"))
