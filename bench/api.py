"""API benchmark: requests/s, latency and CPU per request of three queries, each against
``GET /healthz`` of the same API, with one and then two uvicorn workers.

Data: the 10M-event, 30-day load of bench/batch.py (cached in the `bench_batch` database; loaded
here if missing), plus realtime views for the queried keys on the last two days, so every answer
merges batch and realtime values. The API runs as `python -m api --workers N` (uvloop, httptools);
the load comes from vegeta (bench/vegeta.py, built by `make setup`) on the same machine, as a
closed loop: C keep-alive connections sending requests back to back, a warm-up run of W seconds
and then a measured run of D seconds per URL. The API's own CPU time over the measured run
(psutil, its workers included) gives its CPU per request, which depends far less than the request
rate on what else shares the two cores.

Queries: a 7-day hourly pageviews series of one URL, 7-day unique visitors of one URL per day (HLL
unions), a 30-day daily pageviews series of a whole site. Each is asked once cold first (batch
documents not yet in the API's cache; on FerretDB each read scans its collection) and then under
load. Targets: each query at least half the rate of ``/healthz`` on the same API (what the
query's own work leaves of the HTTP stack's ceiling), p99 <= 10 ms. ``--baseline`` measures
another checkout's API the same way right after, against the same data.

Then, with the worker warm, the first query of keys it has not read yet (:func:`_uncached_keys`):
the 7-day hourly pageviews of :data:`UNCACHED_KEYS` other URLs, the 30-day daily pageviews of the
other sites, each asked once, and the 7-day hourly unique visitors of the loaded site, whose hour
sketches (stored apart from its day documents) no query has read yet: what a user's first look at
a key costs. Target: <= 50 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import psutil
import redis
from datasketches import hll_sketch, tgt_hll_type
from pymongo import MongoClient
from redis.typing import EncodableT, FieldT
from rich.console import Console
from rich.table import Table

from bench.batch import bench_settings, ensure_loaded
from bench.commits import BackgroundCommits
from bench.common import percentiles, running_stack, start_api, write_result
from bench.vegeta import ClosedLoop, installed
from config.settings import PROJECT_ROOT, Settings, get_settings
from generations.model import Generation
from generations.registry import GenerationRegistry
from ingest.topics import ensure_topics
from stores.mongo.codec import collection_name, is_hour_sketches, is_rank_document, rank_document_id
from stores.mongo.generations import MongoGenerationStore
from stores.redis import keys
from stores.redis.handshake import RedisHotCopy

TARGET_HEALTHZ_RATIO = 0.5
"""Each query's rate as a share of ``GET /healthz``'s on the same API: what the query's own work
leaves of the HTTP stack's ceiling on this machine."""
TARGET_P99_MS = 10.0
SITE = "shop.example.com"
UNCACHED_KEYS = 40
"""URLs whose first 7-day query :func:`_uncached_keys` times."""
TARGET_FIRST_QUERY_MS = 50.0


def _served(settings: Settings) -> Generation | None:
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_url)
    r = redis.Redis.from_url(settings.redis_url)
    try:
        return GenerationRegistry(
            MongoGenerationStore(client[settings.mongo_db]), RedisHotCopy(r), dict
        ).served()
    finally:
        client.close()
        r.close()


def _top_url(settings: Settings, gen: Generation, day: str) -> str | None:
    """The most viewed URL of ``day``, from its ranking; None if the generation has no rankings
    (written before they existed)."""
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_url)
    try:
        holder = gen.day_map["page"][day]
        doc = client[settings.mongo_db][collection_name("page", holder)].find_one(
            {"_id": rank_document_id(day)}
        )
        return str(doc["keys"][0]) if doc and doc["keys"] else None
    finally:
        client.close()


