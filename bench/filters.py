"""Combined-filter benchmark: latency and CPU of ``POST /v2/query`` on the filter table of the
10M-event, 29-day load of bench/batch.py, with one uvicorn worker.

Data: the cached load (loaded if missing) and its served generation; the batch views and the filter
table are recomputed first when the served generation lacks the table or holds another version
of it (the recompute's time is printed). Beside the batch files, the realtime part holds rows as
the speed layer writes them (:func:`_seed_realtime`): :data:`REALTIME_EVENTS` events of today over
one hour, so each answer scans both parts.

Queries, each asked :data:`WARMUP` times unmeasured and then ``--requests`` times one after the
other (a closed loop of one: the latency of one query on an otherwise idle worker):

- *narrow*: page views and visitors of the site's most viewed page from its most frequent country
  on desktop, over the 7 days before the load's last day: three ``is`` filters. Target p95 <= 150 ms.
- *breakdown*: visitors and page views per referrer of the visitors from that country on mobile,
  over the 30 days of the load: a filtered breakdown with visitors. Target p95 <= 600 ms.

The API's own CPU time over the measured requests (psutil) gives the CPU per query.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psutil
from rich.console import Console
from rich.table import Table

from bench.api import _cpu_seconds, _served
from bench.batch import bench_settings, ensure_loaded
from bench.common import percentiles, running_stack, start_api, write_result
from config.settings import Settings, get_settings
from generations.model import Generation
from ingest.topics import ensure_topics
from views import filter_table

WARMUP = 3
REALTIME_EVENTS = 72_000
"""Realtime rows seeded for today: an hour at 20 events/s (the realtime part every answer scans)."""
TARGETS_MS = {"narrow": 150.0, "breakdown": 600.0}
"""The p95 each query must stay under."""


def _ensure_table(settings: Settings, console: Console, events: int) -> tuple[Generation, float | None]:
    """The served generation with the current filter table, recomputed (and timed) when needed."""
    from batch_layer.job import BatchJob

    job = BatchJob(settings)
    try:
        ensure_loaded(settings, job, console, events)
        wanted = filter_table.fingerprint()
        served = _served(settings)
        seconds = None
        if served is None or served.fingerprints.get(filter_table.NAME) != wanted:
            console.print("recomputing the batch views and the filter table of the load...")
            t0 = time.monotonic()
            job.run(full=True)
            seconds = time.monotonic() - t0
            console.print(f"full recompute with the filter table: {seconds:.1f} s")
        served = _served(settings)
        assert served is not None and served.fingerprints.get(filter_table.NAME) == wanted
        return served, seconds
    finally:
        job.close()


def _seed_realtime(settings: Settings, gen: int, site: str, values: dict[str, list[str]]) -> int:
    """Realtime rows of the filter table for today, written as the speed layer writes them (one
    blob per micro-batch of 2,000 events); returns the Redis bytes they take."""
    import pyarrow as pa
    import redis

    from stores.redis.filter_rows import GEN, FilterRowsSink

    rng = random.Random(7)
    today = datetime.now(UTC).date()
    hour = datetime.now(UTC).hour
    r = redis.Redis.from_url(settings.redis_url)
    try:
        for _ in range(0, REALTIME_EVENTS, 2_000):
            columns: dict[str, list[Any]] = {name: [] for name in filter_table.COLUMNS}
            for _row in range(2_000):
                columns[filter_table.SITE].append(site)
                columns[filter_table.DAY].append(today)
                columns[filter_table.HOUR].append(hour)
                for name in filter_table.DIMENSIONS:
                    columns[name].append(rng.choice(values[name]))
                columns[filter_table.VISITOR].append(rng.randrange(-(2**63), 2**63))
                columns[filter_table.PAGEVIEWS].append(1)
            table = pa.table(columns, schema=filter_table.arrow_schema())
            sink = FilterRowsSink()
            sink.add_table(table.add_column(0, GEN, pa.array([gen] * table.num_rows, pa.int32())))
            sink.prepare()
            with r.pipeline(transaction=True) as pipe:
                sink.flush(pipe)
                pipe.execute()
        return sum(int(r.memory_usage(k) or 0) for k in r.scan_iter(f"lambda:rt:{gen}:filters:*"))
    finally:
        r.close()


def _measure(
    client: httpx.Client, api: psutil.Process, body: dict[str, Any], requests: int
) -> dict[str, Any]:
    for _ in range(WARMUP):
        answer = client.post("/v2/query", json=body)
        answer.raise_for_status()
    cpu0 = _cpu_seconds(api)
    latencies = []
    for _ in range(requests):
        t0 = time.perf_counter()
        answer = client.post("/v2/query", json=body)
        latencies.append((time.perf_counter() - t0) * 1000)
        answer.raise_for_status()
    cpu = _cpu_seconds(api) - cpu0
    ordered = sorted(latencies)
    found = answer.json()
    return {
        **percentiles(latencies),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
        "cpu_ms_per_query": round(cpu * 1000 / requests, 2),
        "path": found.get("path"),
        "rows": len(found.get("results", [])),
        "first": found.get("results", [])[:1],
    }


def _top(client: httpx.Client, site: str, dimension: str, date_range: list[str]) -> str:
    body = {
        "site_id": site,
        "date_range": date_range,
        "metrics": ["pageviews"],
        "dimensions": [dimension],
        # two conditions: the filter table's path (a value that is not a URL for the page)
        "filters": [
            ["is_not", dimension, ["(none)"]] if dimension != "page" else ["contains", "page", ["/"]],
            ["is_not", "country", ["--"]],
        ],
        "order_by": [["pageviews", "desc"]],
        "pagination": {"limit": 1},
    }
    answer = client.post("/v2/query", json=body)
    if answer.status_code != 200:
        raise SystemExit(f"POST /v2/query {body}: {answer.status_code} {answer.text}")
    results = answer.json()["results"]
    return str(results[0]["dimensions"][0]) if results else "(none)"  # (a dimension with no value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--requests", type=int, default=60, help="measured requests per query")
    parser.add_argument("--port", type=int, default=None, help="API port (default: settings + 110)")
    args = parser.parse_args(argv)
    console = Console()
    settings = bench_settings(get_settings())
    port = args.port or settings.api_port + 110

    with running_stack(settings):
        ensure_topics(settings)
        gen, recompute_s = _ensure_table(settings, console, args.events)
        days = sorted(gen.day_map[filter_table.NAME])
        last = datetime.fromisoformat(days[-1]).date()
        week = [(last - timedelta(days=6)).isoformat(), last.isoformat()]
        month = [days[0], datetime.now(UTC).date().isoformat()]
        api = start_api(settings, port, workers=1)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                site = _top_site(client, week)
                page = _top(client, site, "page", week)
                country = _top(client, site, "country", week)
                values = {name: [_top(client, site, name, week)] for name in filter_table.DIMENSIONS}
                realtime_bytes = _seed_realtime(settings, gen.gen, site, values)
                bodies: dict[str, dict[str, Any]] = {
                    "narrow": {
                        "site_id": site,
                        "date_range": week,
                        "metrics": ["pageviews", "visitors"],
                        "filters": [
                            ["is", "page", [page]],
                            ["is", "country", [country]],
                            ["is", "device", ["desktop"]],
                        ],
                    },
                    "breakdown": {
                        "site_id": site,
                        "date_range": month,
                        "metrics": ["visitors", "pageviews"],
                        "dimensions": ["referrer"],
                        "filters": [["is", "country", [country]], ["is", "device", ["mobile"]]],
                        "order_by": [["visitors", "desc"]],
                        "pagination": {"limit": 100},
                    },
                }
                process = psutil.Process(api.pid)
                measured = {
                    name: _measure(client, process, body, args.requests) for name, body in bodies.items()
                }
        finally:
            _stop(api)
    for name, figures in measured.items():
        figures["target_p95_ms"] = TARGETS_MS[name]
        figures["met"] = figures["p95_ms"] <= TARGETS_MS[name]
    _print(console, measured, realtime_bytes, recompute_s)
    write_result(
        "filters",
        {
            "events": args.events,
            "generation": gen.gen,
            "queries": {name: {"body": bodies[name], **measured[name]} for name in bodies},
            "realtime_rows": REALTIME_EVENTS,
            "realtime_bytes": realtime_bytes,
            "recompute_s": recompute_s,
        },
    )
    return 0


def _top_site(client: httpx.Client, week: list[str]) -> str:
    """The site with the most page views in the week."""
    params: dict[str, str | int] = {
        "dimension": "site",
        "from": f"{week[0]}T00:00:00Z",
        "to": f"{week[1]}T00:00:00Z",
        "limit": 1,
    }
    answer = client.get("/v1/breakdown", params=params)
    answer.raise_for_status()
    return str(answer.json()["entries"][0]["value"])


def _stop(api: subprocess.Popen[bytes]) -> None:
    api.terminate()
    api.wait(30)


def _print(
    console: Console, measured: dict[str, Any], realtime_bytes: int, recompute_s: float | None
) -> None:
    table = Table(title="POST /v2/query on the filter table, one worker")
    for column in ("query", "path", "p50 ms", "p95 ms", "p99 ms", "CPU ms/query", "target p95", "met"):
        table.add_column(column)
    for name, f in measured.items():
        table.add_row(
            name,
            str(f["path"]),
            f"{f['p50_ms']:.1f}",
            f"{f['p95_ms']:.1f}",
            f"{f['p99_ms']:.1f}",
            f"{f['cpu_ms_per_query']:.1f}",
            f"{f['target_p95_ms']:.0f}",
            "yes" if f["met"] else "NO",
        )
    console.print(table)
    console.print(
        f"realtime rows: {REALTIME_EVENTS:,} seeded, {realtime_bytes / 1e6:.1f} MB in Redis "
        f"({realtime_bytes / REALTIME_EVENTS:.0f} B per row)"
    )
    if recompute_s is not None:
        console.print(f"full recompute with the filter table: {recompute_s:.1f} s")


if __name__ == "__main__":
    raise SystemExit(main())
