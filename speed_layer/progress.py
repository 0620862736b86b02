"""What the speed layer says about its micro-batches: the report of one batch, the lag read from
Spark's progress, the live line of `make speed`, and the stats record in Redis.

The stats record (``keys.SPEED_STATS``) is written by the commit, in the same transaction as the
batch it describes, so its dead-letter totals count a replayed batch once; ``python -m speed_layer
status`` and ``/v1/status`` read it. Its shape is defined here, next to the line that shows it.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


@dataclass
class BatchReport:
    batch_id: int
    rows: int = 0
    invalid: int = 0
    duplicates: int = 0
    """Accepted records dropped by the dedup rule (contract.duplicates)."""
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    """Records dead-lettered in this batch, per field of their reason."""
    keys_written: int = 0
    generations: list[int] = field(default_factory=list)
    seconds: float = 0.0
    skipped: bool = False
    started: float = field(default_factory=time.monotonic)
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds per step: views (the micro-batch's one Spark job: Kafka, parse, dedup, views),
    dead letters (Kafka), commit (Redis)."""


def stats_record(
    report: BatchReport, previous: dict[str, Any], lag: dict[int, int], generations: list[int]
) -> str:
    """The stats record of the batch being committed (JSON): its own figures, and the dead-letter
    totals carried on from ``previous``, the record of the batch committed before it."""
    reasons_total = dict(previous.get("invalid_reasons_total") or {})
    for name, n in report.invalid_reasons.items():
        reasons_total[name] = int(reasons_total.get(name, 0)) + n
    return json.dumps(
        {
            "batch_id": report.batch_id,
            "at": datetime.now(UTC).isoformat(),
            "rows": report.rows,
            "seconds": round(time.monotonic() - report.started, 3),
            "lag": {str(p): n for p, n in lag.items()},
            "invalid_total": int(previous.get("invalid_total", 0)) + report.invalid,
            "invalid_reasons": report.invalid_reasons,
            "invalid_reasons_total": reasons_total,
            "generations": generations,
        }
    )


def stats_line(stats: dict[str, Any]) -> str:
    """A stats record in one line (`python -m speed_layer status`)."""
    return (
        f"last batch at {stats['at']}: {stats['rows']:,} rows in {stats['seconds']} s, "
        f"lag {stats['lag']}, "
        f"generations {stats.get('generations')}, invalid records so far {stats['invalid_total']:,}"
    )


def lag_of(progress: dict[str, Any]) -> dict[int, int]:
    """Records behind the log end per partition, from a query progress report."""
    lag: dict[int, int] = {}
    for source in progress.get("sources", []):
        latest, end = source.get("latestOffset"), source.get("endOffset")
        if not latest or not end:
            continue
        latest_d, end_d = _offsets_json(latest), _offsets_json(end)
        for topic, parts in latest_d.items():
            for p, o in parts.items():
                lag[int(p)] = int(o) - int(end_d.get(topic, {}).get(p, 0))
    return lag


def _offsets_json(value: Any) -> dict[str, dict[str, int]]:
    """Offsets in a progress report: a JSON string, a dict, or empty before the first batch."""
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) and value else {}
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def print_progress(report: BatchReport, lag: dict[int, int]) -> None:
    """The live line of `make speed`."""
    rate = report.rows / report.seconds if report.seconds else 0.0
    line = (
        f"batch {report.batch_id}: {report.rows:,} rows in {report.seconds:.2f} s ({rate:,.0f} rows/s), "
        f"lag {sum(lag.values()):,} records"
    )
    if sys.stdout.isatty():
        print(f"\r{line:<100}", end="", flush=True)
    else:
        print(line, flush=True)