def _uncached_keys(
    settings: Settings, gen: Generation, day: str, seen: set[str], window: dict[str, str], port: int
) -> dict[str, Any]:
    """The first query of keys the worker has not read: the 7-day hourly pageviews of
    :data:`UNCACHED_KEYS` URLs of ``day`` (the first in the page view's collection, except those in
    ``seen``) and the 30-day daily pageviews of every other site, each asked once; then the 7-day
    hourly unique visitors of :data:`SITE`, the first query to read its hour sketches."""
    holder = {view: gen.day_map[view][day] for view in ("page", "site")}
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_url)
    try:
        db = client[settings.mongo_db]
        urls = [
            d["key"]
            for d in db[collection_name("page", holder["page"])].find({"day": day}, KEYS_OF_DOCUMENTS)
            if _is_key_document(d) and d["key"] not in seen
        ][:UNCACHED_KEYS]
        sites = [
            d["key"]
            for d in db[collection_name("site", holder["site"])].find({"day": day}, KEYS_OF_DOCUMENTS)
            if _is_key_document(d) and d["key"] != SITE
        ]
    finally:
        client.close()
    end = datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(days=1)
    month = {"from": (end - timedelta(days=30)).isoformat(), "to": end.isoformat()}

    def first_ms(http: httpx.Client, path: str, **params: str) -> float:
        t0 = time.perf_counter()
        http.get(f"http://127.0.0.1:{port}{path}?{urlencode(params)}").raise_for_status()
        return (time.perf_counter() - t0) * 1000

    with httpx.Client(timeout=600) as http:
        url_ms = sorted(first_ms(http, "/v1/pageviews", url=u, granularity="hour", **window) for u in urls)
        site_ms = {
            site: round(first_ms(http, "/v1/pageviews", site=site, granularity="day", **month), 1)
            for site in sites
        }
        # The one query kind that reads a site's hour sketches, stored apart from its day
        # documents (stores.mongo.codec); the load's site has its day documents cached, not those.
        hour_sketches_ms = round(
            first_ms(http, "/v1/unique-visitors", site=SITE, granularity="hour", **window), 1
        )
    return {
        "pageviews_7d_hourly_url": {**percentiles(url_ms), "max_ms": round(url_ms[-1], 2)},
        "pageviews_30d_daily_site_ms": site_ms,
        "unique_visitors_7d_hourly_site_hour_sketches_ms": hour_sketches_ms,
        "target_ms": TARGET_FIRST_QUERY_MS,
        "met_target": max(url_ms[-1], hour_sketches_ms, *site_ms.values()) <= TARGET_FIRST_QUERY_MS,
    }


KEYS_OF_DOCUMENTS = {"key": 1, "hours_of": 1}
"""The fields that tell a (key, day) document from a ranking and from hour sketches stored apart."""


def _is_key_document(doc: dict[str, Any]) -> bool:
    return not is_rank_document(doc) and not is_hour_sketches(doc)


def _ensure_data(settings: Settings, console: Console, events: int) -> tuple[Generation, str]:
    """The served generation of the cached load and the most viewed URL of its last day; loads
    the data, or recomputes views written before rankings existed, only when needed (Spark)."""

    def usable() -> tuple[Generation, str] | None:
        gen = _served(settings)
        if gen is None:
            return None
        url = _top_url(settings, gen, max(gen.day_map["page"]))
        return None if url is None else (gen, url)

    found = usable()
    if found is None:
        from batch_layer.job import BatchJob

        job = BatchJob(settings)
        try:
            ensure_loaded(settings, job, console, events)
            if usable() is None:
                console.print("recomputing the batch views (the served ones have no rankings)...")
                job.run(full=True)
        finally:
            job.close()
        found = usable()
        assert found is not None
    return found


def _sketch(visitors: list[str], lg_k: int) -> bytes:
    sketch = hll_sketch(lg_k, tgt_hll_type.HLL_8)
    for v in visitors:
        sketch.update(v)
    return bytes(sketch.serialize_compact())


def _seed_realtime(
    settings: Settings, gen: int, targets: list[tuple[str, str]], days: list[str]
) -> list[str]:
    """Realtime hashes (as the speed layer writes them) for the queried keys on ``days``."""
    rng = random.Random(5)
    r = redis.Redis.from_url(settings.redis_url)
    written = []
    try:
        with r.pipeline(transaction=True) as pipe:
            for view, key in targets:
                for day in days:
                    fields: dict[FieldT, EncodableT] = {}
                    total: list[str] = []
                    for hour in range(24):
                        visitors = [f"rt-{rng.randrange(5000)}" for _ in range(rng.randrange(20, 200))]
                        fields[keys.hour_field(keys.PV, hour)] = len(visitors)
                        fields[keys.hour_field(keys.SKETCH, hour)] = _sketch(visitors, settings.hll_lg_k)
                        total += visitors
                    fields[keys.PV] = len(total)
                    fields[keys.SKETCH] = _sketch(total, settings.hll_lg_k)
                    name = keys.realtime_key(gen, view, key, day)
                    pipe.delete(name)
                    pipe.hset(name, mapping=fields)
                    written.append(name)
            pipe.execute()
    finally:
        r.close()
    return written


