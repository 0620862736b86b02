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
``--compare`` alternates every run with the parse the layers used before they applied the whole
contract (``from_json`` and shape checks only), in the same session, so both see the same load.
``make bench-contract`` runs it with ``--compare``; results go to bench/results/contract.json.
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


def legacy_parse(records: Any) -> Any:
    """The parse both layers used before they applied the whole contract (``from_json`` with the
    derived schema, shape checks only), kept here as the baseline of ``--compare``."""
    from pyspark.sql import functions as F

    from contract.spark_schema import INVALID_COLUMN, event_schema, required_fields

    schema = event_schema()
    parsed = records.select(
        F.from_json(F.col("value").cast("string"), schema).alias("e"),
        F.col("value").alias("_raw"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("log_time"),
    )
    checks = [F.when(F.col("e").isNull(), F.lit("event: not a JSON object"))]
    checks += [
        F.when(F.col(f"e.{name}").isNull(), F.lit(f"{name}: missing or not of the contract's type"))
        for name in required_fields()
    ]
    checks.append(F.when(F.col("e.schema_version") != F.lit(1), F.lit("schema_version: unsupported")))
    reason = F.concat_ws("; ", *checks)
    return parsed.select(
        *[F.col(f"e.{name}").alias(name) for name in schema.fieldNames()],
        "kafka_partition",
        "kafka_offset",
        "log_time",
        "_raw",
        F.when(reason == "", F.lit(None)).otherwise(reason).alias(INVALID_COLUMN),
    )


def current_parse(records: Any) -> Any:
    from contract.spark_schema import parse_kafka_records

    return parse_kafka_records(records)


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


def time_absorb(spark: Any, source: Path, out: Path, parse: Any = None) -> float:
    """Parse and write a segment: by default with ``MasterDataset.absorb``'s own code
    (``write_segment``: both passes, its select, its layout); with ``parse``, that parse in one
    pass and the same select and layout."""
    from batch_layer.master import segment_rows, write_segment
    from contract.codec import bounds_from

    shutil.rmtree(out, ignore_errors=True)
    records = spark.read.parquet(str(source))
    t0 = time.monotonic()
    if parse is None:
        write_segment(spark, records, out.resolve().as_uri(), bounds_from())
    else:
        segment_rows(parse(records)).write.partitionBy("event_date").parquet(str(out))
    return time.monotonic() - t0


def time_stream(spark: Any, source: Path, checkpoint: Path, parse: Any = current_parse) -> tuple[float, int]:
    """Parse and deduplicate as ``speed_layer.stream.read_events`` does, micro-batches counted as
    ``SpeedJob.process`` does."""
    from speed_layer.stream import deduplicated
    from views import all_views, input_columns

    shutil.rmtree(checkpoint, ignore_errors=True)
    schema = spark.read.parquet(str(source)).schema
    rows = 0

    def count(df: Any, batch_id: int) -> None:
        nonlocal rows
        df = df.localCheckpoint(eager=True)
        rows += df.count()
        df.unpersist()

    t0 = time.monotonic()
    parsed = parse(spark.readStream.schema(schema).parquet(str(source)))
    query = (
        deduplicated(parsed, input_columns(all_views(), spark), SPEED_DEDUP_WINDOW_S)
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
    parser.add_argument(
        "--compare",
        action="store_true",
        help="alternate with the pre-contract parse (legacy_parse) as baseline",
    )
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
    per_million = 1_000_000 / args.records
    result: dict[str, Any] = {"records": args.records}
    # Before and after alternate within one session, so both see the same machine load.
    parses = (
        {"current": current_parse, "legacy": legacy_parse} if args.compare else {"current": current_parse}
    )
    runs: dict[str, dict[str, list[float]]] = {name: {"absorb": [], "stream": []} for name in parses}
    for _ in range(args.repeat):
        for name, parse in parses.items():
            absorb_parse = None if parse is current_parse else parse
            runs[name]["absorb"].append(time_absorb(spark, source, work / "segment", absorb_parse))
            runs[name]["stream"].append(time_stream(spark, source, work / "checkpoint", parse)[0])
    for name, times in runs.items():
        for step, seconds in times.items():
            result[f"{name}_{step}_seconds_per_million"] = round(min(seconds) * per_million, 2)
    if args.compare:
        for step in ("absorb", "stream"):
            result[f"{step}_slowdown"] = round(min(runs["current"][step]) / min(runs["legacy"][step]), 3)
    result["runs"] = {n: {k: [round(t, 2) for t in v] for k, v in t.items()} for n, t in runs.items()}
    console.print(result)
    if not args.no_save:
        write_result("contract", result)
    spark.stop()


if __name__ == "__main__":
    main()
