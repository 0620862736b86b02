"""The speed layer's floor: the least Spark work that gives its output on the same topic.

A Structured Streaming query that reads the topic, parses each record with the contract's schema
(``from_json``, no other check), and in each micro-batch makes the speed layer's realtime rows with
the speed layer's own function (speed_layer.outputs.rows, under the same settings: the declared
views and, when the settings count them, the visits with their retractions, the filter table's rows
and the current visitors) for one generation, and writes them where the speed layer writes them
with the speed layer's own sinks (speed_layer.writes), with the commit record the API's answer
cache keys on, in one plain transaction (its step "commit"). The visits need the visit state of
each partition, as the speed layer's do: the floor keeps its own in the scan (empty at its start),
so a visit that spans micro-batches is merged as the speed layer merges it.

Left out, which is the price of the speed layer's guarantees: the contract's verdicts (the
canonical-form recogniser and the pydantic model), the dedup, the counts and dead letters, the
generations' tags, the exactly-once commit (WATCH, the check of the batch id, the stats record).

``bench/speed.py`` runs it in its own process (a JVM of its own, as the speed layer has) and reads
its progress file (one JSON line per micro-batch: the events it counted, the steps' seconds): for
throughput on the topic the speed layer just consumed, with the same ``--max-offsets``; for
freshness from the end of the live topic with back-to-back micro-batches (``--trigger-s 0
--starting-offsets latest``), where the API reads what it writes.

    python -m bench.speed_floor --topic T [--max-offsets N] --checkpoint DIR --progress FILE
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from config.settings import get_settings
from config.spark import spark_session
from contract.spark_schema import event_schema
from generations.model import SpeedCommit
from speed_layer import filter_rows, outputs
from speed_layer.stream import batch_offsets, initial_offsets
from speed_layer.visits import Horizon, ScanVisits, VisitProgress, dimensions_mark
from speed_layer.writes import RowWrites
from stores.redis import keys, visit_state
from stores.redis.current_visitors import CurrentVisitorsSink
from stores.redis.sink import RedisRealtimeSink
from views import all_views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

GENERATION = 0
"""The one generation the floor counts for (every event at or past its cut)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--max-offsets", type=int, help="records per micro-batch at most (default: no cap)")
    parser.add_argument("--trigger-s", type=float, default=0.5, help="0: back-to-back micro-batches")
    parser.add_argument("--starting-offsets", choices=("earliest", "latest"), default="earliest")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--progress", type=Path, required=True, help="one JSON line per micro-batch")
    args = parser.parse_args(argv)
    settings = get_settings()
    spark = spark_session(settings, "speed-floor", settings.speed_java_options)  # the speed layer's JVM flags
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    dims = all_views()
    made = outputs.Outputs(settings, list(dims), filter_rows.counted(dims, settings.filter_table))
    r = redis.Redis.from_url(settings.redis_url)
    visit_state.clear(r, dimensions_mark(dims))
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting_offsets)
    )
    if args.max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets))
    events = (
        reader.load()
        .select(
            F.from_json(F.col("value").cast("string"), event_schema()).alias("e"),
            F.col("partition").alias("kafka_partition"),
            F.col("offset").alias("kafka_offset"),
            F.col("timestamp").alias("log_time"),
        )
        .select("e.*", "kafka_partition", "kafka_offset", "log_time")
    )
    checkpoint = args.checkpoint.resolve().as_uri()
    active: dict[int, dict[int, int]] = {GENERATION: {}}
    visit_states = ScanVisits(spark, f"{checkpoint}|{args.topic}")
    fresh = [True]

    def minutes() -> CurrentVisitorsSink:
        return CurrentVisitorsSink(
            r, settings.current_visitors_exact_limit, settings.current_visitors_max_minutes
        )

    def each(batch: DataFrame, batch_id: int) -> None:
        ends = batch_offsets(spark, checkpoint, args.topic, batch_id)
        starts = (
            batch_offsets(spark, checkpoint, args.topic, batch_id - 1)
            if batch_id > 0
            else initial_offsets(spark, checkpoint, args.topic)
        )
        records = sum(max(0, end - starts.get(p, 0)) for p, end in ends.items())
        single = records <= settings.speed_single_partition_rows
        meta = visit_state.read_meta(r)
        horizon = Horizon(
            meta.watermark_ms, meta.dropped_before_us, settings.visit_lateness_s, settings.session_gap_s
        )
        observation = Observation()
        observed = batch.observe(
            observation, F.count(F.lit(1)).alias("rows"), F.max(F.unix_millis("log_time")).alias("newest")
        )
        phases: dict[str, float] = {}
        t0 = time.monotonic()
        materialise = outputs.Materialised(phases)
        try:
            if not single:
                # As in the speed layer: the broadcast tables would read the scan again.
                observed = materialise(observed)
            visits = visit_states.marker(starts, ends, horizon)
            if fresh[0]:  # the first micro-batch's states start empty, as the stream does
                visits.seed(visit_states.seed(starts))
                fresh[0] = False
            every = observed.select(
                "*", F.lit(True).alias(outputs.COUNTED)
            )  # no record rejected, none a duplicate
            rows = outputs.rows(made, outputs.tagged(every, active), visits, single, materialise, active)
        finally:
            materialise.release()
        metrics = observation.get
        phases["views"] = time.monotonic() - t0 - sum(phases.values())
        newest = int(metrics["newest"] or 0)
        rows.visit_progress = VisitProgress(max(meta.watermark_ms, newest), horizon.drop_before_us)
        t1 = time.monotonic()
        writes = RowWrites(rows, RedisRealtimeSink(r), minutes)
        with r.pipeline(transaction=True) as pipe:
            writes.flush(pipe)
            # What the API's answer cache keys on: without a new record it keeps serving the
            # answers of before (no WATCH, no check of the batch id: not the speed layer's protocol).
            pipe.set(keys.SPEED_COMMIT, keys.encode_commit(SpeedCommit(batch_id, ends)))
            pipe.execute()
        phases["commit"] = time.monotonic() - t1
        line: dict[str, Any] = {
            "batch_id": batch_id,
            "events": int(metrics["rows"]),
            "at": time.time(),
            "phases": {k: round(v, 3) for k, v in phases.items()},
        }
        with args.progress.open("a") as f:
            f.write(json.dumps(line) + "\n")

    query = (
        events.writeStream.foreachBatch(each)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{args.trigger_s} seconds")
        .start()
    )
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
