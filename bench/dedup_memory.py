"""The speed layer's dedup state: its heap for a window at a given rate, and its cost per record.

``python -m bench.dedup_memory --rate 20000`` feeds the JVM marker (``speed_layer.dedup``) the
records of ``--seconds`` of log (default: the window, its grace and a bucket, the most a state ever
holds) at ``--rate`` events/s spread over the topic's partitions, each id distinct, in
micro-batches of ``--batch`` records, through the code path of the stream (one Spark task per
partition, rows in offset order). It prints the fingerprints held, the bytes of their tables (what
the arrays take: an exact count, not a sample of the heap), the JVM's used heap after a GC, and
the seconds per micro-batch; ``docs/scaling.md`` quotes the runs.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.console import Console

from config.settings import get_settings
from contract.duplicates import GRACE_MS


def used_heap(spark: Any) -> int:
    jvm = spark.sparkContext._jvm
    runtime = jvm.java.lang.Runtime.getRuntime()
    jvm.java.lang.System.gc()
    return int(runtime.totalMemory() - runtime.freeMemory())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=20_000, help="events/s of the log fed")
    parser.add_argument("--seconds", type=float, default=None, help="seconds of log (default: the most held)")
    parser.add_argument("--batch", type=int, default=2_000_000, help="records per micro-batch")
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from config.spark import spark_session
    from speed_layer.dedup import DUPLICATE_COLUMN, ScanDedup

    console = Console()
    settings = get_settings().model_copy(update={"events_topic": "bench.dedup-memory"})
    window_ms = settings.speed_dedup_window_s * 1000
    seconds = args.seconds or (window_ms + GRACE_MS + window_ms / 4) / 1000
    parts = settings.topic_partitions
    per_partition = int(args.rate * seconds / parts)
    spark = spark_session(settings, "bench-dedup-memory")
    dedup = ScanDedup(spark, settings)
    dedup.forget()
    heap_before = used_heap(spark)
    base_ms = 1_800_000_000_000
    step_ms = 1000.0 * parts / args.rate
    batches = []
    marker: Any = None
    for start in range(0, per_partition, args.batch // parts):
        end = min(per_partition, start + args.batch // parts)
        rows = (
            spark.range(0, parts * (end - start), 1, parts)
            .select(
                F.spark_partition_id().cast("int").alias("kafka_partition"),
                (F.lit(start) + F.col("id") % (end - start)).alias("kafka_offset"),
            )
            .select(
                "kafka_partition",
                "kafka_offset",
                F.timestamp_millis(
                    (F.lit(base_ms) + F.col("kafka_offset") * F.lit(step_ms)).cast("long")
                ).alias("log_time"),
                F.concat_ws("-", F.lit("event"), "kafka_partition", "kafka_offset").alias("event_id"),
                F.lit(None).cast("string").alias("_invalid"),
            )
        )
        marked, marker = dedup.mark(
            rows, dict.fromkeys(range(parts), start), dict.fromkeys(range(parts), end)
        )
        if start == 0:
            marker.startEmpty(",".join(f"{p}:0:{base_ms - window_ms}" for p in range(parts)))
        t0 = time.monotonic()
        duplicates = marked.where(F.col(DUPLICATE_COLUMN)).count()
        batches.append({"records": parts * (end - start), "seconds": round(time.monotonic() - t0, 2)})
        if duplicates:
            raise AssertionError(f"{duplicates} false duplicates among distinct ids")
        console.print(f"  {sum(b['records'] for b in batches):,} records, last micro-batch {batches[-1]}")
    entries, table_bytes = dedup.held()
    heap_after = used_heap(spark)
    result = {
        "rate": args.rate,
        "window_s": settings.speed_dedup_window_s,
        "seconds_of_log": seconds,
        "records": parts * per_partition,
        "fingerprints_held": entries,
        "table_bytes": table_bytes,
        "bytes_per_fingerprint": round(table_bytes / max(entries, 1), 1),
        "heap_growth_bytes": heap_after - heap_before,
        "micro_batches": batches,
    }
    console.print_json(json.dumps(result))


if __name__ == "__main__":
    main()
