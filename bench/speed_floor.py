"""The speed layer's floor: the least Spark work that gives its output on the same topic.

A Structured Streaming query that reads the topic, parses each record with the contract's schema
(``from_json``, no other check), and in each micro-batch makes the speed layer's realtime rows with
the speed layer's own function (speed_layer.outputs.rows, under the same settings: the declared
views and, when the settings count them, the visits with their retractions and the filter table's
rows), for one generation, collected to the driver. The visits need the visit state of the
visitor-days a micro-batch touches, as the speed layer does: it is read from and written back to
this job's Redis database (cleared at its start) with one plain transaction per micro-batch (its
step "commit"), so a visit that spans micro-batches is merged as the speed layer merges it.

Left out, which is the price of the speed layer's guarantees: the contract's verdicts (the
canonical-form recogniser and the pydantic model), the dedup, the counts and dead letters, the
generations' tags, the exactly-once commit of the rows with the batch id and offsets.
``bench/speed.py`` runs it in its own process (a JVM of its own, as the speed layer has) on the
topic the speed layer just consumed and reads its progress file: one JSON line per micro-batch
with the events it counted.

    python -m bench.speed_floor --topic T --max-offsets N --checkpoint DIR --progress FILE
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
from speed_layer import current_visitors, filter_rows, outputs
from speed_layer.visits import Horizon, dimensions_mark, meta_row, split
from stores.redis import visit_state
from views import all_views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

GENERATION = 0
"""The one generation the floor counts for (every event at or past its cut)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--max-offsets", type=int, required=True, help="records per micro-batch at most")
    parser.add_argument("--trigger-s", type=float, default=0.5)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--progress", type=Path, required=True, help="one JSON line per micro-batch")
    args = parser.parse_args(argv)
    settings = get_settings()
    spark = spark_session(settings, "speed-floor")
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    dims = all_views()
    made = outputs.Outputs(settings, list(dims), filter_rows.counted(dims, settings.filter_table))
    r = redis.Redis.from_url(settings.redis_url)
    visit_state.clear(r, dimensions_mark(dims))
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets))
        .load()
    )
    events = records.select(
        F.from_json(F.col("value").cast("string"), event_schema()).alias("e"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("log_time"),
    ).select("e.*", "kafka_partition", "kafka_offset", "log_time")
    single = args.max_offsets <= settings.speed_single_partition_rows
    active: dict[int, dict[int, int]] = {GENERATION: {}}

    def each(batch: DataFrame, batch_id: int) -> None:
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
            rows = outputs.rows(made, outputs.tagged(observed, active), active, horizon, single, materialise)
        finally:
            materialise.release()
        metrics = observation.get
        phases["views"] = time.monotonic() - t0 - sum(phases.values())
        _, rest = current_visitors.split(rows)
        _, rest = filter_rows.split(rest)
        newest = int(metrics["newest"] or 0)
        _, update = split([*rest, meta_row(max(meta.watermark_ms, newest), horizon.drop_before_us)])
        t1 = time.monotonic()
        state = update.sink(r)
        if state is not None:
            state.prepare()
            state.write()
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
        .option("checkpointLocation", str(args.checkpoint))
        .trigger(processingTime=f"{args.trigger_s} seconds")
        .start()
    )
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
