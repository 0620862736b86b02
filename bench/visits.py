"""What visits cost each layer: the batch recompute and the speed layer's sustained rate, with and
without visits, in the same run.

1. Batch: the shared pass of every shipped dimension over one generated dataset (Parquet, kept
   under the var dir, the one ``make bench-views`` uses, read in every run and not cached, as the
   recompute reads the master dataset), into Spark's no-op sink, as a full recompute computes it,
   in a JVM with the batch layer's flags; with visits (the events sessionised in the shuffle's partitions, the
   visit metrics of five dimensions and the entry and exit pages) and without (the same dimensions
   counting page views and visitors only). Alternated, best of ``--batch-repeat`` each after a
   warm-up of both; the JVM's CPU time of each run is recorded beside its wall time (on a machine
   shared with other work, the CPU time's ratio is the steadier one; the load average is noted).
2. Speed: the speed layer's process on the local stack, from the start of the same backlog with
   the same micro-batch size, timed in its steady state, with ``LAMBDA_COUNT_VISITS`` on (the visits
   merged into the visit state of each partition in the scan, the retractions) and off, the filter
   table off in both; then the visit state's heap per visitor-day (:func:`state_size`).

Target: visits add at most 35% to either layer's time (time with visits / time without <= 1.35).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from typing import Any

import psutil
from rich.console import Console

from bench.api import _cpu_seconds
from bench.common import produce_generated, running_stack, write_result
from bench.speed import _fresh, _settings, _start_speed, _timed, committed
from bench.views import dataset
from config.settings import Settings, get_settings
from config.spark import spark_session
from ingest.topics import log_end_offsets
from views import View, all_views, compute, input_columns
from views.shared_pass import partitions_for

TARGET = 1.35
"""Time with visits over time without, at most, in each layer."""


def without_visits(views: list[View]) -> list[View]:
    """The shipped views counting page views and visitors only."""
    return [replace(v, visits=False) for v in views if v.per_visit is None]


def batch(settings: Settings, console: Console, events_n: int, repeat: int) -> dict[str, Any]:
    spark = spark_session(settings, "bench-visits", settings.batch_java_options)  # the batch layer's JVM
    try:
        # Not cached: read from its Parquet in every run, as the recompute reads the master dataset.
        # Cached in the heap it is a large old-generation live set the recompute never has (with
        # the throughput collector it made the pass with visits slower: docs/visits.md, "Cost").
        events = dataset(spark, settings.var_dir / "bench" / "views", events_n, console)
        n = events.count()
        runs = {"with visits": all_views(), "without visits": without_visits(all_views())}

        jvm = psutil.Process(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))  # type: ignore[union-attr]
        cpu: dict[str, list[float]] = {label: [] for label in runs}

        def run(views: list[View], label: str | None = None) -> float:
            cpu0, t0 = _cpu_seconds(jvm), time.monotonic()
            needed = events.select(*input_columns(views, spark))
            rows = compute(needed, views, settings.hll_lg_k, partitions=partitions_for(n))
            rows.write.format("noop").mode("overwrite").save()
            if label is not None:
                cpu[label].append(_cpu_seconds(jvm) - cpu0)
            return time.monotonic() - t0

        for label, views in runs.items():  # warm-up: JIT, file listing
            console.print(f"batch warm-up, {label} ...")
            run(views)
        seconds: dict[str, list[float]] = {label: [] for label in runs}
        for i in range(repeat):
            for label, views in runs.items():
                seconds[label].append(run(views, label))
                console.print(
                    f"batch {i + 1}/{repeat}, {label}: {seconds[label][-1]:.1f} s, "
                    f"JVM CPU {cpu[label][-1]:.1f} s, load average {os.getloadavg()[0]:.1f}"
                )
        best = {label: min(s) for label, s in seconds.items()}
        ratio = best["with visits"] / best["without visits"]
        least_cpu = {label: min(c) for label, c in cpu.items()}
        cpu_ratio = least_cpu["with visits"] / least_cpu["without visits"]
        console.print(
            f"batch, {n:,} events: with visits {n / best['with visits']:,.0f} events/s, without "
            f"{n / best['without visits']:,.0f} events/s: time x[bold]{ratio:.2f}[/], "
            f"JVM CPU time x{cpu_ratio:.2f}"
        )
        return {
            "events": n,
            "seconds": {label: [round(s, 2) for s in v] for label, v in seconds.items()},
            "jvm_cpu_seconds": {label: [round(c, 2) for c in v] for label, v in cpu.items()},
            "cpu_ratio": round(cpu_ratio, 3),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "events_per_s": {label: round(n / s) for label, s in best.items()},
            "time_ratio": round(ratio, 3),
            "target_time_ratio": TARGET,
            "met": ratio <= TARGET,
        }
    finally:
        spark.stop()


def speed(
    base: Settings, console: Console, backlog: int, batch_size: int, min_seconds: float
) -> dict[str, Any]:
    out: dict[str, Any] = {"backlog": backlog, "events_per_micro_batch": batch_size}
    rates: dict[str, float] = {}
    for label, on in (("with visits", True), ("without visits", False)):
        # The filter table off in both: it needs the visits' entry and exit pages, and its own
        # cost is what bench/filters.py and bench/filter_rows.py measure.
        settings = _settings(base, "visits").model_copy(update={"count_visits": on, "filter_table": False})
        r = _fresh(settings)
        produce_generated(settings, console, backlog, span_hours=0.0, seed=1)
        end = sum(log_end_offsets(settings).values())
        log_path = base.log_dir / f"bench-visits-speed-{'on' if on else 'off'}.out"
        console.print(f"speed layer {label}, {batch_size:,} events per micro-batch:")
        proc = _start_speed(settings, trigger_s=0.5, max_offsets=batch_size, log=log_path)
        timed = _timed(console, proc, log_path, lambda r=r: committed(r)[1], end, min_seconds)  # type: ignore[misc]
        out[label] = timed
        rates[label] = timed["events_per_s"]
    ratio = rates["without visits"] / rates["with visits"]
    console.print(
        f"speed layer: with visits {rates['with visits']:,.0f} events/s, without "
        f"{rates['without visits']:,.0f} events/s: time x[bold]{ratio:.2f}[/]"
    )
    out.update(
        {
            "events_per_s": rates,
            "time_ratio": round(ratio, 3),
            "target_time_ratio": TARGET,
            "met": ratio <= TARGET,
        }
    )
    return out


def state_size(settings: Settings, console: Console, events_n: int) -> dict[str, Any]:
    """The speed layer's visit state in its JVM: ``events_n`` page views of the batch dataset
    merged into the states of 4 partitions by the speed layer's own function
    (speed_layer.visits), in a JVM with the speed layer's flags; the heap they hold after a full
    collection, per visitor-day."""
    from pyspark.sql import functions as F

    from speed_layer.outputs import COUNTED
    from speed_layer.visits import Horizon, ScanVisits
    from stores.redis.visit_state import NEVER
    from views.shared_pass import keyed_events

    spark = spark_session(settings, "bench-visit-state", settings.speed_java_options)
    try:
        views = all_views()
        events = dataset(spark, settings.var_dir / "bench" / "views", 2_000_000, console).limit(events_n)
        partitions = 4
        records = (
            events.select(*input_columns(views, spark))
            .withColumn("kafka_partition", F.pmod(F.hash("visitor_id"), F.lit(partitions)))
            .withColumn("kafka_offset", F.lit(0).cast("long"))  # no generation: never compared
            .withColumn(COUNTED, F.lit(True))
            .repartition(partitions, "kafka_partition")
            .sortWithinPartitions("kafka_partition")  # each partition's records together
        )
        carried = ["kafka_partition", "kafka_offset", COUNTED]
        keyed = keyed_events(records, views, carried, single_partition=True)
        scan = ScanVisits(spark, f"bench-visit-state-{time.monotonic_ns()}")
        at = dict.fromkeys(range(partitions), 0)
        marker = scan.marker(
            at, dict.fromkeys(range(partitions), 1), Horizon(0, NEVER, 0, settings.session_gap_s)
        )
        marker.seed(scan.seed(at))
        jvm = spark.sparkContext._jvm
        assert jvm is not None

        def heap() -> int:
            for _ in range(3):
                jvm.java.lang.System.gc()
            runtime = jvm.java.lang.Runtime.getRuntime()
            return int(runtime.totalMemory()) - int(runtime.freeMemory())

        before = heap()
        marker.apply(keyed, views, COUNTED)
        held = heap() - before
        days = scan.held()
        scan.forget()
    finally:
        spark.stop()
    per_day = held / max(days, 1)
    console.print(
        f"visit state: {days:,} visitor-days after {events_n:,} page views, "
        f"{per_day:,.0f} bytes of heap per visitor-day"
    )
    return {
        "events": events_n,
        "visitor_days": days,
        "heap_bytes": held,
        "bytes_per_visitor_day": round(per_day),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=2_000_000, help="events of the batch dataset")
    parser.add_argument("--batch-repeat", type=int, default=2)
    parser.add_argument("--backlog", type=int, default=1_500_000, help="events loaded for each speed run")
    parser.add_argument("--micro-batch", type=int, default=200_000, help="events per micro-batch (speed)")
    parser.add_argument("--min-seconds", type=float, default=45.0, help="each speed run timed this long")
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args(argv)
    console = Console()
    settings = get_settings()
    result: dict[str, Any] = {"batch": batch(settings, console, args.events, args.batch_repeat)}
    if not args.skip_speed:
        with running_stack(settings):
            result["speed"] = speed(settings, console, args.backlog, args.micro_batch, args.min_seconds)
        result["speed"]["state"] = state_size(settings, console, args.backlog)
    path = write_result("visits", result)
    console.print(f"results: {path}")
    return 0 if all(part["met"] for part in result.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
