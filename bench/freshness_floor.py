"""The speed layer's freshness floor: the least pipeline that makes an event visible to the API.

A Structured Streaming query with back-to-back triggers reads the topic from its end, parses each
record with the contract's schema (``from_json``, no other check), collects each micro-batch's
(site, day, hour) keys to the driver (no shuffle, no state), counts them there and writes the
counts with one pipelined Redis round trip into the realtime keys the API reads (generation 0's
``site`` view). No dedup, no contract verdicts, no generations, no commit protocol, no other view:
whatever the speed layer's freshness costs beyond this is the price of its guarantees and its
views. ``bench/speed.py`` runs it in its own process right after the speed layer's freshness run,
with the same traffic and the same probes, and reads the answers through the same API.

    python -m bench.freshness_floor --topic T --checkpoint DIR --progress FILE
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import redis

from config.settings import get_settings
from config.spark import spark_session
from contract.spark_schema import event_schema
from stores.redis import keys
from views import Dimension, get_view

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SITE_VIEW = "site"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--progress", type=Path, required=True, help="one JSON line per micro-batch")
    args = parser.parse_args(argv)
    settings = get_settings()
    spark = spark_session(settings, "freshness-floor")
    from pyspark.sql import functions as F

    site = get_view(SITE_VIEW)
    assert isinstance(site, Dimension)
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "latest")
        .load()
    )
    events = records.select(F.from_json(F.col("value").cast("string"), event_schema()).alias("e")).select(
        "e.*"
    )
    keyed = events.select(
        site.stored_key().alias("key"),
        F.date_format("ts", "yyyy-MM-dd").alias("day"),
        F.hour("ts").alias("hour"),
    )
    r = redis.Redis.from_url(settings.redis_url)

    def each(batch: DataFrame, batch_id: int) -> None:
        counts = Counter((row["key"], row["day"], row["hour"]) for row in batch.collect())
        with r.pipeline(transaction=False) as pipe:
            for (key, day, hour), n in counts.items():
                target = keys.realtime_key(0, SITE_VIEW, key, day)
                pipe.hincrby(target, keys.PV, n)
                pipe.hincrby(target, keys.hour_field(keys.PV, hour), n)
            pipe.execute()
        line = {"batch_id": batch_id, "events": sum(counts.values()), "at": time.time()}
        with args.progress.open("a") as f:
            f.write(json.dumps(line) + "\n")

    query = (
        keyed.writeStream.foreachBatch(each)
        .option("checkpointLocation", str(args.checkpoint))
        .trigger(processingTime="0 seconds")
        .start()
    )
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
