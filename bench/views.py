"""The shared pass: Spark stages and throughput with the five shipped dimensions beside two views.

Runs on one generated dataset (Parquet, cached under the var dir), with no services:
1. batch: every view over all events, as a batch run computes them (dedup, hourly and daily page
   views, exact distinct visitors and HLL sketches), into Spark's no-op sink; events/s and the
   Spark stages the run executed;
2. micro-batch: the same pass over a slice of the events tagged with two active generations, as
   the speed layer computes each micro-batch, collected to the driver; p50 seconds and stages.
Each is measured with two views (``page`` and ``site``, what the platform shipped before views
were declared) and with every shipped dimension: the number of shuffles must not grow with the
number of views, and the throughput with five must not fall far below two.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.common import write_result
from config.settings import get_settings
from config.spark import spark_session
from contract import encode
from ingest.generator import GeneratorConfig, TrafficGenerator
from views import View, all_views, compute, get_view, input_columns


def dataset(spark: Any, path: Path, events: int, console: Console) -> Any:
    """``events`` generated events (duplicates included) as Parquet, written once and reused."""
    from contract.spark_schema import event_schema

    parquet = path / f"events-{events}.parquet"
    if not parquet.exists():
        path.mkdir(parents=True, exist_ok=True)
        jsonl = path / f"events-{events}.jsonl"
        console.print(f"generating {events:,} events into {parquet.name} ...")
        generator = TrafficGenerator(
            GeneratorConfig(total=events, seed=7, span_hours=72, malformed_fraction=0.0, visitors=400_000)
        )
        with jsonl.open("wb") as f:
            for record in generator:
                assert isinstance(record, dict)
                f.write(encode_record(record) + b"\n")
        spark.read.schema(event_schema()).json(str(jsonl)).write.parquet(str(parquet))
        jsonl.unlink()
    return spark.read.parquet(str(parquet))


def encode_record(record: dict[str, Any]) -> bytes:
    from contract import PageView

    return encode(PageView.model_validate(record))


def stages_of(spark: Any, action: Callable[[], object]) -> tuple[float, int]:
    """(seconds, Spark stages executed) of one action; skipped (reused) stages are not counted."""
    sc = spark.sparkContext
    group = f"bench-{time.monotonic_ns()}"
    sc.setJobGroup(group, group)
    t0 = time.monotonic()
    try:
        action()
    finally:
        seconds = time.monotonic() - t0
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    stages = 0
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        if info is None:
            continue
        for stage in info.stageIds:
            s = tracker.getStageInfo(stage)
            if s is not None and s.numTasks > 0 and s.numCompletedTasks > 0:
                stages += 1
    return seconds, stages


def batch_pass(spark: Any, events: Any, views: list[View], lg_k: int, n: int) -> dict[str, Any]:
    def run() -> None:
        rows = compute(events.select(*input_columns(views, spark)), views, lg_k)
        rows.write.format("noop").mode("overwrite").save()

    stages_of(spark, run)  # warm-up: JIT, file listing, Python workers
    seconds, stages = stages_of(spark, run)
    return {"seconds": round(seconds, 2), "events_per_s": round(n / seconds), "stages": stages}


def micro_batch_pass(spark: Any, batch: Any, views: list[View], lg_k: int, repeat: int) -> dict[str, Any]:
    from pyspark.sql import functions as F

    tags = F.array(F.lit(1), F.when(F.col("event_id") > F.lit("8"), F.lit(2)))
    tagged = batch.select("*", F.explode(tags).alias("gen")).where(F.col("gen").isNotNull())
    runs = [
        stages_of(spark, lambda: compute(tagged, views, lg_k, by=["gen"]).collect()) for _ in range(repeat)
    ]
    seconds = [s for s, _ in runs[1:]]
    return {"p50_seconds": round(statistics.median(seconds), 3), "stages": runs[-1][1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--micro-batch", type=int, default=20_000, help="events per micro-batch")
    parser.add_argument("--repeat", type=int, default=6, help="micro-batches timed (the first is a warm-up)")
    args = parser.parse_args(argv)
    console = Console()
    settings = get_settings()
    spark = spark_session(settings, "bench-views")
    try:
        events = dataset(spark, settings.var_dir / "bench" / "views", args.events, console).cache()
        n = events.count()
        batch = events.limit(args.micro_batch).cache()
        batch.count()
        sets = {"two_views": [get_view("page"), get_view("site")], "five_dimensions": all_views()}
        result: dict[str, Any] = {"events": n, "micro_batch_events": args.micro_batch, "views": {}}
        for label, views in sets.items():
            b = batch_pass(spark, events, views, settings.hll_lg_k, n)
            m = micro_batch_pass(spark, batch, views, settings.hll_lg_k, args.repeat)
            result["views"][label] = {"names": [v.name for v in views], "batch": b, "micro_batch": m}
            console.print(
                f"{label:>16}: batch {b['events_per_s']:>9,} events/s, {b['stages']} stages | "
                f"micro-batch of {args.micro_batch:,}: p50 {m['p50_seconds']:.2f} s, {m['stages']} stages"
            )
        two, five = result["views"]["two_views"], result["views"]["five_dimensions"]
        result["five_over_two_batch_throughput"] = round(
            five["batch"]["events_per_s"] / two["batch"]["events_per_s"], 3
        )
        console.print(
            f"five dimensions / two views, batch throughput: {result['five_over_two_batch_throughput']:.2f}"
        )
    finally:
        spark.stop()
    console.print(f"-> {write_result('views', result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