def _cpu_seconds(api: psutil.Process) -> float:
    """User + system CPU time so far of the API: its process and, with several workers, theirs
    (uvicorn's supervisor and its worker processes)."""
    total = 0.0
    for process in (api, *api.children(recursive=True)):
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            total += times.user + times.system
    return total


CACHE_COUNTERS = ("hits", "misses", "stale")
"""The answer cache's counters (api.answer_cache) as /metrics exposes them, lambda_api_answer_cache_*."""


def _cache_counters(healthz: str) -> dict[str, float]:
    """The answer cache's counters of the worker that answers /metrics (absent: an API without it)."""
    text = httpx.get(healthz.replace("/healthz", "/metrics"), timeout=30).text
    found = re.finditer(r"^lambda_api_answer_cache_(\w+) (\S+)$", text, re.M)
    return {m[1]: float(m[2]) for m in found if m[1] in CACHE_COUNTERS}


def _answer_cache(
    before: dict[str, float], after: dict[str, float], commits: int, requests: int
) -> dict[str, Any]:
    """What the answer cache did over a measured run of one worker: hits and misses, the hit rate,
    and the speed-layer commits meanwhile (each makes the query's cached answer stale)."""
    delta = {name: int(after.get(name, 0) - before.get(name, 0)) for name in CACHE_COUNTERS}
    asked = delta["hits"] + delta["misses"]
    return {
        **delta,
        "hit_rate": round(delta["hits"] / asked, 4) if asked else None,
        "commits": commits,
        "requests_per_commit": round(requests / commits, 1) if commits else None,
    }


def _measure(
    load: ClosedLoop,
    api: psutil.Process,
    target: str,
    warmup: float,
    duration: float,
    commits: BackgroundCommits | None = None,
    counted: bool = False,
) -> dict[str, Any]:
    """One URL: asked once cold, then under load (warm-up, measured run), with the API's CPU and,
    ``counted`` (one worker, whose /metrics are all of the API's), what its answer cache did."""
    t0 = time.perf_counter()
    first = httpx.get(target, timeout=600)
    cold_ms = (time.perf_counter() - t0) * 1000
    first.raise_for_status()
    body = first.json()
    load.warm_up([target], warmup)
    healthz = target.split("/v1/")[0] + "/healthz"
    counters = _cache_counters(healthz) if counted else {}
    commits0 = commits.commits if commits is not None else 0
    cpu0 = _cpu_seconds(api)
    figures: dict[str, Any] = dict(load.measure([target], duration))
    committed = (commits.commits if commits is not None else 0) - commits0
    figures["commits_per_s"] = round(committed / max(figures["seconds"], 1e-9), 2)
    if counted and "/v1/" in target:
        requests = round(figures["requests_per_s"] * figures["seconds"])
        figures["answer_cache"] = _answer_cache(counters, _cache_counters(healthz), committed, requests)
    # The API is idle but for the measured attack, whose length vegeta reports. Its own CPU per
    # request is what it would serve with a core per worker, whatever else the machine runs
    # meanwhile (the load tool, other jobs).
    cpu_share = (_cpu_seconds(api) - cpu0) / max(figures["seconds"], 1e-9)
    figures["api_cpu_share"] = round(cpu_share, 3)
    per_request = cpu_share * 1000 / max(figures["requests_per_s"], 1)
    figures["api_cpu_ms_per_request"] = round(per_request, 3)
    figures["cold_first_request_ms"] = round(cold_ms, 1)
    if "series" in body:
        figures["series_points"] = len(body["series"])
    figures["url"] = target
    return figures


def _judged(figures: dict[str, Any], healthz: dict[str, Any]) -> dict[str, Any]:
    """A query's figures with its rate as a share of /healthz's on the same API, and the target."""
    ratio = figures["requests_per_s"] / max(healthz["requests_per_s"], 1e-9)
    figures["healthz_ratio"] = round(ratio, 3)
    figures["met_target"] = (
        ratio >= TARGET_HEALTHZ_RATIO
        and figures["p99_ms"] <= TARGET_P99_MS
        and figures["errors"] == 0
        and figures["non_2xx"] == 0
    )
    return figures


