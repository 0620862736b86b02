"""Builds the Spark driver's class-data archive (config.jvm_archive says where it lives and maps it
into every job's JVM): a JVM runs a small workload of the platform's own code (the contract's
parse, the shared pass of the views, Parquet, a stateful stream) and dumps every class it loaded
when it exits. ``make setup`` runs it once (``python -m views.jvm_archive``)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from config.jvm_archive import archive_path
from config.settings import Settings, get_settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def exercise(spark: SparkSession, scratch: Path) -> None:
    """Run what the layers run, on a few rows, so the JVM loads the classes they need."""
    from pyspark.sql import functions as F

    from contract import PageView
    from contract.codec import encode
    from contract.spark_schema import INVALID_COLUMN, parse_kafka_records
    from views import all_views, compute

    now = datetime.now(UTC)
    events = [
        PageView(
            event_id=f"e{i}",
            ts=now,
            url=f"https://shop.example.com/p/{i % 7}",
            visitor_id=f"v{i % 5}",
            referrer="https://www.google.com/" if i % 2 else None,
            user_agent="Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)",
            country="DE",
        )
        for i in range(50)
    ]
    rows = [(encode(e), 0, i, now) for i, e in enumerate(events)] + [(b"{not json", 0, 50, now)]
    kafka = spark.createDataFrame(rows, "value binary, partition int, offset long, timestamp timestamp")
    parsed = parse_kafka_records(kafka)
    valid = parsed.where(F.col(INVALID_COLUMN).isNull())
    for single in (False, True):
        compute(valid, all_views(), 12, single_partition=single).collect()
    dated = valid.withColumn("event_date", F.date_format("ts", "yyyy-MM-dd"))
    dated.write.mode("overwrite").partitionBy("event_date").parquet(str(scratch / "parquet"))
    spark.read.parquet(str(scratch / "parquet")).dropDuplicates(["event_id"]).count()

    stream = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 100)
        .load()
        .withWatermark("timestamp", "10 seconds")
        .dropDuplicatesWithinWatermark(["value"])
    )

    def materialise(df: DataFrame, _: int) -> None:
        df.localCheckpoint(eager=True).count()

    query = (
        stream.writeStream.foreachBatch(materialise)
        .option("checkpointLocation", str(scratch / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )
    deadline = time.monotonic() + 60
    while len(query.recentProgress) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    while query.status.get("isTriggerActive"):  # stopping inside a trigger trips SPARK-39218
        time.sleep(0.05)
    query.stop()


def build(settings: Settings) -> Path:
    """Write the archive: run :func:`exercise` in a JVM that dumps its classes when it exits."""
    from pyspark import SparkContext

    from config.spark import spark_session

    target = archive_path(settings)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    dumping = settings.model_copy(
        update={
            "spark_class_archive": False,
            "spark_conf": {
                **settings.spark_conf,
                "spark.driver.extraJavaOptions": f"{_dump_options(partial)} {settings.spark_java_options}",
            },
        }
    )
    with tempfile.TemporaryDirectory(prefix="lambda-cds-") as scratch:
        spark = spark_session(dumping, "lambda-class-archive")
        exercise(spark, Path(scratch))
        spark.stop()
        # The JVM writes the archive as it exits, which it does when its stdin closes.
        proc = getattr(SparkContext._gateway, "proc", None)
        if proc is not None:
            proc.stdin.close()
            proc.wait(timeout=300)
    if not partial.is_file() or proc is None or proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the JVM wrote no class-data archive to {partial}")
    partial.replace(target)
    return target


def _dump_options(path: Path) -> str:
    # -Xlog:cds=off: the dump lists every class it cannot archive (signed jars, old bytecode).
    from config.spark import JAVA_OPTIONS

    return f"{JAVA_OPTIONS} -XX:ArchiveClassesAtExit={path} -Xlog:cds=off -Xlog:cds+dynamic=off"


def main() -> int:
    settings = get_settings()
    started = time.monotonic()
    path = build(settings)
    size_mb = path.stat().st_size / 1e6
    print(f"{path.name}: {size_mb:.0f} MB in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
