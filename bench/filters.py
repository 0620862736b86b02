"""Combined-filter benchmark: latency and CPU of ``POST /v2/query`` on the filter table of the
10M-event, 29-day load of bench/batch.py, with one uvicorn worker.

Data: the cached load (loaded if missing) and its served generation; the batch views and the filter
table are recomputed first when the served generation lacks the table or holds another version
of it (the recompute's time is printed). Beside the batch files, the realtime part holds rows as
the speed layer writes them (:func:`_seed_realtime`): :data:`REALTIME_EVENTS` events of today over
one hour, which an answer whose range includes today scans beside the files (the breakdown's; the
narrow query's week ends on the load's last day, the day before today, so its realtime part is
empty, for the API and its floor alike).

Queries, each asked :data:`WARMUP` times unmeasured and then ``--requests`` times one after the
other (a closed loop of one: the latency of one query on an otherwise idle worker):

- *narrow*: page views and visitors of the site's most viewed page from its most frequent country
  on desktop, over the 7 days before the load's last day: three ``is`` filters. Target p95 <= 150 ms.
- *breakdown*: visitors and page views per referrer of the visitors from that country on mobile,
  over the 30 days of the load: a filtered breakdown with visitors. Target p95 <= 600 ms.

The API's own CPU time over the measured requests (psutil) gives the CPU per query.

The floor, in the same run (:class:`Floor`): the least work that gives the same answer on the same
data, DuckDB alone in this process (no HTTP, no API, no snapshot or Redis read, one connection for
every query) running hand-written SQL over the same batch Parquet files (the served generation's
day map entry ``filters`` for the query's days) and the same realtime rows, kept as the Arrow table
the seeding built, with the API's DuckDB threads and memory limit per scan. Its answer must equal
the API's (every result row and the total) before anything is timed; it is then timed as the API
is (the same warm-up, requests and percentiles), its CPU is this process's CPU time over its
loop, and each query records the API's p50 and p95 over the floor's.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

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
from stores.mongo.codec import stored_layout
from stores.parquet.filter_table import batch_files
from views import filter_table

if TYPE_CHECKING:
    import pyarrow as pa

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
        wanted = filter_table.fingerprint(stored_layout())
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


def _seed_realtime(
    settings: Settings, gen: int, site: str, values: dict[str, list[str]]
) -> tuple[int, int, pa.Table]:
    """Realtime rows of the filter table for today, written as the speed layer writes them (one
    blob per micro-batch of 2,000 events), after deleting the lists an earlier run left for the
    generation (the realtime part is then exactly these rows, however often the bench ran today);
    returns the rows deleted, the Redis bytes of the new rows, and the new rows (the floor's
    realtime part)."""
    import pyarrow as pa
    import redis

    from stores.redis import keys
    from stores.redis.filter_rows import GEN, FilterRowsSink, decode_blobs

    rng = random.Random(7)
    today = datetime.now(UTC).date()
    hour = datetime.now(UTC).hour
    pattern = f"{keys.generation_prefix(gen)}{keys.FILTERS_SUFFIX}*"
    seeded = []
    r = redis.Redis.from_url(settings.redis_url)
    try:
        earlier = list(r.scan_iter(pattern))
        deleted = sum(decode_blobs(cast(list[bytes], r.lrange(k, 0, -1))).num_rows for k in earlier)
        if earlier:
            r.delete(*earlier)
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
                for name in (*filter_table.VISIT_PAGES, *filter_table.VISIT_COLUMNS):
                    columns[name].append(None)  # page-view rows: what these queries read
            table = pa.table(columns, schema=filter_table.arrow_schema())
            seeded.append(table)
            sink = FilterRowsSink()
            sink.add_table(table.add_column(0, GEN, pa.array([gen] * table.num_rows, pa.int32())))
            sink.prepare()
            with r.pipeline(transaction=True) as pipe:
                sink.flush(pipe)
                pipe.execute()
        used = sum(int(r.memory_usage(k) or 0) for k in r.scan_iter(pattern))
        return deleted, used, pa.concat_tables(seeded)
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
    found = answer.json()
    return {
        **_latency(latencies, cpu, requests),
        "path": found.get("path"),
        "rows": len(found.get("results", [])),
        "first": found.get("results", [])[:1],
    }


def _latency(latencies: list[float], cpu_s: float, requests: int) -> dict[str, Any]:
    """Count, p50, p95 and p99 of the latencies (ms), and the CPU per query."""
    ordered = sorted(latencies)
    return {
        **percentiles(latencies),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
        "cpu_ms_per_query": round(cpu_s * 1000 / requests, 2),
    }


FLOOR_SQL = {
    "narrow": """
        SELECT CAST(sum(pageviews) AS BIGINT), count(DISTINCT visitor)
        FROM (
            SELECT visitor, pageviews FROM read_parquet($files, hive_partitioning = false)
            WHERE site = $site AND page = $page AND country = $country AND device = $device
            UNION ALL
            SELECT visitor, pageviews FROM realtime
            WHERE site = $site AND day BETWEEN $first AND $last
              AND page = $page AND country = $country AND device = $device
        )
    """,
    "breakdown": """
        SELECT referrer, count(DISTINCT visitor) AS visitors, CAST(sum(pageviews) AS BIGINT),
               count(*) OVER ()
        FROM (
            SELECT referrer, visitor, pageviews FROM read_parquet($files, hive_partitioning = false)
            WHERE site = $site AND country = $country AND device = $device AND visits IS NULL
            UNION ALL
            SELECT referrer, visitor, pageviews FROM realtime
            WHERE site = $site AND day BETWEEN $first AND $last AND country = $country AND device = $device
              AND visits IS NULL
        )
        GROUP BY referrer
        ORDER BY visitors DESC, referrer ASC
        LIMIT 100
    """,
}
"""The floor's SQL of each query, by hand: the batch files are those of the query's days (a
file's rows are all of its day: no day column is read from them), the realtime rows are cut to the
days; then the filters (page-view rows only: the narrow query's page excludes the visit rows, whose
page is null; the breakdown says so), the figures, and for the breakdown the API's order
(visitors, then the referrer) and limit, and the total it reports."""


class Floor:
    """DuckDB alone over the same files and realtime rows as the API: one connection, the API's
    threads and memory limit per scan, the realtime rows registered once."""

    def __init__(self, settings: Settings, realtime: pa.Table) -> None:
        import duckdb

        self.threads = settings.api_filter_threads
        self.con = duckdb.connect(
            ":memory:",
            config={"threads": self.threads, "memory_limit": f"{settings.api_filter_memory_mb}MB"},
        )
        self.con.register("realtime", realtime)

    def params(self, gen: Generation, root_uri: str, body: dict[str, Any]) -> dict[str, Any]:
        """The SQL parameters of ``body`` (one of the bench's two bodies): its files, site, days
        and filter values."""
        first, last = (datetime.fromisoformat(d).date() for d in body["date_range"])
        holders = gen.day_map[filter_table.NAME]
        days = [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]
        files = batch_files(root_uri, {d: holders[d] for d in days if d in holders})
        assert files, f"no batch file for {body['date_range']}"
        values = {dimension: vals[0] for op, dimension, vals in body["filters"] if op == "is"}
        return {"files": files, "site": body["site_id"], "first": first, "last": last, **values}

    def answer(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        """The answer as the API writes it: ``results`` and ``total_rows``."""
        rows = self.con.execute(FLOOR_SQL[name], params).fetchall()
        if name == "narrow":
            pageviews, visitors = rows[0]
            return {
                "results": [{"metrics": [int(pageviews or 0), int(visitors)], "dimensions": []}],
                "total_rows": 1,
            }
        return {
            "results": [{"metrics": [int(v), int(p)], "dimensions": [str(ref)]} for ref, v, p, _ in rows],
            "total_rows": int(rows[0][3]) if rows else 0,
        }

    def realtime_rows(self, params: dict[str, Any]) -> int:
        """The realtime rows of the site on the query's days (what the API reads of Redis)."""
        sql = "SELECT count(*) FROM realtime WHERE site = $site AND day BETWEEN $first AND $last"
        found = self.con.execute(sql, {k: params[k] for k in ("site", "first", "last")}).fetchone()
        return int(found[0]) if found else 0

    def measure(self, name: str, params: dict[str, Any], requests: int) -> dict[str, Any]:
        for _ in range(WARMUP):
            self.answer(name, params)
        cpu0 = time.process_time()
        latencies = []
        for _ in range(requests):
            t0 = time.perf_counter()
            self.answer(name, params)
            latencies.append((time.perf_counter() - t0) * 1000)
        return _latency(latencies, time.process_time() - cpu0, requests)

    def close(self) -> None:
        self.con.close()


def _api_answer(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    answer = client.post("/v2/query", json=body)
    answer.raise_for_status()
    found = answer.json()
    return {"results": found["results"], "total_rows": found["meta"]["total_rows"]}


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

    load_before = os.getloadavg()
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
                deleted, realtime_bytes, realtime = _seed_realtime(settings, gen.gen, site, values)
                if deleted:
                    console.print(f"deleted {deleted:,} realtime rows an earlier run had seeded")
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
                floor = Floor(settings, realtime)
                try:
                    params = {
                        name: floor.params(gen, settings.filter_table_uri, b) for name, b in bodies.items()
                    }
                    for name, body in bodies.items():  # the same answer, before anything is timed
                        wanted, got = _api_answer(client, body), floor.answer(name, params[name])
                        if got != wanted:
                            raise SystemExit(f"the floor's {name} answer {got} is not the API's {wanted}")
                    realtime_rows = {name: floor.realtime_rows(params[name]) for name in bodies}
                    process = psutil.Process(api.pid)
                    measured = {}
                    for name, body in bodies.items():
                        measured[name] = _measure(client, process, body, args.requests)
                        measured[name]["floor"] = floor.measure(name, params[name], args.requests)
                finally:
                    floor.close()
        finally:
            _stop(api)
    load_after = os.getloadavg()
    for name, figures in measured.items():
        figures["target_p95_ms"] = TARGETS_MS[name]
        figures["met"] = figures["p95_ms"] <= TARGETS_MS[name]
        for p in ("p50", "p95"):
            figures[f"{p}_ratio_to_floor"] = round(figures[f"{p}_ms"] / figures["floor"][f"{p}_ms"], 2)
        figures["floor"]["batch_files"] = len(params[name]["files"])
        figures["floor"]["realtime_rows"] = realtime_rows[name]
    _print(console, measured, realtime_bytes, recompute_s, floor.threads)
    before, after = (" ".join(f"{x:.2f}" for x in load) for load in (load_before, load_after))
    console.print(f"load average (1, 5, 15 min): {before} before, {after} after")
    write_result(
        "filters",
        {
            "events": args.events,
            "generation": gen.gen,
            "queries": {name: {"body": bodies[name], **measured[name]} for name in bodies},
            "floor": {
                "what": "DuckDB alone in the bench process: hand-written SQL over the same batch Parquet "
                "files and the same realtime rows (an Arrow table), one connection, no HTTP, API or "
                "Redis read; its answers equal the API's",
                "threads": floor.threads,
                "sql": {name: " ".join(sql.split()) for name, sql in FLOOR_SQL.items()},
            },
            "realtime_rows": REALTIME_EVENTS,
            "realtime_bytes": realtime_bytes,
            "recompute_s": recompute_s,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in load_after],
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
    console: Console, measured: dict[str, Any], realtime_bytes: int, recompute_s: float | None, threads: int
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
    floor = Table(
        title=f"its floor: DuckDB alone on the same files and rows, {threads} thread(s), same answers"
    )
    for column in (
        "query",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "CPU ms/query",
        "API / floor p50",
        "API / floor p95",
    ):
        floor.add_column(column)
    for name, f in measured.items():
        fl = f["floor"]
        floor.add_row(
            name,
            f"{fl['p50_ms']:.1f}",
            f"{fl['p95_ms']:.1f}",
            f"{fl['p99_ms']:.1f}",
            f"{fl['cpu_ms_per_query']:.1f}",
            f"{f['p50_ratio_to_floor']:.2f}x",
            f"{f['p95_ratio_to_floor']:.2f}x",
        )
    console.print(floor)
    console.print(
        f"realtime rows: {REALTIME_EVENTS:,} seeded, {realtime_bytes / 1e6:.1f} MB in Redis "
        f"({realtime_bytes / REALTIME_EVENTS:.0f} B per row)"
    )
    if recompute_s is not None:
        console.print(f"full recompute with the filter table: {recompute_s:.1f} s")


if __name__ == "__main__":
    raise SystemExit(main())
