"""What the filter table's realtime rows (speed_layer.filter_rows) cost the speed layer: the Redis
memory of its lists per 1,000 events and per hour of traffic at a rate, and the time each
micro-batch adds.

The speed job runs in this process over one backlog of live generated traffic, from a fresh
checkpoint and an empty Redis db each time, in micro-batches of ``--batch`` events (a trigger's
worth of records at the rate: 20,000 for a 1 s trigger at 20,000 events/s), with
``LAMBDA_FILTER_TABLE`` off and on, alternated ``--repeat`` times. Per run: each micro-batch's
seconds and phases (the first one, the JVM's warm-up, left out of the medians). After each run
with the table on: ``MEMORY USAGE`` of every list (all elements sampled) and the bytes of the
streams it holds, against the events counted, and what the same streams would weigh with each
codec (uncompressed, lz4, zstd).

With ``--stage``: only the micro-batch's last job (:func:`stage`), in this process, without the
services: the steadier figure of the time the rows add on a machine shared with other work.

    python -m bench.filter_rows [--events 200000] [--batch 20000] [--rate 20000] [--repeat 1]
    python -m bench.filter_rows --stage [--batch 20000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import redis
from pymongo import MongoClient
from rich.console import Console

from bench.common import produce_generated, running_stack, write_result
from bench.speed import _fresh
from config.settings import Settings, get_settings
from config.spark import spark_session
from speed_layer.job import SpeedJob
from speed_layer.progress import BatchReport
from stores.redis import keys
from stores.redis.filter_rows import decode_blobs, encode


def _settings(base: Settings, batch: int, on: bool) -> Settings:
    name = "on" if on else "off"
    return base.model_copy(
        update={
            "events_topic": "bench.filters",
            "dlq_topic": "bench.filters.dlq",
            "mongo_db": "bench_filters",
            "redis_db": 4,
            "speed_max_offsets_per_trigger": batch,
            "filter_table": on,
            "speed_checkpoint_path": (base.var_dir / "bench" / f"filters-{name}").resolve().as_uri(),
        }
    )


def run(settings: Settings, spark: Any) -> list[BatchReport]:
    """One run of the speed job over the whole backlog; every micro-batch's report."""
    redis.Redis.from_url(settings.redis_url).flushdb()
    shutil.rmtree(Path(settings.speed_checkpoint_uri.removeprefix("file://")), ignore_errors=True)
    job = SpeedJob(settings, spark)
    reports: list[BatchReport] = []
    process = job.process

    def recorded(df: Any, batch_id: int) -> None:
        process(df, batch_id)
        if job.last is not None:
            reports.append(job.last)

    job.process = recorded  # type: ignore[method-assign]
    job.run(available_now=True)
    return reports


def memory(settings: Settings) -> dict[str, Any]:
    """The filter-rows lists' Redis memory and content, and the other realtime keys' memory."""
    r = redis.Redis.from_url(settings.redis_url)
    lists = elements = blob_bytes = lists_memory = other_memory = 0
    for key in r.scan_iter(match=keys.REALTIME_PREFIX + "*", count=1000):
        used = int(r.memory_usage(key, samples=0) or 0)
        if b":" + keys.FILTERS_SUFFIX.encode() in key:
            blobs = r.lrange(key, 0, -1)
            lists += 1
            elements += len(blobs)
            blob_bytes += sum(len(b) for b in blobs)
            lists_memory += used
        else:
            other_memory += used
    pattern = keys.REALTIME_PREFIX + "*" + keys.FILTERS_SUFFIX + "*"
    lists_of = (cast(list[bytes], r.lrange(key, 0, -1)) for key in r.scan_iter(match=pattern, count=1000))
    streams = [blob for blobs in lists_of for blob in blobs]
    codecs: dict[str, int] = {}
    for codec in (None, "lz4", "zstd"):
        options = pa.ipc.IpcWriteOptions(compression=codec)
        codecs[str(codec)] = sum(len(encode(decode_blobs([blob]), options)) for blob in streams)
    return {
        "blob_bytes_by_codec": codecs,
        "lists": lists,
        "elements": elements,
        "blob_bytes": blob_bytes,
        "lists_memory_bytes": lists_memory,
        "other_realtime_memory_bytes": other_memory,
    }


def summary(reports: list[BatchReport]) -> dict[str, Any]:
    steady = reports[1:] or reports
    phases = sorted({p for rep in steady for p in rep.phases})
    return {
        "micro_batches": len(reports),
        "events_counted": sum(rep.rows - rep.invalid - rep.duplicates for rep in reports),
        "median_seconds": statistics.median(rep.seconds for rep in steady),
        "median_phases": {p: statistics.median(rep.phases.get(p, 0.0) for rep in steady) for p in phases},
    }


