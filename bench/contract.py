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

4. The Python path: 200K valid records in a spelling ingest never writes (:func:`spaced`), so that
   none is recognised and every one goes through the contract's own code; both steps, seconds per
   million such records.
5. ``--layers``: the whole layers' throughput with each parse. Batch: the absorb beside the views
   it feeds (the shared pass over the absorbed events, no documents), so the drop is the absorb's
   extra time over the layer's. Speed: the speed layer itself (``python -m speed_layer run``,
   and ``bench/legacy_speed.py`` with the pre-contract parse), sustained events/s on one backlog,
   alternately, timed as ``bench/speed.py`` times it.

``make bench-contract`` runs it with ``--compare --layers``; results go to
bench/results/contract.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.common import write_result
from config.settings import Settings, get_settings

SPEED_RUNS = 3
"""Runs of the speed layer with each parse (--layers), taking turns to go first: each is a new
JVM working through the backlog. Runs of the same code differ widely on a shared machine
(README, "The event contract"), so the figure is the median of each."""
NON_CANONICAL_RECORDS = 200_000
"""Valid records respelled so that none is recognised (:func:`spaced`): the Python path's cost."""


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


def spaced(value: bytes) -> bytes:
    """A valid record in a spelling ingest never writes (a space after every separator): the
    same event, which the layers cannot recognise and must judge with the contract's Python."""
    return json.dumps(json.loads(value), separators=(", ", ": ")).encode()


def make_input(
    settings: Settings,
    path: Path,
    records: int,
    console: Console,
    spelling: Callable[[bytes], bytes] | None = None,
) -> None:
    """``records`` valid records as ingest would produce them (or as ``spelling`` respells them),
    in the Kafka source's columns."""
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
        value = encode(validate(record, bounds))
        values.append(value if spelling is None else spelling(value))
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
    """Parse as ``speed_layer.stream.read_events`` does, micro-batches counted. (The speed
    layer's dedup runs in the Kafka scan's task, which a Parquet source does not have: it is not
    part of this measure of the parse.)"""
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
        parsed.select(*input_columns(all_views(), spark))
        .writeStream.foreachBatch(count)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.monotonic() - t0, rows


def views_seconds(spark: Any, segment: Path, lg_k: int) -> tuple[float, int]:
    """Seconds of the batch layer's work after the absorb over the events of ``segment``: every
    view by the shared pass, into a no-op sink (no documents written, so the share of the absorb
    in the layer's time, hence the contract's cost, is if anything overstated). No contract code
    runs in it: it is the same whichever parse absorbed the events."""
    from pyspark.sql import functions as F

    from batch_layer.master import INVALID_PARTITION
    from views import all_views, compute, input_columns
    from views.shared_pass import partitions_for

    views = all_views()
    events = spark.read.parquet(str(segment)).where(F.col("event_date") != INVALID_PARTITION)
    n = events.count()
    t0 = time.monotonic()
    rows = compute(events.select(*input_columns(views, spark)), views, lg_k, partitions=partitions_for(n))
    rows.write.format("noop").mode("overwrite").save()
    return time.monotonic() - t0, n


