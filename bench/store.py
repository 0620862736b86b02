"""Batch view store benchmark: write documents/s and read-by-_id latency on the local FerretDB.

Writes ``--docs`` realistic batch documents (views.rows shape, ~3 KB with HLL sketches as Spark stores them)
through the batch layer's own executor code (stores.mongo.writer._insert_partition), with
``--partitions`` of them running at once as Spark's executors would, then reads documents by
``_id`` the way the serving layer does:

  cold   each document read once, by a fresh client (nothing cached anywhere in our process);
  warm   the same documents read again (FerretDB's SQLite pages are cached by then);
  api    MongoBatchReader.documents for a 7-day query (8 documents) not in its cache: what the
         API's first query of a key costs.

Only FerretDB is started (if it is not running). ``--no-workaround`` leaves out the FerretDB
issue 4646 index (stores.mongo.ferretdb) to measure the defect itself: reads then scan the
collection, so only a few are timed.

    python -m bench.store                                  # the defaults of the batch layer
    python -m bench.store --batch 500 2000 --partitions 1 2 4
    python -m bench.store --no-workaround --label before

Results are merged into bench/results/store.json under ``--label``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import multiprocessing
import random
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import psutil
from pymongo import AsyncMongoClient, MongoClient
from rich.console import Console

from bench.common import RESULTS_DIR, machine, percentiles
from config.settings import Settings, get_settings
from stack import control
from stack.services import FerretDB
from stores.mongo import writer as store
from stores.mongo.codec import INLINE_SKETCHES_MAX, collection_name, decoded, document_id, row_to_documents
from stores.mongo.ferretdb import ensure_id_indexes

DB_NAME = "bench_store"
VIEW = "bench"
DAYS = [f"2026-10-{d:02d}" for d in range(1, 29)]


class RowMaker:
    """View rows (views.rows) with real DataSketches HLL sketches in the form Spark's
    ``hll_sketch_agg`` stores them (HLL_8, updatable serialisation), ~3 KB as documents."""

    def __init__(self, seed: int, lg_k: int) -> None:
        from datasketches import hll_sketch, tgt_hll_type

        self.rng = random.Random(seed)

        def sketch(n: int) -> bytes:
            s = hll_sketch(lg_k, tgt_hll_type.HLL_8)
            for _ in range(n):
                s.update(self.rng.random())
            return bytes(s.serialize_updatable())

        self.day_sketches = [sketch(self.rng.randint(20, 400)) for _ in range(64)]
        self.hour_sketches = [sketch(self.rng.randint(1, 30)) for _ in range(64)]

    def row(self, i: int) -> dict[str, Any]:
        rng = self.rng
        hours = []
        for hour in sorted(rng.sample(range(24), 14)):
            pv = rng.randint(1, 500)
            hours.append(
                {"hour": hour, "pv": pv, "uv": rng.randint(1, pv), "sk": rng.choice(self.hour_sketches)}
            )
        return {
            "key": f"https://shop.example.com/catalog/item/{i // len(DAYS):08d}?ref=home",
            "day": DAYS[i % len(DAYS)],
            "pv": sum(h["pv"] for h in hours),
            "uv": sum(h["uv"] for h in hours),
            "sk": rng.choice(self.day_sketches),
            "hours": hours,
        }


def hours_as_arrays(row: Any, inline_max: int = INLINE_SKETCHES_MAX) -> list[dict[str, Any]]:
    """The document as the batch layer wrote it before it packed the hours: three 24-slot arrays,
    72 BSON elements. ``--hours-as-arrays`` writes this to measure what packing saved; the readers
    no longer decode it, so that run times raw reads only."""
    return [decoded(*row_to_documents(row, inline_max))]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def ferretdb_cpu_s(settings: Settings) -> float | None:
    """CPU seconds (user + system) the local FerretDB process has used, if this stack runs it."""
    proc = FerretDB(settings).supervised.process()
    if proc is None:
        return None
    try:
        times = proc.cpu_times()
    except psutil.NoSuchProcess:
        return None
    return float(times.user + times.system)


def write(
    settings: Settings,
    url: str,
    rows: list[dict[str, Any]],
    config: tuple[int, int, int],
    workaround: bool,
) -> tuple[str, float, float | None]:
    """Insert ``rows`` into a fresh collection: (batch, partitions, connections per partition)."""
    batch, partitions, connections = config
    gen = batch * 100 + partitions * 10 + connections
    name = collection_name(VIEW, gen)
    client: MongoClient[dict[str, Any]] = MongoClient(url)
    db = client[DB_NAME]
    db.drop_collection(name)
    if workaround:
        ensure_id_indexes(db, create=[name], settings=settings)
    else:
        db.create_collection(name)
    store.WRITE_BATCH = batch
    store.WRITE_CONNECTIONS = connections
    parts = [[{**r, "view": VIEW} for r in rows[p::partitions]] for p in range(partitions)]
    days = {VIEW: frozenset(r["day"] for r in rows)}
    # One process per partition, as Spark runs one Python worker per task: threads would share one
    # interpreter lock and measure the client's Python, not the store. The processes are forked
    # with their rows already built, and each waits for the start so all insert at once.
    context = multiprocessing.get_context("fork")
    start_line = context.Barrier(partitions + 1)
    workers = [context.Process(target=_insert_all, args=(part, url, gen, days, start_line)) for part in parts]
    for w in workers:
        w.start()
    start_line.wait()
    cpu_before = ferretdb_cpu_s(settings)
    start = time.perf_counter()
    for w in workers:
        w.join()
    seconds = time.perf_counter() - start
    failed = [w.exitcode for w in workers if w.exitcode]
    if failed:
        raise RuntimeError(f"{len(failed)} insert process(es) failed (exit codes {failed})")
    cpu_after = ferretdb_cpu_s(settings)
    cpu_ms_per_doc = (
        None if cpu_before is None or cpu_after is None else (cpu_after - cpu_before) * 1000 / len(rows)
    )
    count = db[name].estimated_document_count()
    client.close()
    if count != len(rows):
        raise RuntimeError(f"{name}: {count} documents, expected {len(rows)}")
    return name, len(rows) / seconds, cpu_ms_per_doc


def _insert_all(
    part: list[dict[str, Any]], url: str, gen: int, days: dict[str, frozenset[str]], start_line: Any
) -> None:
    """One partition's inserts through the batch layer's executor code, from the start line on."""
    start_line.wait()
    for _ in store._insert_partition(part, url, DB_NAME, gen, days):
        pass


def read(url: str, name: str, rows: list[dict[str, Any]], samples: int) -> dict[str, Any]:
    picked = random.Random(7).sample(rows, samples)
    ids = [document_id(r["key"], r["day"]) for r in picked]
    client: MongoClient[dict[str, Any]] = MongoClient(url)
    target = client[DB_NAME][name]
    client.admin.command("ping")

    def find(doc_id: str) -> Callable[[], object]:
        return lambda: target.find_one({"_id": doc_id})

    cold = [_timed(find(i)) for i in ids]
    warm = [_timed(find(i)) for i in ids]
    client.close()
    return {"cold": percentiles(cold), "warm": percentiles(warm)}


def api_reads(
    settings: Settings, url: str, name: str, rows: list[dict[str, Any]], samples: int, max_concurrent: int
) -> dict[str, Any]:
    """A 7-day query's 8 documents through the serving layer's reader, each key read the first time."""
    from stores.mongo.reader import MongoBatchReader

    gen = int(name.rsplit("_g", 1)[1])
    keys = random.Random(11 + max_concurrent).sample(sorted({r["key"] for r in rows}), samples)

    async def main() -> list[float]:
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url)
        reader = MongoBatchReader(client, DB_NAME, 64 << 20, max_concurrent)
        await reader.ping()
        out = []
        for key in keys:
            refs = [(gen, key, day) for day in DAYS[:8]]
            start = time.perf_counter()
            docs = await reader.documents(VIEW, refs)
            out.append((time.perf_counter() - start) * 1000)
            assert any(d is not None for d in docs)
        await client.close()
        return out

    return percentiles(asyncio.run(main()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=63_000)
    parser.add_argument("--batch", type=int, nargs="+", default=[store.WRITE_BATCH])
    parser.add_argument(
        "--partitions", type=int, nargs="+", default=[2], help="concurrent writers (Spark tasks)"
    )
    parser.add_argument(
        "--connections",
        type=int,
        nargs="+",
        default=[store.WRITE_CONNECTIONS],
        help="insert commands in flight per partition",
    )
    parser.add_argument("--reads", type=int, default=300, help="documents read by _id (cold, then warm)")
    parser.add_argument(
        "--api-concurrency", type=int, nargs="+", default=[4, 16], help="MongoBatchReader max_concurrent"
    )
    parser.add_argument("--no-workaround", action="store_true", help="without the FerretDB 4646 index")
    parser.add_argument("--label", default=None, help="key of this run in bench/results/store.json")
    parser.add_argument(
        "--hours-as-arrays",
        action="store_true",
        help="write the layout of before the hours were packed (three 24-slot arrays)",
    )
    args = parser.parse_args(argv)
    to_documents = hours_as_arrays if args.hours_as_arrays else row_to_documents
    # The executors' insert code makes its documents with this module-level name.
    setattr(store, "row_to_documents", to_documents)  # noqa: B010 (a module attribute, replaced for this run)
    logging.basicConfig(level=logging.WARNING)
    console = Console()
    settings = get_settings()
    workaround = not args.no_workaround
    label = args.label or ("after" if workaround else "before")
    url = (
        settings.mongo_uri or f"mongodb://{settings.mongo_host}:{settings.mongo_port}/?directConnection=true"
    )

    started = control.up(settings, ["ferretdb"]) if settings.mongo_uri is None else []
    try:
        maker = RowMaker(seed=1, lg_k=settings.hll_lg_k)
        rows = [maker.row(i) for i in range(args.docs)]
        from bson import encode

        bson_kb = statistics.mean(len(encode(to_documents(r)[0])) for r in rows[:500]) / 1024
        console.print(f"{args.docs:,} documents of {bson_kb:.2f} KB (BSON) on average")
        writes = []
        name = ""
        for config in itertools.product(args.batch, args.partitions, args.connections):
            batch, partitions, connections = config
            name, rate, cpu = write(settings, url, rows, config, workaround)
            writes.append(
                {
                    "batch": batch,
                    "partitions": partitions,
                    "connections_per_partition": connections,
                    "docs_per_s": round(rate),
                    "ferretdb_cpu_ms_per_doc": None if cpu is None else round(cpu, 3),
                }
            )
            console.print(
                f"write  batch {batch:>5}  partitions {partitions}  connections {connections}: "
                f"{rate:,.0f} docs/s" + ("" if cpu is None else f", FerretDB CPU {cpu:.2f} ms per document")
            )
        samples = args.reads if workaround else min(args.reads, 5)
        reads = read(url, name, rows, samples)
        console.print(
            f"read by _id ({args.docs:,} documents): cold p50 {reads['cold']['p50_ms']} ms "
            f"p95 {reads['cold']['p95_ms']} ms; warm p50 {reads['warm']['p50_ms']} ms "
            f"p95 {reads['warm']['p95_ms']} ms  (n={samples})"
        )
        api: dict[str, Any] = {}
        for limit in [] if args.hours_as_arrays else args.api_concurrency:
            api[f"max_concurrent_{limit}"] = figures = api_reads(
                settings, url, name, rows, min(samples, 50), limit
            )
            console.print(
                f"serving reader, 7-day query (8 documents) cold, at most {limit} reads at once: "
                f"p50 {figures['p50_ms']} ms p95 {figures['p95_ms']} ms"
            )
        cleanup: MongoClient[dict[str, Any]] = MongoClient(url)
        cleanup.drop_database(DB_NAME)
        cleanup.close()
    finally:
        if started:
            control.down(settings, started)

    path = RESULTS_DIR / "store.json"
    results: dict[str, Any] = (
        json.loads(path.read_text()) if path.exists() else {"benchmark": "store", "runs": {}}
    )
    results["runs"][label] = {
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python -m bench.store " + " ".join(argv if argv is not None else _argv()),
        "machine": machine(),
        "documents": args.docs,
        "document_kb_bson": round(bson_kb, 2),
        "workaround": workaround,
        "hours": "arrays" if args.hours_as_arrays else "packed",
        "writes": writes,
        "read_by_id": reads,
        "serving_reader_7_day_query_cold": api,
    }
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"results in {path.relative_to(RESULTS_DIR.parent.parent)}")
    return 0


def _argv() -> Iterator[str]:
    import sys

    yield from sys.argv[1:]


if __name__ == "__main__":
    raise SystemExit(main())