def stage(batch: int, repeat: int, console: Console) -> dict[str, Any]:
    """The micro-batch's last job alone, in this process, on ``batch`` generated events keyed once
    (single-task path, one generation, the shipped views counting page views and visitors): the
    view rows collected, and the same with the filter rows unioned in, split out and encoded.
    Alternated ``repeat`` times after a warm-up of both; wall time and CPU time (the JVM's and this
    process'), medians."""
    import psutil
    from pyspark.sql import functions as F

    from bench.views import dataset
    from bench.visits import without_visits
    from speed_layer import filter_rows
    from speed_layer.outputs import TAGS, by_generation
    from stores.redis.filter_rows import FilterRowsSink
    from views import all_views
    from views.shared_pass import assemble, count_events, keyed_events

    settings = get_settings()
    spark = spark_session(settings, "bench-filters-stage")
    jvm = psutil.Process(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))  # type: ignore[union-attr]
    me = psutil.Process()
    try:
        dims = without_visits(all_views())
        events = dataset(spark, settings.var_dir / "bench" / "filters", batch, console)
        tagged = events.withColumn(TAGS, F.array(F.lit(0)))
        keyed = keyed_events(tagged, dims, [TAGS], True).localCheckpoint(eager=True)
        by_gen = by_generation(keyed)

        def once(with_filters: bool) -> tuple[float, float, int]:
            cpu0 = sum(jvm.cpu_times()[:2]) + sum(me.cpu_times()[:2])
            t0 = time.monotonic()
            rows = assemble(count_events(by_gen, dims, ["gen"], settings.hll_lg_k, True, None), dims, ["gen"])
            if with_filters:
                rows = rows.unionByName(filter_rows.rows(by_gen, dims, True), allowMissingColumns=True)
            table, others = filter_rows.split_table(rows.toArrow())
            others.to_pylist()
            n = 0
            if table is not None:
                sink = FilterRowsSink()
                sink.add_table(table)
                sink.prepare()
                n = table.num_rows
            wall = time.monotonic() - t0
            return wall, sum(jvm.cpu_times()[:2]) + sum(me.cpu_times()[:2]) - cpu0, n

        once(False)
        once(True)
        runs: dict[str, list[tuple[float, float, int]]] = {"off": [], "on": []}
        for _ in range(repeat):
            runs["off"].append(once(False))
            runs["on"].append(once(True))
    finally:
        spark.stop()
    out: dict[str, Any] = {"events": batch, "repeat": repeat, "filter_rows": runs["on"][0][2]}
    for label, measured in runs.items():
        out[label] = {
            "median_wall_s": statistics.median(m[0] for m in measured),
            "median_cpu_s": statistics.median(m[1] for m in measured),
        }
    out["added_wall_s"] = out["on"]["median_wall_s"] - out["off"]["median_wall_s"]
    out["added_cpu_s"] = out["on"]["median_cpu_s"] - out["off"]["median_cpu_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--rate", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--stage", action="store_true", help="only the micro-batch's last job, in this process (no services)"
    )
    args = parser.parse_args()
    console = Console()
    if args.stage:
        result = stage(args.batch, args.repeat, console)
        console.print(result)
        write_result("filter_rows_stage", result)
        return
    base = get_settings()
    with running_stack(base):
        on, off = _settings(base, args.batch, True), _settings(base, args.batch, False)
        _fresh(on)
        mongo: MongoClient[dict[str, Any]] = MongoClient(on.mongo_url)
        mongo.drop_database(on.mongo_db)
        mongo.close()
        produced = produce_generated(on, console, args.events, span_hours=0.0, seed=1)
        spark = spark_session(on, "bench-filters")
        runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
        for _ in range(args.repeat):
            for label, settings in (("off", off), ("on", on)):
                result = summary(run(settings, spark))
                if label == "on":
                    result["redis"] = memory(settings)
                runs[label].append(result)
                console.print(label, result)
        spark.stop()
    last = runs["on"][-1]
    per_event = last["redis"]["lists_memory_bytes"] / last["events_counted"]
    result = {
        "events": produced,
        "batch": args.batch,
        "rate": args.rate,
        "runs": runs,
        "lists_memory_per_1000_events": per_event * 1000,
        "lists_memory_per_hour_at_rate": per_event * args.rate * 3600,
        "added_seconds_per_micro_batch": statistics.median(r["median_seconds"] for r in runs["on"])
        - statistics.median(r["median_seconds"] for r in runs["off"]),
    }
    console.print(result)
    write_result("filter_rows", result)


if __name__ == "__main__":
    main()
