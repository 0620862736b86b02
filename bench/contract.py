"""What the contract costs each layer: parse time per million records, batch absorb and speed stream.

Both layers judge every record they read with the contract (``contract.spark_schema``). This
measures that step where it runs, without Kafka, so the figure is the parse and nothing else that
varies between runs:

1. ``--records`` valid records (default 1M) are generated once, encoded as ingest produces them,
   and kept as Parquet with the Kafka source's columns (value, partition, offset, timestamp) under
   the var dir (reused by later runs).
2. batch absorb: ``parse_kafka_records`` and the absorb's own select, written as Parquet partitioned
   by event date, as ``MasterDataset.absorb`` writes a segment.
3. speed stream: the same file read as a stream (``availableNow``), ``parse_kafka_records``, the
   speed layer's watermark and dedup by event id, each micro-batch materialised and counted.

Each step runs ``--repeat`` times; the best time is reported, as seconds per million records.
``make bench-contract`` runs it; results go to bench/results/contract.json.
"""

from __future__ import annotations

import argparse
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.common import write_result
from config.settings import Settings, get_settings

SPEED_DEDUP_WINDOW_S = 600


def make_input(settings: Settings, path: Path, records: int, console: Console) -> None:
    """``records`` valid records as ingest would produce them, in the Kafka source's columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from contract import encode, validate
    from contract.codec import bounds_from
    from ingest.generator import GeneratorConfig, TrafficGenerator

    if (path / "_SUCCESS").exists() and pq.read_metadata(next(path.glob("*.parquet"))).num_rows > 0:
        total = sum(pq.read_metadata(f).num_rows for f in path.glob("*.parquet"))
        if total == records:
            return
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    console.print(f"generating {records:,} records...")
    now = datetime.now(UTC)
    bounds = bounds_from(settings)
    generator = TrafficGenerator(
        GeneratorConfig(
            total=records, seed=7, span_hours=24, now=now, malformed_fraction=0.0, duplicate_fraction=0.01
        )
    )
    files, per_file = 4, -(-records // 4)
    values: list[bytes] = []
    for record in generator:
        assert isinstance(record, dict)
        values.append(encode(validate(record, bounds)))
    log_time = now + timedelta(seconds=1)
    for i in range(files):
        chunk = values[i * per_file : (i + 1) * per_file]
        table = pa.table(
            {
                "value": pa.array(chunk, pa.binary()),
                "partition": pa.array([i] * len(chunk), pa.int32()),
                "offset": pa.array(range(len(chunk)), pa.int64()),
                "timestamp": pa.array([log_time] * len(chunk), pa.timestamp("us", tz="UTC")),
            }
        )
        pq.write_table(table, path / f"part-{i}.parquet")
    (path / "_SUCCESS").touch()


def time_absorb(spark: Any, source: Path, out: Path) -> float:
    """Parse and write a segment, as ``MasterDataset.absorb`` does (its select, its layout)."""
    from pyspark.sql import functions as F

    from batch_layer.master import EVENT_COLUMNS, INVALID_PARTITION
    from contract.spark_schema import INVALID_COLUMN, parse_kafka_records

    shutil.rmtree(out, ignore_errors=True)
    t0 = time.monotonic()
    parsed = parse_kafka_records(spark.read.parquet(str(source)))
    valid = F.col(INVALID_COLUMN).isNull()
    parsed.select(
        *EVENT_COLUMNS,
        "schema_version",
        "kafka_partition",
        "kafka_offset",
        "log_time",
        F.when(valid, F.lit(None)).otherwise(F.col("_raw")).alias("raw"),
        INVALID_COLUMN,
        F.when(valid, F.date_format("ts", "yyyy-MM-dd"))
        .otherwise(F.lit(INVALID_PARTITION))
        .alias("event_date"),
    ).write.partitionBy("event_date").parquet(str(out))
    return time.monotonic() - t0


def time_stream(spark: Any, source: Path, checkpoint: Path) -> tuple[float, int]:
    """Parse and deduplicate as ``SpeedJob.stream`` does, micro-batches counted as ``process`` does."""
    from pyspark.sql import functions as F

    from contract.spark_schema import INVALID_COLUMN, parse_kafka_records
    from speed_layer.job import DEDUP_COLUMN, KEEP_COLUMNS

    shutil.rmtree(checkpoint, ignore_errors=True)
    schema = spark.read.parquet(str(source)).schema
    rows = 0

    def count(df: Any, batch_id: int) -> None:
        nonlocal rows
        df = df.localCheckpoint(eager=True)
        rows += df.count()
        df.unpersist()

    t0 = time.monotonic()
    parsed = parse_kafka_records(spark.readStream.schema(schema).parquet(str(source)))
    valid = F.col(INVALID_COLUMN).isNull()
    dedup_key = F.when(valid, F.col("event_id")).otherwise(
        F.concat(F.lit("invalid:"), F.col("kafka_partition"), F.lit(":"), F.col("kafka_offset"))
    )
    query = (
        parsed.select(
            *KEEP_COLUMNS,
            "log_time",
            INVALID_COLUMN,
            F.when(valid, F.lit(None)).otherwise(F.col("_raw")).alias("_raw"),
            dedup_key.alias(DEDUP_COLUMN),
        )
        .withWatermark("log_time", f"{SPEED_DEDUP_WINDOW_S} seconds")
        .dropDuplicatesWithinWatermark([DEDUP_COLUMN])
        .writeStream.foreachBatch(count)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.monotonic() - t0, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--no-save", action="store_true", help="print only, do not write the result file")
    args = parser.parse_args()

    from config.spark import spark_session

    console = Console()
    settings = get_settings()
    work = settings.var_dir / "bench" / "contract"
    source = work / f"input-{args.records}"
    make_input(settings, source, args.records, console)
    spark = spark_session(settings, "bench-contract")
    spark.conf.set(
        "spark.sql.streaming.stateStore.providerClass",
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    )
    absorb = [time_absorb(spark, source, work / "segment") for _ in range(args.repeat)]
    streams = [time_stream(spark, source, work / "checkpoint") for _ in range(args.repeat)]
    per_million = 1_000_000 / args.records
    result = {
        "records": args.records,
        "absorb_seconds_per_million": round(min(absorb) * per_million, 2),
        "stream_seconds_per_million": round(min(t for t, _ in streams) * per_million, 2),
        "stream_rows": streams[0][1],
        "runs": {"absorb": [round(t, 2) for t in absorb], "stream": [round(t, 2) for t, _ in streams]},
    }
    console.print(result)
    if not args.no_save:
        write_result("contract", result)
    spark.stop()


if __name__ == "__main__":
    main()
