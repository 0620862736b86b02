"""Ingest throughput: events/s into Kafka from one Python process, acks=all, idempotence on.

Two figures over 1M generated records (default fractions of duplicates and malformed records):
- ``pipeline``: the ingest path alone (validate against the contract, encode, produce, and wait
  for every acknowledgement), records generated in memory beforehand;
- ``end_to_end``: the generator feeding the same path, as `make generate` runs.
Target: 150,000 events/s for the pipeline on a 2-core machine (Kafka broker on the same machine).
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

from rich.console import Console

from bench.common import running_stack, write_result
from config.settings import Settings, get_settings
from contract.codec import bounds_from
from ingest.generator import GeneratorConfig, TrafficGenerator
from ingest.pipeline import ingest
from ingest.producer import EventProducer, producer_config
from ingest.topics import delete_topics, ensure_topics

TARGET_EVENTS_PER_S = 150_000


def _bench_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"events_topic": "bench.events", "dlq_topic": "bench.events.dlq"})


def _timed_ingest(settings: Settings, records: Any, label: str) -> dict[str, Any]:
    producer = EventProducer(settings)
    start = time.perf_counter()
    stats = ingest(records, producer, source=label, bounds=bounds_from(settings))
    seconds = time.perf_counter() - start
    records_n = stats.sent + stats.rejected
    return {
        "records": records_n,
        "events_produced": stats.sent,
        "rejected_to_dlq": stats.rejected,
        "delivery_failures": stats.failed,
        "seconds": round(seconds, 3),
        "records_per_s": round(records_n / seconds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3, help="repetitions; the median is reported")
    args = parser.parse_args(argv)
    console = Console()
    settings = _bench_settings(get_settings())
    with running_stack(settings):
        delete_topics(settings, [settings.events_topic, settings.dlq_topic])
        ensure_topics(settings)
        try:
            pipeline_runs, e2e_runs = [], []
            for run in range(args.runs):
                records = list(TrafficGenerator(GeneratorConfig(total=args.events, seed=run)))
                gc.collect()
                gc.freeze()  # the pre-built records are not garbage; keep them out of the collector
                pipeline_runs.append(_timed_ingest(settings, records, "bench-pipeline"))
                del records
                gc.unfreeze()
                gc.collect()
                console.print(f"run {run + 1}: pipeline {pipeline_runs[-1]['records_per_s']:,} records/s")
                generator = TrafficGenerator(GeneratorConfig(total=args.events, seed=1000 + run))
                e2e_runs.append(_timed_ingest(settings, generator, "bench-e2e"))
                console.print(f"run {run + 1}: end-to-end {e2e_runs[-1]['records_per_s']:,} records/s")
        finally:
            delete_topics(settings, [settings.events_topic, settings.dlq_topic])

    def median(runs: list[dict[str, Any]]) -> dict[str, Any]:
        return sorted(runs, key=lambda r: r["records_per_s"])[len(runs) // 2]

    pipeline, e2e = median(pipeline_runs), median(e2e_runs)
    config = producer_config(settings)
    result = {
        "target_records_per_s": TARGET_EVENTS_PER_S,
        "met_target": pipeline["records_per_s"] >= TARGET_EVENTS_PER_S,
        "pipeline": pipeline,
        "end_to_end": e2e,
        "runs": {"pipeline": pipeline_runs, "end_to_end": e2e_runs},
        "producer": {k: v for k, v in config.items() if k != "bootstrap.servers"},
    }
    path = write_result("ingest", result)
    console.print(
        f"[bold]ingest[/]: pipeline {pipeline['records_per_s']:,} records/s, "
        f"end-to-end {e2e['records_per_s']:,} records/s "
        f"(target {TARGET_EVENTS_PER_S:,}; {'met' if result['met_target'] else 'NOT met'}) -> {path}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
