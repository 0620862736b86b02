"""How long the speed layer takes to rebuild its dedup state from the log (after a crash, a replay).

``python -m bench.dedup_rebuild --topic T`` times :meth:`speed_layer.dedup.ScanDedup.rebuild` at
the log end of a topic that already holds events (``make bench-speed`` leaves its backlog in
``bench.speed.sustained``): the window before the end, read back from Kafka through the contract and
fed to the states, in a session of its own. It prints the records read and the seconds; a window
holds the events of ``LAMBDA_SPEED_DEDUP_WINDOW_S`` (600 s) and a grace (60 s), so at 20,000
events/s a rebuild reads 13.2M records (``docs/speed-floor.md`` quotes the runs).
"""

from __future__ import annotations

import argparse
import json
import time

from rich.console import Console

from bench.common import running_stack
from config.settings import Settings, get_settings
from ingest.topics import log_end_offsets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topic", default="bench.speed.sustained")
    parser.add_argument("--runs", type=int, default=2, help="rebuilds timed one after the other")
    args = parser.parse_args()

    console = Console()
    settings = get_settings().model_copy(update={"events_topic": args.topic})
    with running_stack(settings):
        measure(console, settings, args.runs)


def measure(console: Console, settings: Settings, repeat: int) -> None:
    from config.spark import spark_session
    from contract.log_window import window_before
    from speed_layer.dedup import ScanDedup

    spark = spark_session(settings, "bench-dedup-rebuild")
    dedup = ScanDedup(spark, settings)
    ends = log_end_offsets(settings)
    # The rebuild is for a micro-batch that starts one record before the log end.
    starts = {p: max(0, end - 1) for p, end in ends.items()}
    window = window_before(settings, starts, dedup.window_ms)
    records = sum(starts[p] - window.begins[p] for p in starts)
    runs = []
    for _ in range(repeat):
        dedup.forget()
        marker = spark.sparkContext._jvm.lambda_platform.dedup.DuplicateMarker(  # type: ignore[union-attr]
            dedup.namespace, dedup.window_ms, 0, ""
        )
        t0 = time.monotonic()
        dedup.rebuild(marker, starts, ends)
        runs.append(round(time.monotonic() - t0, 2))
        console.print(f"  rebuilt from {records:,} records in {runs[-1]:.1f} s")
    entries, table_bytes = dedup.held()
    console.print_json(
        json.dumps(
            {
                "topic": settings.events_topic,
                "records_read": records,
                "seconds": runs,
                "records_per_s": round(records / min(runs)),
                "fingerprints_held": entries,
                "table_bytes": table_bytes,
            }
        )
    )


if __name__ == "__main__":
    main()