def speed_layer_rates(
    console: Console, backlog: int, batch: int, seconds: float, repeat: int
) -> dict[str, Any]:
    """The speed layer's sustained events/s (bench/speed.py's timing: after two warm-up
    micro-batches, for at least ``seconds``) on one backlog of generated events, as shipped and
    with the pre-contract parse (bench/legacy_speed.py), alternately, ``repeat`` times each."""
    import shutil

    import redis

    from bench.common import produce_generated, running_stack
    from bench.speed import _env, _settings, _spawn, _timed, committed
    from ingest.topics import delete_topics, ensure_topics, log_end_offsets

    base = get_settings()
    settings = _settings(base, "contract")
    rates: dict[str, list[int]] = {"current": [], "legacy": []}
    with running_stack(base):
        delete_topics(settings, [settings.events_topic])
        ensure_topics(settings)
        produce_generated(settings, console, backlog, span_hours=0.0, seed=5)
        end = sum(log_end_offsets(settings).values())
        r = redis.Redis.from_url(settings.redis_url)
        variants = [("current", "speed_layer"), ("legacy", "bench.legacy_speed")]
        for turn in range(repeat):
            for name, module in variants if turn % 2 == 0 else reversed(variants):
                shutil.rmtree(settings.speed_checkpoint_uri.removeprefix("file://"), ignore_errors=True)
                r.flushdb()
                log = base.log_dir / f"bench-contract-speed-{name}.out"
                console.print(f"speed layer, {name} parse, {batch:,} events per micro-batch:")
                proc = _spawn([module, "run"], _env(settings, 0.5, batch), log)
                timed = _timed(console, proc, log, lambda: committed(r)[1], end, seconds)
                rates[name].append(timed["events_per_s"])
    median = {name: statistics.median(values) for name, values in rates.items()}
    return {
        "backlog": backlog,
        "events_per_micro_batch": batch,
        "events_per_s": rates,
        "median_events_per_s": {name: round(m) for name, m in median.items()},
        "throughput_drop": round(1 - median["current"] / median["legacy"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each step and parse")
    parser.add_argument("--no-save", action="store_true", help="print only, do not write the result file")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="alternate with the pre-contract parse (legacy_parse) as baseline",
    )
    parser.add_argument(
        "--layers",
        action="store_true",
        help="also the whole layers' throughput with each parse: the absorb beside the views it "
        "feeds (batch), the speed layer's sustained events/s on one backlog (speed)",
    )
    parser.add_argument("--backlog", type=int, default=3_000_000, help="speed layer backlog (--layers)")
    args = parser.parse_args()

    from config.spark import spark_session

    console = Console()
    settings = get_settings()
    work = settings.var_dir / "bench" / "contract"
    source = work / f"input-{args.records}"
    make_input(settings, source, args.records, console)
    spark = spark_session(settings, "bench-contract")
    per_million = 1_000_000 / args.records
    result: dict[str, Any] = {"records": args.records}
    # Before and after alternate within one session, so both see the same machine load.
    parses = (
        {"current": current_parse, "legacy": legacy_parse} if args.compare else {"current": current_parse}
    )
    runs: dict[str, dict[str, list[float]]] = {name: {"absorb": [], "stream": []} for name in parses}
    # One untimed round first (the JVM compiles each parse's code on its first run), then the
    # parses take turns going first, so neither is favoured by the order.
    order = list(parses.items())
    for repeat in range(args.repeat + 1):
        for name, parse in order if repeat % 2 else reversed(order):
            absorb_parse = None if parse is current_parse else parse
            absorb_s = time_absorb(spark, source, work / "segment", absorb_parse)
            stream_s = time_stream(spark, source, work / "checkpoint", parse)[0]
            if repeat:
                runs[name]["absorb"].append(absorb_s)
                runs[name]["stream"].append(stream_s)
    for name, times in runs.items():
        for step, seconds in times.items():
            result[f"{name}_{step}_seconds_per_million"] = round(min(seconds) * per_million, 2)
    if args.compare:
        for step in ("absorb", "stream"):
            result[f"{step}_slowdown"] = round(min(runs["current"][step]) / min(runs["legacy"][step]), 3)
    result["runs"] = {n: {k: [round(t, 2) for t in v] for k, v in t.items()} for n, t in runs.items()}
    # What a record that needs the contract's Python costs: valid records in a spelling ingest
    # never writes, so none is recognised, through the same absorb and stream.
    respelled = work / f"input-noncanonical-{NON_CANONICAL_RECORDS}"
    make_input(settings, respelled, NON_CANONICAL_RECORDS, console, spaced)
    python_path = {
        "absorb": min(time_absorb(spark, respelled, work / "segment") for _ in range(args.repeat)),
        "stream": min(time_stream(spark, respelled, work / "checkpoint")[0] for _ in range(args.repeat)),
    }
    result["non_canonical_seconds_per_million"] = {
        step: round(t * 1_000_000 / NON_CANONICAL_RECORDS, 2) for step, t in python_path.items()
    }
    if args.layers and args.compare:
        time_absorb(spark, source, work / "segment")
        views_s, events = views_seconds(spark, work / "segment", settings.hll_lg_k)
        absorb = {name: min(times["absorb"]) for name, times in runs.items()}
        result["batch_layer"] = {
            "events": events,
            "views_seconds": round(views_s, 2),
            "absorb_seconds": {name: round(t, 2) for name, t in absorb.items()},
            "throughput_drop": round(
                (absorb["current"] - absorb["legacy"]) / (absorb["current"] + views_s), 3
            ),
        }
    spark.stop()
    if args.layers and args.compare:
        result["speed_layer"] = speed_layer_rates(console, args.backlog, 500_000, 45.0, SPEED_RUNS)
    console.print(result)
    if not args.no_save:
        write_result("contract", result)


if __name__ == "__main__":
    main()