def _measure_api(
    load: ClosedLoop,
    api: subprocess.Popen[bytes],
    healthz: str,
    queries: dict[str, str],
    warmup: float,
    duration: float,
    commits: BackgroundCommits | None,
    workers: int,
) -> dict[str, Any]:
    """/healthz, then every query, on one running API (one or more workers)."""
    process = psutil.Process(api.pid)
    health = _measure(load, process, healthz, warmup, duration, commits)
    measured = {
        name: _measure(load, process, url, warmup, duration, commits, counted=workers == 1)
        for name, url in queries.items()
    }
    return {"healthz": health, "queries": {name: _judged(f, health) for name, f in measured.items()}}


def _stop(api: subprocess.Popen[bytes]) -> None:
    api.terminate()
    api.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--duration", type=float, default=15.0, help="seconds measured per URL")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds before each")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--port", type=int, default=None, help="API port (default: settings + 100)")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="uvicorn workers of each API measured"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout (e.g. `git worktree add ../base main`) whose API is measured the same "
        "way right after this one's, against the same data: a before/after from one run",
    )
    parser.add_argument(
        "--commit-interval",
        type=float,
        default=None,
        help="seconds between two speed-layer commits while the APIs are measured (default: the "
        "speed layer's trigger interval, LAMBDA_SPEED_TRIGGER_S); 0: none",
    )
    parser.add_argument(
        "--no-cache-off",
        action="store_true",
        help="skip measuring this API once more with its answer cache off (one worker)",
    )
    parser.add_argument(
        "--baseline-label",
        default=None,
        help="what the baseline is, recorded in the result (default: the commit checked out there)",
    )
    args = parser.parse_args(argv)
    console = Console()
    settings = bench_settings(get_settings())
    port = args.port or settings.api_port + 100

    with running_stack(settings):
        ensure_topics(settings)
        gen, url = _ensure_data(settings, console, args.events)
        last_day = max(gen.day_map["page"])
        end_7 = datetime.fromisoformat(last_day).replace(tzinfo=UTC) + timedelta(hours=12)
        end_30 = datetime.fromisoformat(last_day).replace(tzinfo=UTC) + timedelta(days=1)
        days = [(end_30 - timedelta(days=d)).date().isoformat() for d in (1, 2)]
        seeded = _seed_realtime(settings, gen.gen, [("page", url), ("site", SITE)], days)

        def query(path: str, **params: str) -> str:
            return f"http://127.0.0.1:{port}{path}?{urlencode(params)}"

        window_7 = {"from": (end_7 - timedelta(days=7)).isoformat(), "to": end_7.isoformat()}
        queries = {
            "pageviews_7d_hourly_url": query("/v1/pageviews", url=url, granularity="hour", **window_7),
            "unique_visitors_7d_url": query("/v1/unique-visitors", url=url, granularity="day", **window_7),
            "pageviews_30d_daily_site": query(
                "/v1/pageviews",
                site=SITE,
                granularity="day",
                **{"from": (end_30 - timedelta(days=30)).isoformat(), "to": end_30.isoformat()},
            ),
        }
        healthz = f"http://127.0.0.1:{port}/healthz"
        load = ClosedLoop(installed(settings.cache_dir), args.connections)
        runs: dict[str, dict[int, dict[str, Any]]] = {}
        uncached: dict[str, Any] = {}
        load_before = os.getloadavg()
        # (label, checkout, worker counts, extra environment of the API)
        plan: list[tuple[str, Path, list[int], dict[str, str]]] = [("this", PROJECT_ROOT, args.workers, {})]
        if not args.no_cache_off:
            plan.append(("cache_off", PROJECT_ROOT, args.workers[:1], {"LAMBDA_API_ANSWER_CACHE_BYTES": "0"}))
        if args.baseline:
            plan.append(("baseline", args.baseline.resolve(), args.workers, {}))
        interval = settings.speed_trigger_s if args.commit_interval is None else args.commit_interval
        commits = BackgroundCommits(settings.redis_url, seeded, interval, gen.cut) if interval > 0 else None
        try:
            with commits if commits is not None else contextlib.nullcontext():
                for label, root, worker_counts, env in plan:
                    runs[label] = {}
                    for workers in worker_counts:
                        console.print(
                            f"measuring the API of {root.name} ({label}) with {workers} worker(s)..."
                        )
                        api = start_api(settings, port, workers, root, env)
                        try:
                            runs[label][workers] = _measure_api(
                                load, api, healthz, queries, args.warmup, args.duration, commits, workers
                            )
                            if label == "this" and workers == args.workers[0]:
                                uncached = _uncached_keys(settings, gen, last_day, {url}, window_7, port)
                        finally:
                            _stop(api)
        finally:
            r = redis.Redis.from_url(settings.redis_url)
            if seeded:
                r.delete(*seeded)
            r.close()

    for label, by_workers in runs.items():
        for workers, measured in by_workers.items():
            _print_table(console, f"API ({label}), {workers} uvicorn worker(s)", measured)
    if uncached:
        first = uncached["pageviews_7d_hourly_url"]
        console.print(
            f"first query of a key not yet read: 7-day hourly pageviews of {first['n']} URLs p50 "
            f"{first['p50_ms']} ms, p95 {first['p95_ms']} ms, max {first['max_ms']} ms; 30-day daily "
            f"pageviews of the other sites {uncached['pageviews_30d_daily_site_ms']} ms; 7-day hourly "
            f"unique visitors of {SITE}, its hour sketches read for the first time: "
            f"{uncached['unique_visitors_7d_hourly_site_hour_sketches_ms']} ms "
            f"(target <= {TARGET_FIRST_QUERY_MS:.0f} ms: {'met' if uncached['met_target'] else 'not met'})"
        )
    this = runs["this"]
    first_workers = args.workers[0]
    result: dict[str, Any] = {
        "targets": {"healthz_ratio": TARGET_HEALTHZ_RATIO, "p99_ms": TARGET_P99_MS},
        "setup": {
            "workers": first_workers,
            "events": args.events,
            "connections": args.connections,
            "seconds_per_query": args.duration,
            "warmup_seconds_per_query": args.warmup,
            "load_tool": load.version(),
            "generation": gen.gen,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
        "queries": this[first_workers]["queries"],
        "healthz": this[first_workers]["healthz"],
        "by_workers": {str(w): m for w, m in this.items()},
        "first_query_of_uncached_keys": uncached,
        "commit_interval_s": interval,
    }
    if "cache_off" in runs:
        result["answer_cache_off"] = {"by_workers": {str(w): m for w, m in runs["cache_off"].items()}}
    if args.baseline:
        result["baseline"] = {
            "label": args.baseline_label or _commit_of(args.baseline.resolve()),
            "by_workers": {str(w): m for w, m in runs["baseline"].items()},
        }
    path = write_result("api", result)
    console.print(f"-> {path}")
    return 0


def _print_table(console: Console, title: str, measured: dict[str, Any]) -> None:
    table = Table(title=title)
    columns = (
        "URL",
        "req/s",
        "x /healthz",
        "p50 ms",
        "p99 ms",
        "cold ms",
        "CPU ms/req",
        "hit rate",
        "target met",
    )
    for column in columns:
        table.add_column(column)
    h = measured["healthz"]
    table.add_row(
        "/healthz",
        f"{h['requests_per_s']:,.0f}",
        "1",
        f"{h['p50_ms']:.2f}",
        f"{h['p99_ms']:.2f}",
        f"{h['cold_first_request_ms']:,.0f}",
        f"{h['api_cpu_ms_per_request']:.3f}",
        "",
        "",
    )
    for name, f in measured["queries"].items():
        table.add_row(
            name,
            f"{f['requests_per_s']:,.0f}",
            f"{f['healthz_ratio']:.2f}",
            f"{f['p50_ms']:.2f}",
            f"{f['p99_ms']:.2f}",
            f"{f['cold_first_request_ms']:,.0f}",
            f"{f['api_cpu_ms_per_request']:.3f}",
            _hit_rate(f),
            str(f["met_target"]),
        )
    console.print(table)


def _hit_rate(figures: dict[str, Any]) -> str:
    cache = figures.get("answer_cache") or {}
    rate = cache.get("hit_rate")
    return "" if rate is None else f"{rate:.3f} ({cache['commits']} commits)"


def _commit_of(root: Path) -> str:
    """The commit checked out at ``root`` (unknown when it is not a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
